"""The course reader's findings on notebooks 05–10, each reproduced: what a notebook tells
the learner to run must run, and the zh edition must speak Chinese — in its prose, and in
every check, hint and refusal its exercises print.

"English" below is a run of three or more ASCII words, once code spans, quoted text (a
query, a library error: learners search for those as they are) and identifiers
(``memory_id``, ``json.loads(payload)``, ``0.85``) are set aside.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memlib.notebook.exercises import Exercise, all_exercises, check, hint
from memlib.notebook.language import use_language

REPO = Path(__file__).resolve().parents[2]
FOLDER = REPO / "notebooks"
NUMBERS = ("05", "06", "07", "08", "09", "10")
CATALOGS = sorted(p for p in (REPO / "i18n" / "zh").glob("*.md") if p.name[:2] in NUMBERS)
EXERCISES = [e for e in all_exercises() if e.id[:2] in NUMBERS]

QUOTED = re.compile(
    r"`[^`\n]*`|“[^”]*”|‘[^’]*’|「[^」]*」|\"[^\"\n]*\"|(?<![A-Za-z])'[^'\n]*'(?![A-Za-z])"
)
TOKEN = re.compile(r"[!-~]+")  # a run of printable ASCII, no space
WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?[,;:.!?]?")


def english_runs(text: str) -> list[str]:
    """The runs of 3+ ASCII words in ``text``, quoted text and identifiers set aside."""
    text = QUOTED.sub(" § ", text)
    runs: list[list[str]] = []
    end = -1
    for token in TOKEN.finditer(text):
        is_word = WORD.fullmatch(token.group()) is not None
        joined = runs and text[end : token.start()] == " " and runs[-1]
        if is_word and joined:
            runs[-1].append(token.group())
        else:
            runs.append([token.group()] if is_word else [])
        end = token.end()
    return [" ".join(run) for run in runs if len(run) >= 3]


def test_the_rule_finds_english_and_leaves_code_quotes_and_identifiers() -> None:
    assert english_runs("无法检查（TypeError: the query should be a string, not int）")
    assert english_runs("在副本上：memory profile-002 is already retracted——只撤回")
    assert not english_runs("存储拒绝了这些行：“invalid timestamp: 'yesterday' was given”")
    assert not english_runs("用 `views.api_failures_frame(store, QUESTION)` 检验")
    assert not english_runs("summary 或 content 中含有 conversation、memory、reranker")
    assert not english_runs("依次按 total ↓、lexical_coverage ↓ 和 memory_id ↑ 排序")


def _notebook(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell: dict[str, Any]) -> str:
    return "".join(cell["source"])


# 1. 10.2 says how to check it; what it says must run in the notebook's namespace.

CALL_SPAN = re.compile(r"`([A-Za-z_][\w.]*\([^`]*\))`")


def _exercise_cell(notebook: dict[str, Any], exercise_id: str) -> int:
    marks = (f"**Exercise {exercise_id}**", f"**练习 {exercise_id}**")
    return next(
        index
        for index, cell in enumerate(notebook["cells"])
        if cell["cell_type"] == "markdown" and _source(cell).startswith(marks)
    )


@pytest.mark.parametrize("edition", ["", "zh/"], ids=["en", "zh"])
def test_the_check_10_2_advertises_runs_in_the_notebook(edition: str) -> None:
    notebook = _notebook(FOLDER / f"{edition}10_agent_loop.ipynb")
    index = _exercise_cell(notebook, "10.2")
    advertised = [
        call for call in CALL_SPAN.findall(_source(notebook["cells"][index])) if "529" in call
    ]
    assert advertised, "10.2 should say which call checks it"
    setup = next(c for c in notebook["cells"] if c["cell_type"] == "code")
    namespace: dict[str, Any] = {}
    verdicts = []
    try:
        exec(compile(_source(setup), "setup", "exec"), namespace)  # the notebook's own setup
        for call in advertised:
            try:
                value = eval(call, namespace)  # noqa: S307 — the notebook's own text
            except NameError as exc:  # pragma: no cover — the finding itself
                pytest.fail(f"{edition or 'en/'}10 advertises `{call}`: {exc}")
            if hasattr(value, "columns") and "HTTP requests" in value.columns:
                sent = int(value["HTTP requests"].iloc[0])
                verdicts.append(namespace["check"]("10.2", sent))
            if hasattr(value, "client"):  # a FlakyAPI: the loop on its client, then .sent
                namespace["agent_loop"](
                    namespace["QUESTION"],
                    client=value.client(),
                    model=namespace["SCRIPTED_MODEL_ID"],
                    store=namespace["store"],
                    as_of=namespace["SAMPLE_AS_OF"],
                )
                verdicts.append(check("10.2", value.sent))
    finally:
        use_language("en")
        if "workdir" in namespace:
            namespace["workdir"].cleanup()
    # Each advertised way counts the requests, and what it counts is the answer.
    assert [v.status for v in verdicts] == ["correct"] * len(advertised), verdicts


# 2. What the exercises of 05–10 print in the zh edition is Chinese.


def _literal_solution(item: Exercise) -> Iterator[Any]:
    for node in ast.walk(ast.parse(item.solution)):
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "answer":
            try:
                yield ast.literal_eval(node.value)
            except ValueError:
                return


def _zh_feedback(item: Exercise) -> Iterator[str]:
    yield repr(check(item.id, ...))
    for number in range(1, len(item.hints) + 2):
        yield repr(hint(item.id, number))
    for answer, _ in item.wrong_answers:
        yield repr(check(item.id, answer))
    for answer in (object(), "?", 7, [], {}, *_literal_solution(item)):
        yield repr(check(item.id, answer))


@pytest.mark.parametrize("item", EXERCISES, ids=lambda e: e.id)
def test_zh_checks_and_hints_are_chinese(item: Exercise) -> None:
    use_language("zh")
    try:
        texts = list(_zh_feedback(item))
    finally:
        use_language("en")
    found = {text: runs for text in texts if (runs := english_runs(text))}
    assert not found, f"{item.id} prints English in the zh edition: {found}"
    drift = {term for text in texts for term in _drift(text)}
    assert not drift, f"{item.id}'s zh feedback should use the course's terms, not {drift}"


def test_zh_refusal_tables_have_no_english_words() -> None:
    from memlib.errors import RemoteMemoryValidationError
    from memlib.notebook.refusals import capture

    def refuse() -> None:
        raise RemoteMemoryValidationError("limit must be an integer")

    use_language("zh")
    try:
        rows = [capture(lambda: (1, 2)), capture(lambda: "text"), capture(refuse)]
    finally:
        use_language("en")
    accepted = " ".join(f"{row['error_type']} {row['message']}" for row in rows[:2])
    assert not re.findall(r"\b[a-z]{2,}\b", accepted.replace("str", "")), accepted
    assert rows[2]["message"] == "limit must be an integer"  # the library's own words stay


def _zh_prose(number: str) -> Iterator[tuple[str, str]]:
    for path in sorted((FOLDER / "zh").glob(f"{number}_*.ipynb")):
        for index, cell in enumerate(_notebook(path)["cells"]):
            if cell["cell_type"] == "markdown":
                yield f"zh/{path.name} cell {index}", _source(cell)


def test_zh_09_says_writer_in_chinese() -> None:
    path = next((FOLDER / "zh").glob("09_*.ipynb"))
    text = path.read_text(encoding="utf-8")
    assert "writer" not in text.lower(), "zh 09: a writer is 写入者"
    assert "写入者" in text


# 3. The course's terms, in the catalogs of 05–10 and what their exercises print.

DRIFT = {
    r"本篇": "「笔记本 NN」 or 这本笔记本",
    r"第 ?\d+ ?篇": "「笔记本 NN」",
    r"词法": "词面",
    r"平局规则": "并列规则",
    r"捕获时间": "事件时间",
    r"拍下": "事件时间",
    r"writer": "写入者",
}


def _drift(text: str) -> dict[str, str]:
    return {term: wanted for term, wanted in DRIFT.items() if re.search(term, text)}


@pytest.mark.parametrize("path", CATALOGS, ids=lambda p: p.name)
def test_zh_catalog_uses_the_course_terms(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    used = _drift(text)
    assert not used, f"{path.name}: use {used}"
    title = next(line for line in text.splitlines() if line.startswith("# "))
    assert ":" not in title, f"{path.name}: a title takes the full-width colon ："


@pytest.mark.parametrize("number", ["05", "10"])
def test_zh_opening_cell_is_chinese(number: str) -> None:
    where, first = next(_zh_prose(number))
    assert not english_runs(first), f"{where}: {english_runs(first)}"
    assert "本篇" not in first and ":" not in first.splitlines()[0]
