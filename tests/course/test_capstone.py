"""The capstone (notebooks/15_capstone.ipynb, both editions): its bundled example is the
one its graders hold, the R@k it reports is what memlib's LoCoMo evaluation computes on
that example, its checks catch the common mistakes of each edition, and its live-model
cell stays offline without a key.

The figures are recomputed here through ``memlib.eval.locomo.evaluate_ranker``: the
benchmark's own path (records indexed in memory), not the store recall the notebook and
the graders use, so a wrong figure in either shows up as a disagreement.
"""

from __future__ import annotations

import ast
import contextlib
import html
import io
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memlib.eval.locomo import LocomoConversation, LocomoQuestion, evaluate_ranker
from memlib.notebook.exercises import check, n15_capstone
from memlib.notebook.language import tr, use_language
from memlib.records import MemoryKind

FOLDER = Path(__file__).resolve().parents[2] / "notebooks"
NAME = "15_capstone.ipynb"
EDITIONS = {
    "en": (FOLDER / NAME, FOLDER / "solutions" / NAME),
    "zh": (FOLDER / "zh" / NAME, FOLDER / "zh" / "solutions" / NAME),
}
CASES = [(lang, path) for lang, paths in EDITIONS.items() for path in paths]
SKIPPED = {
    "en": "Live cell skipped: set MODEL_ID and ANTHROPIC_API_KEY to ask the live API.",
    "zh": "已跳过在线单元格：设置 MODEL_ID 和 ANTHROPIC_API_KEY 后才会调用在线 API。",
}


def _case_id(case: tuple[str, Path]) -> str:
    return case[1].relative_to(FOLDER).as_posix()


@pytest.fixture(params=["en", "zh"])
def lang(request: Any) -> Any:
    use_language(request.param)
    yield request.param
    use_language("en")


def _cells(path: Path) -> list[dict[str, Any]]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict[str, Any]) -> str:
    return "".join(cell["source"])


def _code_cell(path: Path, name: str) -> dict[str, Any]:
    """The code cell that assigns ``name``."""
    for cell in _cells(path):
        if cell["cell_type"] == "code" and re.search(rf"^{name} = ", _source(cell), re.M):
            return cell
    raise AssertionError(f"{path.name}: no cell assigns {name}")


def _assigned(path: Path, name: str) -> Any:
    """The value ``name`` is assigned in the notebook (a literal, or a ``datetime(...)``)."""
    tree = ast.parse(_source(_code_cell(path, name)))
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return eval(
                    compile(ast.Expression(node.value), name, "eval"),
                    {  # noqa: S307
                        "datetime": datetime,
                        "UTC": UTC,
                    },
                )
    raise AssertionError(f"{path.name}: {name} is not assigned")


def _output(cell: dict[str, Any], kind: str = "text/plain") -> str:
    parts = []
    for output in cell.get("outputs", []):
        if "text" in output:
            parts.append("".join(output["text"]))
        value = output.get("data", {}).get(kind)
        if value is not None:
            parts.append(value if isinstance(value, str) else "".join(value))
    return "".join(parts)


def _html_rows(table: str) -> list[dict[str, str]]:
    """The body rows of a pandas HTML table, by column name."""
    head = re.search(r"<thead>.*?</thead>", table, re.S)
    assert head is not None, "no table header"
    names = [html.unescape(n) for n in re.findall(r"<th>(.*?)</th>", head.group(0))][1:]
    body = re.search(r"<tbody>(.*?)</tbody>", table, re.S)
    assert body is not None, "no table body"
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S):
        values = [html.unescape(v) for v in re.findall(r"<td>(.*?)</td>", row, re.S)]
        rows.append(dict(zip(names, values, strict=True)))
    return rows


def _benchmark(lang: str, ranker: Any, k: int) -> dict[str, float]:
    """R@k and H@k of the bundled example, by the LoCoMo evaluation's own path."""
    store = n15_capstone.example_store(lang)
    questions = tuple(
        LocomoQuestion(f"q{number}", question, 4, tuple(truth))
        for number, (question, truth) in enumerate(n15_capstone.QUESTIONS[lang].items())
    )
    conversation = LocomoConversation(
        "capstone",
        store.user_scope,
        tuple(store.records(MemoryKind.CONVERSATION)),
        questions,
        n15_capstone.AS_OF,
    )
    report = evaluate_ranker([conversation], ranker, ks=(k,), stored_vectors=False)
    return {"R": report["overall"][f"R@{k}"], "H": report["overall"][f"H@{k}"]}


# -- the notebook's example is the graders' ----------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_the_notebook_example_is_the_graders(case: tuple[str, Path]) -> None:
    lang, path = case
    notes = _assigned(path, "NOTES")
    assert [tuple(n) for n in notes] == list(n15_capstone.NOTES[lang])
    questions = _assigned(path, "QUESTIONS")
    assert {q: tuple(t) for q, t in questions.items()} == dict(n15_capstone.QUESTIONS[lang])
    assert _assigned(path, "AS_OF") == n15_capstone.AS_OF
    assert _assigned(path, "STORED_AT") == n15_capstone.STORED_AT


def test_the_editions_ask_the_same_kind_of_questions() -> None:
    """Same ids, same truths: the graders' hints and the rubric hold in both editions."""
    en, zh = n15_capstone.QUESTIONS["en"], n15_capstone.QUESTIONS["zh"]
    assert list(en.values()) == list(zh.values())
    assert [n[0] for n in n15_capstone.NOTES["en"]] == [n[0] for n in n15_capstone.NOTES["zh"]]


# -- the figures the notebook reports ----------------------------------------------------------


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_the_tuning_table_is_what_memlib_computes(case: tuple[str, Path]) -> None:
    lang, path = case
    rows = _html_rows(_output(_code_cell(path, "tuning"), "text/html"))
    assert len(rows) >= 6, rows
    rankers = n15_capstone.rankers()
    store = n15_capstone.example_store(lang)
    questions = n15_capstone.QUESTIONS[lang]
    for row in rows:
        ranker, limit = rankers[row["ranker"]], int(row["limit"])
        floor = None if row["min_score"] == "—" else float(row["min_score"])
        got = n15_capstone.recall_at_k(
            store, questions, ranker=ranker, limit=limit, min_score=floor
        )
        assert float(row["R@k"]) == pytest.approx(got["R"], abs=5e-5), row
        assert int(row["hits returned"]) == got["returned"], row
        if floor is None:  # the benchmark's path has no floor
            assert float(row["R@k"]) == _benchmark(lang, ranker, limit)["R"], row


@pytest.mark.parametrize("lang_", ["en", "zh"])
def test_the_solution_reports_the_benchmark_r_at_3(lang_: str) -> None:
    path = EDITIONS[lang_][1]
    cells = _cells(path)
    index = next(i for i, c in enumerate(cells) if _source(c).startswith("# Exercise 15.2"))
    shown = _output(cells[index + 1])
    want = _benchmark(lang_, "baseline", n15_capstone.LIMIT)["R"]
    assert f"R@3 = {want:.4f}" in shown, shown


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_per_question_rows_are_question_recall(case: tuple[str, Path]) -> None:
    lang, path = case
    cell = next(c for c in _cells(path) if _source(c).rstrip().endswith("per_question(engine)"))
    rows = _html_rows(_output(cell, "text/html"))
    store = n15_capstone.example_store(lang)
    assert [r["question"] for r in rows] == list(n15_capstone.QUESTIONS[lang])
    for row in rows:
        ranked = n15_capstone.ranked_ids(store, row["question"])
        assert row["hits"] == ", ".join(ranked)
        truth = n15_capstone.QUESTIONS[lang][row["question"]]
        assert float(row["R@3"]) == len(set(truth) & set(ranked)) / len(truth)


# -- the checks --------------------------------------------------------------------------------


def test_15_1_accepts_the_truth_and_rejects_the_recalls_hits(lang: str) -> None:
    assert check("15.1", list(n15_capstone.NEW_TRUTH)).correct
    assert check("15.1", list(reversed(n15_capstone.NEW_TRUTH))).correct
    store = n15_capstone.example_store(lang)
    hits = list(n15_capstone.ranked_ids(store, n15_capstone.NEW_QUESTION[lang]))
    assert set(hits) != set(n15_capstone.NEW_TRUTH), "the example should make this mistake visible"
    feedback = check("15.1", hits)
    assert feedback.status == "try again"
    assert tr("what recall returns", "召回返回的结果") in feedback.message


def test_15_2_accepts_r_at_3_and_names_each_mistake(lang: str) -> None:
    k = n15_capstone.LIMIT
    figures = _benchmark(lang, "baseline", k)
    assert check("15.2", figures["R"]).correct
    assert check("15.2", round(figures["R"], 2)).correct
    assert check("15.2", figures["R"] * 100).status == "try again"
    if figures["H"] != figures["R"]:
        feedback = check("15.2", figures["H"])
        assert feedback.status == "try again" and f"H@{k}" in feedback.message
    five = _benchmark(lang, "baseline", 5)["R"]
    assert five != figures["R"], "R@5 should differ from R@3 on the example"
    feedback = check("15.2", five)
    assert feedback.status == "try again" and "R@5" in feedback.message
    got = n15_capstone.recall_at_k(n15_capstone.example_store(lang), n15_capstone.QUESTIONS[lang])
    feedback = check("15.2", got["precision"])
    assert feedback.status == "try again"
    assert tr("precision", "精确率") in feedback.message


def test_15_3_accepts_the_best_and_rejects_a_floor_that_drops_the_truth(lang: str) -> None:
    rankers = n15_capstone.rankers()
    figures = {name: _benchmark(lang, r, n15_capstone.LIMIT)["R"] for name, r in rankers.items()}
    best = max(figures.values())
    assert figures["baseline"] < best, "on the example another ranker should beat the baseline"
    for name, value in figures.items():
        feedback = check("15.3", {"ranker": name, "min_score": None})
        assert feedback.correct == (value == best), (name, feedback)
    winner = next(name for name, value in figures.items() if value == best)
    feedback = check("15.3", {"ranker": winner, "min_score": 1000.0})
    assert feedback.status == "try again"
    assert tr("drops notes that answer", "丢掉了回答问题的笔记") in feedback.message


# -- the live-model cell -----------------------------------------------------------------------


def _live_cell(path: Path) -> dict[str, Any]:
    found = [
        c for c in _cells(path) if c["cell_type"] == "code" and "ANTHROPIC_API_KEY" in _source(c)
    ]
    assert len(found) == 1, f"{path.name}: one live-model cell"
    assert found[0]["cell_type"] == "code"
    return found[0]


@pytest.mark.parametrize("case", CASES, ids=_case_id)
def test_the_live_cell_is_skipped_without_a_key(
    case: tuple[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    lang, path = case
    cell = _live_cell(path)
    assert _output(cell) == SKIPPED[lang] + "\n", "the committed output is the skip line"
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("MODEL_ID", "claude-test")  # one of the two is not enough

    def no_model(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the live cell called the model without a key")

    import os

    use_language(lang)
    try:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(_source(cell), {"os": os, "tr": tr, "agent_loop": no_model})  # noqa: S102
    finally:
        use_language("en")
    assert out.getvalue() == SKIPPED[lang] + "\n"


def test_the_live_cell_calls_the_model_with_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """With both variables set it runs the loop on the runtime client: the skip is real."""
    import os

    import memlib

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-key")
    monkeypatch.setenv("MODEL_ID", "claude-test")
    client = object()  # what memlib.runtime_client() builds; the SDK is not needed here
    monkeypatch.setattr(memlib, "runtime_client", lambda: client)
    calls: list[dict[str, Any]] = []

    class Transcript:
        final_text = "an answer"

        def to_dataframe(self) -> str:
            return "table"

    def fake_loop(question: str, **kwargs: Any) -> Transcript:
        calls.append({"question": question, **kwargs})
        return Transcript()

    out = io.StringIO()
    namespace = {
        "os": os,
        "tr": tr,
        "agent_loop": fake_loop,
        "display": lambda value: None,
        "question": "q",
        "store": object(),
        "AS_OF": n15_capstone.AS_OF,
    }
    with contextlib.redirect_stdout(out):
        exec(_source(_live_cell(EDITIONS["en"][0])), namespace)  # noqa: S102
    assert len(calls) == 1 and calls[0]["model"] == "claude-test"
    assert calls[0]["client"] is client and calls[0]["store"] is namespace["store"]
    assert out.getvalue() == "an answer\n"
