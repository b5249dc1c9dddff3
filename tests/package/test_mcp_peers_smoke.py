"""``benchmarks.mcp_peers`` end to end on a tiny LoCoMo-shaped
corpus (a few seconds): memlib's side only (``memlib mcp`` through the SDK's stdio client),
no peer installed, no model (the lexical configurations). Figures are not checked, only
that a question whose words are in its evidence turn finds it and the report's shape.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")


def _turn(speaker: str, dia_id: str, text: str) -> dict[str, str]:
    return {"speaker": speaker, "dia_id": dia_id, "text": text}


def _qa(question: str, evidence: str, category: int) -> dict[str, Any]:
    return {"question": question, "answer": "-", "evidence": [evidence], "category": category}


SAMPLE: list[dict[str, Any]] = [
    {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                _turn("Ann", "D1:1", "I adopted a grey kitten named Pixel."),
                _turn("Bob", "D1:2", "Lovely! I am training for a marathon."),
            ],
            "session_2_date_time": "10:00 am on 20 May, 2023",
            "session_2": [
                _turn("Ann", "D2:1", "I started pottery classes downtown."),
                _turn("Bob", "D2:2", "My marathon is in Boston in June."),
            ],
        },
        "observation": {
            "session_1_observation": {
                "Ann": [["Ann adopted a grey kitten named Pixel.", "D1:1"]],
                "Bob": [["Bob is training for a marathon.", "D1:2"]],
            },
            "session_2_observation": {
                "Ann": [["Ann started pottery classes downtown.", "D2:1"]],
                "Bob": [["Bob's marathon is in Boston in June.", ["D2:2", "D1:2"]]],
            },
        },
        "qa": [
            _qa("What is the name of Ann's kitten?", "D1:1", 4),
            _qa("Where is Bob's marathon?", "D2:2", 4),
            _qa("What classes did Ann start?", "D2:1", 1),
        ],
    }
]


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "locomo-tiny.json"
    path.write_text(json.dumps(SAMPLE), encoding="utf-8")
    return path


def test_memlib_through_its_mcp_tools(data: Path, tmp_path: Path) -> None:
    from benchmarks import mcp_peers

    out = tmp_path / "peers.json"
    args = ["--data", str(data), "--conversations", "1", "--servers", "memlib (default)"]
    args += ["--workdir", str(tmp_path / "work"), "--out", str(out), "--peers", str(tmp_path)]
    assert mcp_peers.main(args) == 0
    report = json.loads(out.read_text(encoding="utf-8"))
    assert report["corpus"] == {"conversations": ["conv-1"], "turns": 4, "questions": 3}
    row = report["servers"]["memlib (default)"]
    assert row["questions"] == 3, row
    assert row["R@10_turn"] == 1.0 and row["R@10_session"] == 1.0  # 4 turns: all returned
    assert row["answer_tokens_p50"] > 0 and row["search_p50_ms"] > 0
    assert len(row["start_first_answer_s"]) == 1


def test_a_missing_peer_is_reported_not_run(data: Path, tmp_path: Path) -> None:
    from benchmarks import mcp_peers

    out = tmp_path / "peers.json"
    args = ["--data", str(data), "--servers", "basic-memory", "--peers", str(tmp_path)]
    assert mcp_peers.main([*args, "--workdir", str(tmp_path / "w"), "--out", str(out)]) == 0
    row = json.loads(out.read_text(encoding="utf-8"))["servers"]["basic-memory"]
    assert "not installed" in row["not_run"]
