"""The LoCoMo harness on a tiny LoCoMo-format fixture written here (never the real data)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memlib.candidates import scan_recall_candidates
from memlib.cli import main
from memlib.errors import RemoteMemoryValidationError
from memlib.eval.locomo import (
    ConversationIndex,
    clean_evidence,
    evaluate_ranker,
    format_table,
    load_locomo,
    parse_locomo,
)
from memlib.normalize import normalize_recall_query


def _turn(speaker: str, dia_id: str, text: str, **extra: str) -> dict[str, str]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text, **extra}


def tiny_locomo() -> list[dict]:
    conversation = {
        "speaker_a": "Ann",
        "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            _turn("Ann", "D1:1", "Hi Bob! How was your week?"),
            _turn("Bob", "D1:2", "Great, I adopted a puppy named Biscuit."),
            _turn(
                "Ann",
                "D1:3",
                "Lovely! I started pottery classes on Tuesday.",
                img_url="http://example.invalid/x.jpg",
                blip_caption="a photo of a clay bowl",
            ),
        ],
        "session_2_date_time": "10:00 am on 20 June, 2023",
        "session_2": [
            _turn("Bob", "D2:1", "Biscuit chewed my guitar yesterday."),
            _turn("Ann", "D2:2", "Oh no! My pottery teacher moved to Lisbon."),
            _turn("Bob", "D2:3", "Lisbon is a beautiful city for a holiday."),
        ],
        # A date with no session: must not become the as_of.
        "session_3_date_time": "9:00 am on 1 January, 2024",
    }
    qa = [
        {
            "question": "What is the name of Bob's puppy?",
            "answer": "Biscuit",
            "evidence": ["D1:2"],
            "category": 4,
        },
        {
            "question": "Where did Ann's pottery teacher move?",
            "answer": "Lisbon",
            "evidence": ["D:2:2"],
            "category": 4,
        },
        {
            "question": "What did Biscuit chew, and when did Bob adopt him?",
            "answer": "x",
            "evidence": ["D2:01; D1:2", "D9:9"],
            "category": 1,
        },
        {
            "question": "When did Ann start pottery classes?",
            "answer": "Tuesday",
            "evidence": ["D1:3"],
            "category": 2,
        },
        {"question": "Would Ann enjoy Lisbon?", "answer": "likely", "evidence": [], "category": 3},
        {
            "question": "What is the name of Ann's puppy?",
            "answer": "none",
            "adversarial_answer": "Biscuit",
            "evidence": ["D1:2"],
            "category": 5,
        },
    ]
    return [
        {
            "sample_id": "conv-x",
            "conversation": conversation,
            "qa": qa,
            "event_summary": {},
            "observation": {},
            "session_summary": {},
        }
    ]


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "tiny-locomo.json"
    path.write_text(json.dumps(tiny_locomo()), encoding="utf-8")
    return path


def test_parse_follows_the_protocol(data_file):
    (conv,) = load_locomo(data_file)
    assert conv.sample_id == "conv-x"
    assert [r.memory_id for r in conv.records][:2] == ["conv-x/D1:1", "conv-x/D1:2"]
    assert len(conv.records) == 6
    assert conv.records[1].content == "Bob: Great, I adopted a puppy named Biscuit."
    assert conv.records[2].content.endswith("[shared an image: a photo of a clay bowl]")
    assert conv.records[0].captured_at == "2023-05-08T13:56:00Z"
    assert conv.records[3].captured_at == "2023-06-20T10:00:00Z"
    # as_of is the last session's date, not the last date key.
    assert conv.as_of == datetime(2023, 6, 20, 10, 0, tzinfo=UTC)
    # The category-3 item without evidence is skipped; the others are cleaned.
    assert [q.category for q in conv.questions] == [4, 4, 1, 2, 5]
    assert conv.questions[1].evidence == ("conv-x/D2:2",)
    assert conv.questions[2].evidence == ("conv-x/D2:1", "conv-x/D1:2")


def test_clean_evidence_rules():
    turns = {"D1:2", "D11:26", "D30:5", "D8:6", "D9:17"}
    raw = ["D8:6; D9:17", "D:11:26", "D30:05", "D1:2,D1:2", "D99:1", "nonsense"]
    assert clean_evidence(raw, turns) == ("D8:6", "D9:17", "D11:26", "D30:5", "D1:2")


def test_parse_rejects_bad_input(tmp_path):
    with pytest.raises(RemoteMemoryValidationError, match="list"):
        parse_locomo({"sample_id": "x"})  # type: ignore[arg-type]
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    with pytest.raises(RemoteMemoryValidationError, match="not JSON"):
        load_locomo(bad)
    with pytest.raises(RemoteMemoryValidationError, match="not found"):
        load_locomo(tmp_path / "missing.json")


def test_index_scan_equals_the_reference_scan(data_file):
    (conv,) = load_locomo(data_file)
    index = ConversationIndex(conv.records)
    for question in conv.questions:
        query = normalize_recall_query(
            question.question,
            user_scope=conv.user_scope,
            limit=10,
            query_id="q",
            issued_at=conv.as_of,
        )
        assert index.scan(query) == scan_recall_candidates(query, conv.records)


def test_metrics_and_report_shape(data_file):
    conversations = load_locomo(data_file)
    report = evaluate_ranker(conversations, "bm25+stopwords", ks=(1, 5))
    assert set(report) == {"overall", "by_category", "category_5", "questions"}
    assert report["questions"] == 4
    assert set(report["by_category"]) == {"1", "2", "3", "4"}
    assert report["by_category"]["3"]["n"] == 0
    assert report["category_5"]["n"] == 1
    overall = report["overall"]
    assert set(overall) == {"R@1", "H@1", "R@5", "H@5", "n"}
    # Six records, so the multi-hop question finds both turns within 5; the two
    # single-hop questions are answered by their only content-term match at rank 1.
    assert report["by_category"]["4"]["R@1"] == 1.0
    assert overall["R@5"] == 1.0 and overall["H@5"] == 1.0
    assert 0.0 <= overall["R@1"] <= overall["H@1"] <= 1.0
    table = format_table({"bm25+stopwords": report}, (1, 5))
    assert "overall (categories 1-4)" in table and "category 5" in table


def test_cli_runs_and_writes_the_report(data_file, tmp_path, capsys):
    out = tmp_path / "report.json"
    code = main(
        [
            "eval",
            "locomo",
            "--data",
            str(data_file),
            "--ranker",
            "baseline",
            "--ranker",
            "bm25",
            "--k",
            "1,5,10",
            "--report",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    printed = capsys.readouterr().out
    assert "baseline" in printed and "bm25" in printed and "R@10" in printed
    report = json.loads(out.read_text(encoding="utf-8"))
    assert list(report) == ["baseline", "bm25"]
    assert set(report["bm25"]["overall"]) >= {"R@1", "R@5", "R@10", "H@10"}


def test_cli_errors_are_one_line(data_file, tmp_path, capsys):
    code = main(["eval", "locomo", "--data", str(data_file), "--ranker", "nope", "--quiet"])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("memlib: error: unknown ranker 'nope'") and err.count("\n") == 1
    code = main(
        [
            "eval",
            "locomo",
            "--data",
            str(tmp_path / "missing.json"),
            "--quiet",
            "--ranker",
            "baseline",
        ]
    )
    assert code == 2
    assert "not found" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["eval", "locomo", "--data", str(data_file), "--k", "0,x"])


def test_cli_reads_hybrid_through_the_global_embedder(data_file, tmp_path, capsys):
    """``memlib --embedder X eval locomo``: hybrid scores X's vectors as a store of them
    would; on pairs there is no lexical-only row (a scan knows no turn before)."""
    out = tmp_path / "report.json"
    code = main(
        [
            "--embedder",
            "hashing+pair",
            "eval",
            "locomo",
            "--data",
            str(data_file),
            "--ranker",
            "hybrid",
            "--no-cv",
            "--report",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    assert "dense rankers read vectors of memlib-hashing-64+pair" in capsys.readouterr().out
    assert list(json.loads(out.read_text(encoding="utf-8"))) == ["hybrid"]
    code = main(
        [
            "--embedder",
            "hashing",
            "eval",
            "locomo",
            "--data",
            str(data_file),
            "--ranker",
            "hybrid",
            "--no-cv",
            "--report",
            str(out),
            "--quiet",
        ]
    )
    assert code == 0
    assert list(json.loads(out.read_text(encoding="utf-8"))) == ["hybrid", "hybrid/lexical-only"]


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (b"\xff\xfe\x00bad", "not JSON"),
        (b"[1]", "malformed: TypeError"),
        (b'[{"sample_id": 1}]', "malformed: KeyError"),
    ],
)
def test_data_of_another_shape_is_one_line_not_a_traceback(tmp_path, capsys, content, words):
    path = tmp_path / "data.json"
    path.write_bytes(content)
    assert main(["eval", "locomo", "--data", str(path), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memlib: error: LoCoMo data is ") and words in err
    assert err.count("\n") == 1 and "Traceback" not in err
