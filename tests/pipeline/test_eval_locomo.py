"""The LoCoMo harness on a tiny LoCoMo-format fixture written here (never the real data)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memlib.candidates import scan_recall_candidates
from memlib.cli import main
from memlib.errors import RemoteMemoryValidationError
from memlib.eval.locomo import (
    ConversationIndex,
    _metrics,
    clean_evidence,
    evaluate_ranker,
    format_table,
    load_locomo,
    parse_locomo,
    session_of,
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
    assert set(report) == {"overall", "by_category", "category_5", "categories_1_5", "questions"}
    assert report["questions"] == 4
    assert set(report["by_category"]) == {"1", "2", "3", "4"}
    assert report["by_category"]["3"]["n"] == 0
    assert report["category_5"]["n"] == 1
    assert report["categories_1_5"]["n"] == 5
    overall = report["overall"]
    assert set(overall) == {f"{m}@{k}" for m in ("R", "H", "Sany", "Sall") for k in (1, 5)} | {"n"}
    # Six records, so the multi-hop question finds both turns within 5; the two
    # single-hop questions are answered by their only content-term match at rank 1.
    assert report["by_category"]["4"]["R@1"] == 1.0
    assert overall["R@5"] == 1.0 and overall["H@5"] == 1.0
    assert 0.0 <= overall["R@1"] <= overall["H@1"] <= overall["Sany@1"] <= 1.0
    # The multi-hop question's evidence is in sessions 1 and 2: one turn cannot reach both.
    multi = report["by_category"]["1"]
    assert (multi["Sall@1"], multi["Sany@5"], multi["Sall@5"]) == (0.0, 1.0, 1.0)
    table = format_table({"bm25+stopwords": report}, (1, 5))
    assert "overall (categories 1-4)" in table and "category 5" in table
    assert "categories 1-5" in table


def _row(category: int, evidence: str, ranked: str) -> tuple[int, tuple[str, ...], tuple[str, ...]]:
    return (
        category,
        tuple(f"c/{e}" for e in evidence.split()),
        tuple(f"c/{r}" for r in ranked.split()),
    )


def test_session_level_any_and_all_on_hand_made_rows():
    """Sany@k: a top-k turn in one of the evidence sessions; Sall@k: in every one. Turn
    level and session level differ: D1:3 is not the evidence D1:2, but shares its session."""
    rows = [
        _row(4, "D1:2", "D1:3 D2:1"),  # turn miss, session hit
        _row(1, "D1:2 D3:4", "D3:4 D2:2 D1:1"),  # two sessions: D3 at 1, D1 only at 3
        _row(2, "D2:2", "D1:1 D3:1 D2:5"),  # session reached at 3 only
        _row(5, "D10:1 D1:1", "D1:9"),  # category 5: D10 is not D1
    ]
    m = _metrics(rows[:3], (1, 2, 3))
    assert (m["R@1"], m["H@1"], m["Sany@1"], m["Sall@1"]) == (0.1667, 0.3333, 0.6667, 0.3333)
    assert (m["Sany@2"], m["Sall@2"]) == (0.6667, 0.3333)
    assert (m["R@3"], m["H@3"], m["Sany@3"], m["Sall@3"]) == (0.1667, 0.3333, 1.0, 1.0)
    five = _metrics(rows[3:], (1,))
    assert (five["R@1"], five["Sany@1"], five["Sall@1"], five["n"]) == (0.0, 1.0, 0.0, 1)
    assert session_of("conv-26/D3:12") == session_of("D3:1") == "D3" != session_of("c/D33:1")


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
    header = next(line for line in printed.splitlines() if line.startswith("ranker"))
    assert header.split()[-6:] == ["Sany@1", "Sany@5", "Sany@10", "Sall@1", "Sall@5", "Sall@10"]
    assert "categories 1-5 (as peers count)" in printed
    report = json.loads(out.read_text(encoding="utf-8"))
    assert list(report) == ["baseline", "bm25"]
    assert set(report["bm25"]["overall"]) >= {"R@1", "R@5", "R@10", "H@10", "Sany@10", "Sall@5"}
    assert report["bm25"]["categories_1_5"]["n"] == 5
    assert main(["eval", "locomo", "--data", str(data_file), "--conversations", "0"]) == 2


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


def test_docs_session_table_quotes_its_report():
    """docs/retrieval.md's session-level table: each row the report's figures to 3 places."""
    root = Path(__file__).resolve().parents[2]
    rankers = json.loads(
        (root / "reports" / "session-recall-dev-split.json").read_text(encoding="utf-8")
    )["rankers"]
    doc = (root / "docs" / "retrieval.md").read_text(encoding="utf-8")
    section = doc.split("## Turn level and session level", 1)[1].split("\n## ", 1)[0]
    rows = [line.split(" | ")[1:] for line in section.splitlines() if line.startswith("| `")]
    expected = []
    for name in ("baseline", "bm25", "bm25+stopwords", "hybrid", "hybrid --embedder e5-pair"):
        o, every = rankers[name]["overall"], rankers[name]["categories_1_5"]
        figures = [o["R@10"], o["Sany@5"], o["Sany@10"], o["Sall@10"], every["Sany@10"]]
        expected.append([f"{x:.3f}" for x in figures])
    assert [[cell.strip(" |") for cell in row] for row in rows] == expected
