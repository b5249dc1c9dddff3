"""The graded exercises: every check catches its common wrong answers with a hint, the
student notebooks leave each answer unwritten, and the solution twins cannot drift.

nbval re-runs the solution editions and compares outputs (test_editions.py the student
editions' checks); these tests pin what the outputs must say (not attempted / correct)
and that the twins are rebuilt from the students'.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest

from memlib.notebook.exercises import Feedback, all_exercises, check, hint
from memlib.notebook.solutions import answer_cells, solution_notebook, sources
from tests.support.notebooks import output_text, read_cells, source

FOLDER = Path(__file__).resolve().parents[2] / "notebooks"
STUDENT = sorted(FOLDER.glob("*.ipynb"))
EXERCISES = all_exercises()
CHECK_CALL = re.compile(r"^check\(\"(\d\d\.\d+)\", answer\b")


def _load(path: Path) -> dict[str, Any]:
    return {"cells": read_cells(path)}


def test_every_notebook_has_an_exercise() -> None:
    numbers = {e.id.split(".")[0] for e in EXERCISES}
    assert numbers == {p.name[:2] for p in STUDENT}


@pytest.mark.parametrize("item", EXERCISES, ids=lambda e: e.id)
def test_unanswered_is_not_attempted(item: Any) -> None:
    feedback = check(item.id, ...)
    assert feedback.status == "not attempted"
    assert f"hint({item.id!r})" in repr(feedback)


@pytest.mark.parametrize("item", EXERCISES, ids=lambda e: e.id)
def test_each_common_wrong_answer_gets_its_hint(item: Any) -> None:
    assert item.wrong_answers, f"{item.id} lists no wrong answer, so nothing shows it can fail"
    for answer, expected in item.wrong_answers:
        feedback = check(item.id, answer)
        assert isinstance(feedback, Feedback)
        assert feedback.status == "try again", f"{item.id} accepted {answer!r}: {feedback}"
        assert expected in feedback.message, f"{item.id} {answer!r}: {feedback.message}"


@pytest.mark.parametrize("item", EXERCISES, ids=lambda e: e.id)
def test_hints_are_numbered(item: Any) -> None:
    assert item.hints
    assert hint(item.id).message.startswith(f"1/{len(item.hints)}: ")
    assert hint(item.id, len(item.hints)).message.startswith(f"{len(item.hints)}/")
    assert "numbered" in hint(item.id, len(item.hints) + 1).message


def test_a_grader_that_fails_gives_a_line_not_a_traceback() -> None:
    feedback = check(EXERCISES[0].id, object())
    assert feedback.status == "try again" and "\n" not in repr(feedback)
    assert check("99.9", 1).status == "try again"


@pytest.mark.parametrize("path", STUDENT, ids=lambda p: p.name)
def test_student_cells_start_unanswered(path: Path) -> None:
    notebook = _load(path)
    cells = notebook["cells"]
    found = answer_cells(notebook)
    assert found, f"{path.name} has no answer cell (# Exercise NN.N)"
    for index, exercise_id in found:
        body = [line for line in source(cells[index]).splitlines()[1:] if line.strip()]
        assert body and all(re.fullmatch(r"\w+ = \.\.\.", line) for line in body), (
            f"{path.name} cell {index}: a learner's answer cell must start unanswered "
            f"(`answer = ...`), not {body}"
        )
        following = cells[index + 1]
        call = CHECK_CALL.match(source(following))
        assert call, f"{path.name} cell {index + 1} should be check({exercise_id!r}, answer)"
        assert call.group(1) == exercise_id
        assert f"{exercise_id} · not attempted" in output_text(following), (
            f"{path.name}: the committed output of {exercise_id}'s check is not "
            "'not attempted' — re-run the student notebook"
        )


@pytest.mark.parametrize("path", STUDENT, ids=lambda p: p.name)
def test_solution_twin_is_rebuilt_from_the_student_notebook(path: Path) -> None:
    twin_path = FOLDER / "solutions" / path.name
    assert twin_path.exists(), f"run python -m memlib.notebook solutions {path.stem}"
    twin = _load(twin_path)
    rebuilt = solution_notebook(_load(path), path.name)
    assert sources(twin) == sources(rebuilt), (
        f"solutions/{path.name} drifted from {path.name}: "
        f"run python -m memlib.notebook solutions {path.stem}"
    )
    for index, exercise_id in answer_cells(twin):
        assert f"{exercise_id} · correct" in output_text(twin["cells"][index + 1]), (
            f"solutions/{path.name}: the solution of {exercise_id} is not graded correct"
        )


def _literal_answer(solution: str) -> Any:
    for node in ast.walk(ast.parse(solution)):
        if (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "answer"
        ):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return None
    return None


@pytest.mark.parametrize("path", STUDENT, ids=lambda p: p.name)
def test_no_answer_is_printed_before_its_exercise(path: Path) -> None:
    """A literal answer (a query, a number, a list of ids) must not be readable above."""
    by_id = {e.id: e for e in EXERCISES}
    cells = _load(path)["cells"]
    for index, exercise_id in answer_cells({"cells": cells}):
        answer = _literal_answer(by_id[exercise_id].solution)
        if answer is None or isinstance(answer, bool):
            continue
        shown = "\n".join(output_text(c) for c in cells[:index])
        forms = {str(answer), repr(answer)} if not isinstance(answer, str) else {answer}
        if isinstance(answer, float):
            forms |= {f"{answer:.6f}", f"{answer:.4f}"}
        # A short form ("3", "0.5") is in every table; only a distinctive one can leak.
        forms = {form for form in forms if len(form) >= 4}
        for form in forms:
            assert form not in shown, (
                f"{path.name}: the answer of {exercise_id} ({form!r}) is printed above it"
            )


CJK = re.compile(r"[\u3400-\u9fff]")


@pytest.fixture
def chinese() -> Any:
    from memlib.notebook.language import use_language

    use_language("zh")
    yield
    use_language("en")


@pytest.mark.parametrize("item", EXERCISES, ids=lambda e: e.id)
def test_the_zh_edition_gets_every_hint_and_message_in_chinese(item: Any, chinese: Any) -> None:
    assert len(item.hints_zh) == len(item.hints), f"{item.id}: one Chinese hint per hint"
    assert all(CJK.search(h) for h in item.hints_zh)
    assert "尚未作答" in repr(check(item.id, ...))
    for answer, _ in item.wrong_answers:
        feedback = check(item.id, answer)
        assert feedback.status == "try again"
        assert CJK.search(feedback.message), f"{item.id} {answer!r}: {feedback.message}"
