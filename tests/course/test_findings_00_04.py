"""The course readers' findings on notebooks 00–04, each pinned so it cannot come back:
an exercise answerable from what the notebook shows, a zh edition whose checks accept
its own words and are graded on the Chinese sample corpus, and zh prose and feedback
in Chinese.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from memlib import normalize_recall_query
from memlib.errors import RemoteMemoryError
from memlib.notebook.exercises import STATUS_WORDS, all_exercises, check, hint
from memlib.notebook.exercises import n04_score as n04
from memlib.notebook.language import use_language
from memlib.notebook.solutions import answer_cells
from memlib.sample import SAMPLE_AS_OF, open_sample_store, sample_records
from tests.support.notebooks import output_text, read_cells, source

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "notebooks"
CATALOGS = REPO / "i18n" / "zh"
MINE = ("00", "01", "02", "03", "04")
EDITIONS = {"en": ("", "solutions"), "zh": ("zh", "zh/solutions")}
EXERCISES = [e for e in all_exercises() if e.id[:2] in MINE]


def _editions(name: str) -> list[tuple[str, Path]]:
    return [
        (lang, FOLDER / folder / f"{name}.ipynb")
        for lang, folders in EDITIONS.items()
        for folder in folders
    ]


def _cell(path: Path, cell_id: str) -> str:
    return next(source(c) for c in read_cells(path) if c["id"] == cell_id)


# 1 · 04.2 can be answered from what notebook 04 shows, and no hint gives the word away.


def _held_terms(lang: str) -> tuple[str, tuple[str, ...]]:
    """The 04.2 query of an edition and the terms of it conversation-009 holds, from the
    edition's corpus."""
    use_language(lang)
    try:
        query = n04.TOTAL_QUERY_ZH if lang == "zh" else n04.TOTAL_QUERY
        row = n04._row(query, SAMPLE_AS_OF)
    finally:
        use_language("en")
    return query, tuple(row["matched_terms"].split(", "))


@pytest.mark.parametrize(
    "case", _editions("04_score"), ids=lambda c: c[1].relative_to(FOLDER).as_posix()
)
def test_the_text_04_2_needs_is_shown_before_it(case: tuple[str, Path]) -> None:
    lang, path = case
    query, held = _held_terms(lang)
    cells = read_cells(path)
    index = next(i for i, exercise in answer_cells({"cells": cells}) if exercise == "04.2")
    assert f"`{query}`" in source(cells[index - 1]), f"04.2 should ask about {query!r}"
    shown = "\n".join(output_text(c) for c in cells[:index])
    unseen = [term for term in held if term not in shown]
    assert unseen == [], f"{path.name}: no output above 04.2 shows {unseen}"


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_no_04_2_hint_or_message_names_the_terms_to_find(lang: str) -> None:
    _, held = _held_terms(lang)
    secret = [t for t in held if t not in n04.RECORD]  # "conversation" is in its id
    use_language(lang)
    try:
        row = n04._row(n04.TOTAL_QUERY_ZH if lang == "zh" else n04.TOTAL_QUERY, SAMPLE_AS_OF)
        terms, recency = int(row["query_term_count"]), float(row["recency"])
        one_short = 0.85 * (terms - 1) / terms + 0.15 * recency  # one term missed
        texts = [repr(hint("04.2", n)) for n in (1, 2)]
        texts += [repr(check("04.2", a)) for a in (one_short, 1.198331, 1.0, 0.9, 0.5)]
    finally:
        use_language("en")
    assert "count the matched terms" in texts[2] or "再数一遍" in texts[2]
    for text in texts:
        assert not [t for t in secret if t in text], f"{lang}: {text!r} gives {secret} away"


# 2, 3 · zh 00.2 accepts the zh stage names; the zh promise is what the zh check prints.


@pytest.mark.parametrize("name", ["稳定排序", "stable rank", " 稳定 排序 ", "Stable Rank"])
def test_00_2_accepts_the_stage_in_either_language(name: str, zh: None) -> None:
    assert check("00.2", name).status == "correct"


@pytest.mark.parametrize("name", ["规范化", "候选", "评分", "渲染"])
def test_00_2_knows_every_zh_stage_name(name: str, zh: None) -> None:
    feedback = check("00.2", name)
    assert feedback.status == "try again" and "不是一个阶段" not in feedback.message


def _status_words(lang: str) -> set[str]:
    """What the check of an edition prints for an unanswered, a wrong and a right answer."""
    use_language(lang)
    try:
        shown = [repr(check("00.1", a)) for a in (..., "kubernetes autoscaling", "llm记忆 LoCoMo")]
    finally:
        use_language("en")
    words = {re.search(r" · (.+?) — ", text).group(1) for text in shown}  # type: ignore[union-attr]
    assert words == set(STATUS_WORDS[lang].values()) - {STATUS_WORDS[lang]["hint"]}
    return words


@pytest.mark.parametrize(
    "case", [*_editions("00_tour")], ids=lambda c: c[1].relative_to(FOLDER).as_posix()
)
def test_00_promises_what_the_check_prints(case: tuple[str, Path]) -> None:
    lang, path = case
    text = _cell(path, "d08d413d")
    marker = "**How the exercises work.**" if lang == "en" else "**练习怎么做。**"
    promise = text[text.index(marker) + len(marker) :]
    pattern = r"(?<!\*)\*([^*]+)\*(?!\*)" if lang == "en" else r"「([^」]+)」"
    promised = set(re.findall(pattern, promise.replace("\n", " ")))
    assert promised == _status_words(lang), f"{path.name} promises {promised}"
    assert "not attempted yet" not in promise


# 4 · 14 is marked as the optional extension, in both editions.


@pytest.mark.parametrize(
    "case", [*_editions("00_tour")], ids=lambda c: c[1].relative_to(FOLDER).as_posix()
)
def test_00_marks_14_as_the_optional_extension(case: tuple[str, Path]) -> None:
    lang, path = case
    text = _cell(path, "d08d413d")
    row = next(line for line in text.splitlines() if line.startswith("| 14 |"))
    word = "optional extension" if lang == "en" else "选修扩展"
    assert word in row, row
    assert word in text.replace(row, ""), f"{path.name}: say what 14 is below the table too"


# 5 · zh sentences and terms.

ZH = {name: (CATALOGS / f"{name}.md").read_text(encoding="utf-8") for name in [
    "00_tour", "01_stored_records", "02_normalize", "03_candidates", "04_score"
]}  # fmt: skip
DRIFT = ("本篇", "notebook", "词法", "排序键", "平局规则", "捕获时间", "捕获于", "拍下的时间")


@pytest.mark.parametrize(
    ("name", "rewritten"),
    [
        ("04_score", "覆盖查询更多胜过更新"),
        ("03_candidates", "候选“它还没有"),
        ("00_tour", "渲染后"),
        ("02_normalize", "真正的词都在里面"),
    ],
)
def test_rewritten_zh_sentences_stay_rewritten(name: str, rewritten: str) -> None:
    assert rewritten not in ZH[name]
    assert rewritten not in json.dumps(
        read_cells(FOLDER / "zh" / f"{name}.ipynb"), ensure_ascii=False
    )


@pytest.mark.parametrize("name", ["03_candidates", "04_score"])
def test_zh_stage_arrow_is_in_chinese(name: str) -> None:
    first = source(read_cells(FOLDER / "zh" / f"{name}.ipynb")[0])
    assert "normalize →" not in first and "→ render" not in first
    arrow = re.sub(r"\*\*|\s", "", first)
    assert "规范化→候选→评分→稳定排序→渲染" in arrow


@pytest.mark.parametrize("name", sorted(ZH))
def test_zh_catalog_uses_the_course_terms(name: str) -> None:
    prose = re.sub(r"```.*?```|`[^`\n]*`|\]\([^)]*\)", "", ZH[name], flags=re.S)
    found = [term for term in DRIFT if term in prose]
    assert found == [], f"i18n/zh/{name}.md: {found}"
    title = next(line for line in ZH[name].splitlines() if line.startswith("# "))
    assert "：" in title and ":" not in title, title
    nav = ZH[name].rstrip().splitlines()[-1]
    assert re.findall(r"篇:", nav) == [], nav


# 6 · the zh exercises of 02, 03 and 04 are about, and graded on, the Chinese corpus.

ZH_RECORDS = {item["memory_id"]: item for item in sample_records("zh")}
EN_RECORDS = {item["memory_id"]: item for item in sample_records("en")}


def _exercise_text(path: Path, exercise_id: str) -> str:
    cells = read_cells(path)
    index = next(i for i, e in answer_cells({"cells": cells}) if e == exercise_id)
    return source(cells[index - 1])


@pytest.mark.parametrize("name", ["02_normalize", "03_candidates", "04_score"])
def test_zh_exercises_name_the_chinese_corpus_and_open_it_above(name: str) -> None:
    for folder in EDITIONS["zh"]:
        cells = read_cells(FOLDER / folder / f"{name}.ipynb")
        first = answer_cells({"cells": cells})[0][0]
        opened = [
            i
            for i, c in enumerate(cells[:first])
            if c["cell_type"] == "code" and 'lang="zh"' in source(c)
        ]
        assert opened, f"{folder}/{name}: no code cell opens the Chinese corpus above"
        heading = next(i for i, c in enumerate(cells) if "## 练习" in source(c))
        for index, exercise_id in answer_cells({"cells": cells}):
            if exercise_id == "02.1":  # about normalize alone: no corpus
                continue
            told = "".join(source(c) for c in cells[heading:index] if c["cell_type"] == "markdown")
            assert "zh_store" in told, f"{folder}/{name}: {exercise_id} does not name zh_store"


def test_zh_02_2_quotes_the_chinese_record() -> None:
    text = _exercise_text(FOLDER / "zh" / "02_normalize.ipynb", "02.2")
    assert ZH_RECORDS["conversation-010"]["summary"].rstrip("。") in text
    assert EN_RECORDS["conversation-010"]["summary"].rstrip(".") not in text


def _quoted_queries(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def test_zh_03_is_graded_on_the_chinese_corpus(zh: None, tmp_path: Path) -> None:
    assert check("03.1", "复查 快照").status == "correct"
    assert check("03.1", "retained year").status == "try again"  # the English corpus's answer
    text = _exercise_text(FOLDER / "zh" / "03_candidates.ipynb", "03.2")
    query = next(q for q in _quoted_queries(text) if re.search(r"[\u4e00-\u9fff]", q))
    store = open_sample_store(tmp_path, lang="zh")
    from memlib.notebook.views import recall

    result = recall(store, query, SAMPLE_AS_OF, 10)
    counts = (result.searched_records, result.candidate_records)
    assert check("03.2", counts).status == "correct"


def test_zh_04_is_graded_on_the_chinese_corpus(zh: None, tmp_path: Path) -> None:
    text = _exercise_text(FOLDER / "zh" / "04_score.ipynb", "04.2")
    query = next(q for q in _quoted_queries(text) if re.search(r"[\u4e00-\u9fff]", q))
    from memlib.notebook.views import score_view

    store = open_sample_store(tmp_path, lang="zh")
    row = score_view(store, query, SAMPLE_AS_OF, 10).set_index("memory_id").loc["conversation-009"]
    assert check("04.2", float(row["total"])).status == "correct"
    # a total the English corpus's query gives for it is not this edition's answer
    assert check("04.2", 0.85 * 2 / 3 + 0.15 * float(row["recency"])).status == "try again"


# 7 · what the zh checks and hints of 00–04 print is Chinese (library errors aside).

ENGLISH_RUN = re.compile(r"[A-Za-z]{2,}(?: [A-Za-z']+){3,}")


def _library_errors(answer: Any) -> set[str]:
    """The library's own messages (they stay English in every edition: language.py)."""
    if not isinstance(answer, str):
        return set()
    try:
        normalize_recall_query(answer, user_scope="0" * 16, query_id="q", issued_at=SAMPLE_AS_OF)
    except RemoteMemoryError as exc:
        return {str(exc)}
    return set()


def _solution_answer(solution: str) -> Any:
    namespace: dict[str, Any] = {}
    exec(solution, namespace)  # noqa: S102 — the course's own solution code
    return namespace["answer"]


@pytest.mark.parametrize("item", EXERCISES, ids=lambda e: e.id)
def test_zh_feedback_has_no_english_sentence(item: Any, zh: None) -> None:
    answers = [..., _solution_answer(item.solution), *(a for a, _ in item.wrong_answers)]
    shown = [(a, repr(check(item.id, a))) for a in answers]
    shown += [(None, repr(hint(item.id, n))) for n in range(1, len(item.hints_zh) + 1)]
    for answer, text in shown:
        for error in _library_errors(answer):
            text = text.replace(error, "")
        english = ENGLISH_RUN.findall(text)
        assert english == [], f"{item.id} {answer!r}: {text}"


@pytest.mark.parametrize(
    "case", _editions("03_candidates"), ids=lambda c: c[1].relative_to(FOLDER).as_posix()
)
def test_the_03_1_answer_of_each_edition_is_not_printed_above_it(case: tuple[str, Path]) -> None:
    """Its solution picks the edition's query with ``tr``, which test_exercises.py's literal
    check cannot read: the edition's own answer is looked for here."""
    lang, path = case
    solution = next(e.solution for e in EXERCISES if e.id == "03.1")
    use_language(lang)
    try:
        answer = _solution_answer(solution)
        assert check("03.1", answer).status == "correct"
    finally:
        use_language("en")
    cells = read_cells(path)
    index = next(i for i, e in answer_cells({"cells": cells}) if e == "03.1")
    assert answer not in "\n".join(output_text(c) for c in cells[:index])
