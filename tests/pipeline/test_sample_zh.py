"""The Chinese sample corpus: the English one's records, ids and timestamps, in Chinese."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from memlib import (
    RecallEngine,
    RemoteMemoryValidationError,
    build_recall_candidates,
    normalize_recall_query,
)
from memlib.sample import (
    SAMPLE_AS_OF,
    SAMPLE_QUERY,
    SAMPLE_QUERY_ZH,
    open_sample_store,
    sample_records,
)

HAN = re.compile(r"[\u4e00-\u9fff]")


def _skeleton(record: dict) -> tuple:
    source = record["source"]
    return (
        record["kind"],
        record["memory_id"],
        source.source_id,
        source.source_type,
        source.captured_at,
    )


def _dump(records: tuple[dict, ...]) -> str:
    rows = [[_skeleton(r), r["summary"], r["content"], r["source"].title] for r in records]
    return json.dumps(rows, ensure_ascii=False, default=str)


def test_same_ids_kinds_sources_and_timestamps_as_english():
    english, chinese = sample_records(), sample_records("zh")
    assert len(chinese) == len(english) == 15
    assert [_skeleton(r) for r in chinese] == [_skeleton(r) for r in english]


def test_every_text_is_chinese_and_none_is_the_english_one():
    english = {r["memory_id"]: r for r in sample_records()}
    for record in sample_records("zh"):
        texts = (record["summary"], record["content"], record["source"].title)
        # 011 stays Japanese in its title and content (設計 is not 设计): still Han.
        assert all(HAN.search(text) for text in texts), record["memory_id"]
        if english[record["memory_id"]]["summary"].isascii():
            assert record["summary"] != english[record["memory_id"]]["summary"]


def test_english_corpus_is_the_default_and_unchanged():
    assert sample_records() == sample_records("en")
    assert SAMPLE_QUERY == "layered memory"
    # A fingerprint of the English corpus the tests, the demo and the notebooks all pin.
    digest = hashlib.sha256(_dump(sample_records()).encode()).hexdigest()[:16]
    assert digest == _EN_FINGERPRINT


def test_chinese_query_finds_several_records_through_bigrams(tmp_path):
    store = open_sample_store(tmp_path, lang="zh")
    query = normalize_recall_query(
        SAMPLE_QUERY_ZH, user_scope=store.user_scope, query_id="q-zh", issued_at=SAMPLE_AS_OF
    )
    assert query.terms == ("分层", "层记", "记忆")
    candidates = build_recall_candidates(query, store.read_all())
    assert len(candidates) >= 3
    # a record matches through a bigram it shares, not the whole run: 009 has only 记忆
    matched = {c.record.memory_id: c.matched_terms for c in candidates}
    assert matched["conversation-009"] == ("记忆",)
    assert set(matched["conversation-003"]) == set(query.terms)


def test_chinese_worked_example_scores_like_the_english_one(tmp_path):
    english = RecallEngine(open_sample_store(tmp_path / "en")).recall(
        SAMPLE_QUERY, as_of=SAMPLE_AS_OF
    )
    chinese = RecallEngine(open_sample_store(tmp_path / "zh", lang="zh")).recall(
        SAMPLE_QUERY_ZH, as_of=SAMPLE_AS_OF
    )
    assert chinese.hits[0].memory_id == english.hits[0].memory_id == "conversation-003"
    assert chinese.hits[0].score == english.hits[0].score
    assert chinese.searched_records == english.searched_records
    assert len(chinese.hits) > len(english.hits)


def test_chinese_ties_and_profiles_keep_their_lessons(tmp_path):
    store = open_sample_store(tmp_path, lang="zh")
    engine = RecallEngine(store)
    tied = engine.recall("向量重排", as_of=SAMPLE_AS_OF)
    assert [h.memory_id for h in tied.hits] == ["conversation-005", "conversation-006"]
    assert tied.hits[0].score == tied.hits[1].score
    # every term of 后端工程师 is in both profiles, none in a conversation: no candidate
    profiles = [r for r in store.read_all() if r.kind.value == "profile"]
    assert all("后端工程师" in r.content for r in profiles)
    assert engine.recall("后端工程师", as_of=SAMPLE_AS_OF).candidate_records == 0
    profile = store.latest_profile()
    assert profile is not None and "后端工程师" in profile.content


def test_a_root_holds_one_corpus(tmp_path):
    open_sample_store(tmp_path)
    with pytest.raises(RemoteMemoryValidationError, match="'en' sample corpus"):
        open_sample_store(tmp_path, lang="zh")
    open_sample_store(tmp_path)  # reopening in its own language is fine
    zh = open_sample_store(tmp_path, user_id="bob", lang="zh")  # another scope, another file
    assert open_sample_store(tmp_path, user_id="bob", lang="zh").read_all() == zh.read_all()


@pytest.mark.parametrize("lang", ["fr", "", "ZH", None])
def test_unknown_language_is_refused(tmp_path, lang):
    with pytest.raises(RemoteMemoryValidationError, match="no sample corpus"):
        sample_records(lang)
    with pytest.raises(RemoteMemoryValidationError, match="no sample corpus"):
        open_sample_store(tmp_path, lang=lang)
    assert list(tmp_path.iterdir()) == []  # refused before anything was created


# sha256 of ``_dump(sample_records())`` as the corpus stood before the Chinese one was added
_EN_FINGERPRINT = "f1f244b86d990157"
