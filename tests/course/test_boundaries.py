"""memlib.notebook.boundaries: the probe sees side effects, the checklist can fail, the
review helpers agree with the library (notebook 13)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from memlib import RecallEngine
from memlib.errors import RemoteMemoryError
from memlib.notebook import boundaries
from memlib.notebook.boundaries import (
    CHECKLIST,
    COMMAND_MAP,
    KEY_VARIABLES,
    RESULT_ITEMS,
    audit_result,
    checklist_frame,
    probe,
    query_id_frame,
    review_view,
    run_cli,
    tampered_results,
)
from memlib.notebook.views import recall
from memlib.sample import SAMPLE_AS_OF, SAMPLE_QUERY, open_sample_store
from memlib.stores._base import MemoryStore

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
NOTEBOOK = NOTEBOOKS / "13_boundaries_and_review.ipynb"


@pytest.fixture
def store(tmp_path: Path) -> MemoryStore:
    return open_sample_store(tmp_path / "sample")


# -- the probe ----------------------------------------------------------------------------


def test_importing_memlib_has_no_side_effect() -> None:
    report = probe("import memlib")
    assert report.error is None
    assert (report.sockets, report.connections, report.processes) == (0, 0, 0)
    assert report.files_written == report.folders_created == report.left_on_disk == ()
    assert not set(report.env_read) & set(KEY_VARIABLES)
    assert report.anthropic_imported is False


def test_the_probe_reports_a_file_opened_for_writing() -> None:
    report = probe("open('notes.txt', 'w').close()\nopen('notes.txt').read()")
    assert report.files_written == ("./notes.txt",)  # the read is not a write
    assert report.left_on_disk == ("./notes.txt",)


def test_the_probe_reports_sockets_folders_and_processes() -> None:
    report = probe(
        "import os, socket, subprocess, sys\n"
        "socket.socket().close()\n"
        "os.mkdir(os.path.expanduser('~/made'))\n"
        "subprocess.run([sys.executable, '-c', 'pass'], check=True)"
    )
    assert report.sockets == 1
    assert report.folders_created == ("~/made",)
    assert report.processes == 1


def test_the_probe_records_every_way_of_reading_a_variable() -> None:
    report = probe(
        "import os\n"
        "os.environ.get('MODEL_ID')\n"
        "os.getenv('ANTHROPIC_API_KEY')\n"
        "'SOME_OTHER' in os.environ"
    )
    assert report.env_read == ("MODEL_ID", "ANTHROPIC_API_KEY", "SOME_OTHER")
    assert report.key_variables_read == ("MODEL_ID", "ANTHROPIC_API_KEY")


def test_the_probe_never_passes_the_key_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-a-key")
    monkeypatch.setenv("MODEL_ID", "test-model")
    report = probe(
        "import os\nprint(os.environ.get('ANTHROPIC_API_KEY'), os.environ.get('MODEL_ID'))"
    )
    assert report.printed == "None None"


def test_the_probe_reports_an_exception_in_one_line() -> None:
    report = probe("import memlib\nmemlib.runtime_client()")
    assert report.error is not None and "\n" not in report.error
    assert report.error.startswith("MissingConfigurationError: ")
    assert all(name in report.error for name in KEY_VARIABLES)
    assert report.key_variables_read == ("MODEL_ID", "ANTHROPIC_API_KEY")
    assert report.anthropic_imported is False


def test_default_runtime_is_lazy_and_needs_no_key() -> None:
    report = probe(
        "import memlib\nruntime = memlib.default_runtime()\n"
        "print(runtime.engine.recall('layered memory').empty_reason)"
    )
    assert report.error is None and report.printed == "no_matching_terms"
    assert report.key_variables_read == ()
    assert {"WORKBUDDY_HOME", "WORKBUDDY_USER_ID", "MEMLIB_STORE"} <= set(report.env_read)
    assert report.files_written == report.left_on_disk == ()


def test_probe_frame_has_one_row_per_probe() -> None:
    reports = [probe("import memlib"), probe("open('x', 'w').close()")]
    frame = boundaries.probe_frame(reports)
    assert list(frame["files written"]) == [0, 1]
    assert list(frame["key variables read"]) == ["none", "none"]


# -- the checklist ------------------------------------------------------------------------


def test_every_item_holds_on_the_sample_store(store: MemoryStore) -> None:
    frame = checklist_frame(store, SAMPLE_QUERY, SAMPLE_AS_OF)
    assert list(frame["item"]) == list(range(1, 10))
    assert frame["holds"].tolist() == [True] * 9, frame[~frame["holds"]].to_dict("records")


def test_a_recall_that_writes_fails_item_9(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    written = iter(range(100))

    def leaky(s: MemoryStore, query: str, as_of: Any, limit: int = 5, **kw: Any) -> Any:
        s.append(
            kind="conversation",
            memory_id=f"leak-{next(written)}",
            content="leak",
            summary="leak",
            source={
                "source_id": "t",
                "source_type": "conversation_transcript",
                "title": "leak",
                "captured_at": "2026-08-01T00:00:00Z",
            },
        )
        return recall(s, query, as_of, limit, **kw)

    monkeypatch.setattr(boundaries, "recall", leaky)
    holds, fact = CHECKLIST[8].check(store, SAMPLE_QUERY, SAMPLE_AS_OF)
    assert holds is False and "changed" in fact and "none changed" not in fact


def test_a_recall_that_ignores_limit_fails_item_8(
    store: MemoryStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def greedy(s: MemoryStore, query: str, as_of: Any, limit: int = 5, **kw: Any) -> Any:
        return recall(s, query, as_of, 10, **kw)

    monkeypatch.setattr(boundaries, "recall", greedy)
    holds, fact = CHECKLIST[7].check(store, SAMPLE_QUERY, SAMPLE_AS_OF)
    assert holds is False and fact.startswith("limit 1…10 → 3, 3,")


def test_checklist_notebooks_exist_and_notebook_13_links_them() -> None:
    cells = json.loads(NOTEBOOK.read_text(encoding="utf-8"))["cells"]
    markdown = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    for item in CHECKLIST:
        for name in item.proved_in:
            assert (NOTEBOOKS / f"{name}.ipynb").exists(), name
            if name != NOTEBOOK.stem:
                assert f"]({name}.ipynb" in markdown, f"item {item.number}: no link to {name}"


# -- one result alone ---------------------------------------------------------------------


def test_an_honest_result_passes_the_audit(store: MemoryStore) -> None:
    for query in (SAMPLE_QUERY, "embedding reranker", "分层记忆", "kubernetes"):
        audit = audit_result(recall(store, query, SAMPLE_AS_OF, 5))
        assert tuple(audit) == RESULT_ITEMS
        assert all(ok for ok, _ in audit.values()), (query, audit)


def test_each_tampered_result_breaks_exactly_one_item(store: MemoryStore) -> None:
    broken = {
        label: [n for n, (ok, _) in audit_result(result).items() if not ok]
        for label, result in tampered_results(store, SAMPLE_AS_OF).items()
    }
    assert broken == {"A": [7], "B": [6], "C": [8]}


def test_the_audit_sees_a_hit_of_another_query(store: MemoryStore) -> None:
    result = recall(store, SAMPLE_QUERY, SAMPLE_AS_OF, 5)
    stray = dataclasses.replace(result.hits[1], query_id="another-query")
    tampered = dataclasses.replace(result, hits=(result.hits[0], stray, *result.hits[2:]))
    assert [n for n, (ok, _) in audit_result(tampered).items() if not ok] == [4]


def test_the_audit_sees_terms_the_text_does_not_give(store: MemoryStore) -> None:
    result = recall(store, SAMPLE_QUERY, SAMPLE_AS_OF, 5)
    query = dataclasses.replace(result.query, terms=("layered",))
    audit = audit_result(dataclasses.replace(result, query=query))
    assert [n for n, (ok, _) in audit.items() if not ok] == [2]
    assert "not (layered)" in audit[2][1]


# -- query_id, the explorer's view, the CLI ---------------------------------------------


def test_one_query_id_through_every_stage(store: MemoryStore) -> None:
    frame = query_id_frame(store, SAMPLE_QUERY, SAMPLE_AS_OF, query_id="q-7")
    bound = frame[frame["stage"] != "score"]
    assert set(bound["query_id"]) == {"q-7"}
    assert list(frame["stage"]) == [
        "normalize",
        "candidate",
        "score",
        "stable rank",
        "result",
        "render",
    ]


def test_review_view_agrees_with_the_engine(store: MemoryStore) -> None:
    frame = review_view(store, SAMPLE_QUERY, SAMPLE_AS_OF, 2)
    values = dict(zip(frame["output"], frame["value"], strict=True))
    result = RecallEngine(store).recall(
        SAMPLE_QUERY, limit=2, as_of=SAMPLE_AS_OF, query_id=values["query_id"]
    )
    assert values["candidate_records"] == str(result.candidate_records)
    assert values["hits (limit 2)"] == str(len(result.hits)) == "2"
    assert values["rank 1"] == result.hits[0].memory_id
    assert values["tool JSON chars"] == str(len(result.to_json()))
    assert all(isinstance(v, str) for v in frame["value"])
    with pytest.raises(RemoteMemoryError, match="no searchable terms"):
        review_view(store, "!!!", SAMPLE_AS_OF, 5)


def test_chat_without_the_key_is_one_line_and_status_2() -> None:
    run = run_cli("chat", "-m", "What did we decide about layered memory?")
    assert run.status == 2 and run.stdout == ""
    assert run.stderr.count("\n") == 1 and run.stderr.startswith("memlib: error: set ")
    assert all(name in run.stderr for name in KEY_VARIABLES)


def test_the_demo_prints_the_librarys_json(store: MemoryStore) -> None:
    run = run_cli("demo", "--limit", "1")
    assert run.status == 0
    printed = json.loads(boundaries.cli_section(run.stdout, "recall_history"))
    query_id = printed["query"]["query_id"]
    result = RecallEngine(store).recall(
        "layered memory", limit=1, as_of=SAMPLE_AS_OF, query_id=query_id
    )
    assert printed == json.loads(result.to_json())


def test_every_memlib_command_of_the_map_exists() -> None:
    frame = boundaries.commands_frame()
    listed = [v for v in frame["listed by memlib --help"] if v is not None]
    assert len(listed) >= 5 and all(listed), frame.to_dict("records")
    assert len(frame) == len(COMMAND_MAP)
    # and the check can fail: a command memlib does not have is reported
    fake = boundaries.commands_frame(commands=("demo",))
    assert fake["listed by memlib --help"].tolist().count(False) >= 4
