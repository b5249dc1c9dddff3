"""Key hygiene (issue 7): a fake API key never shows up anywhere a user can see it.

The fake key is sent through every failure path — ``runtime_client()`` refusing,
Messages API errors (401, 403, 404, 429, 500, 529, 400 with the key echoed back in
the error body), timeouts and connection errors (the SDK's retry path included),
``memlib chat`` failing in-process and as a real process against an unreachable API,
and the committed notebooks (their saved outputs, and the agent notebook's online
cell run for real with the key set) — and must not appear in any exception text or
formatted traceback, any log record (every logger, DEBUG and up), or any CLI output.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import pytest

from memlib import RemoteMemoryError
from memlib._runtime import MissingConfigurationError, runtime_client
from memlib.agent import ModelAPIError, agent_loop
from memlib.sample import SAMPLE_AS_OF, open_sample_store

KEY = "sk-ant-test-0123456789abcdef"
MODEL = "claude-test-model"
ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def assert_clean(*texts: str) -> None:
    for text in texts:
        assert KEY not in text, f"the API key leaked: {text[:300]!r}"
        assert "0123456789abcdef" not in text  # not even its tail


def exception_texts(exc: BaseException) -> list[str]:
    texts = [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
    for name in ("message", "body", "request_id"):
        value = getattr(exc, name, None)
        if value is not None:
            texts.append(repr(value))
    return texts


def log_texts(caplog: pytest.LogCaptureFixture) -> list[str]:
    out = []
    for record in caplog.records:
        out.append(record.getMessage())
        out.append(repr(record.args))
        if record.exc_info and record.exc_info[1] is not None:
            out.extend(exception_texts(record.exc_info[1]))
    return out


@pytest.fixture
def every_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.DEBUG)  # the root logger: anthropic, httpx2, memlib, all
    for name in ("anthropic", "anthropic._base_client", "httpx2", "httpx", "httpcore"):
        logging.getLogger(name).setLevel(logging.DEBUG)
    return caplog


def _sent_key(request: httpx2.Request) -> str:
    """The key as this SDK version sends it (``x-api-key`` or ``Authorization: Bearer``)."""
    bearer = request.headers.get("authorization", "").removeprefix("Bearer ")
    return request.headers.get("x-api-key") or bearer


def _error(status: int, kind: str) -> Callable[[httpx2.Request], httpx2.Response]:
    def respond(request: httpx2.Request) -> httpx2.Response:
        echoed = _sent_key(request)
        assert echoed == KEY  # the key really went out, so the test can see it come back
        return httpx2.Response(
            status,
            # A server or proxy that echoes the key in its error message.
            json={"type": "error", "error": {"type": kind, "message": f"bad key {echoed}"}},
        )

    return respond


def _raise(exception: type[httpx2.TransportError]) -> Callable[[httpx2.Request], httpx2.Response]:
    def fail(request: httpx2.Request) -> httpx2.Response:
        assert _sent_key(request) == KEY
        raise exception("the transport gave up", request=request)

    return fail


def _client(
    handler: Callable[[httpx2.Request], httpx2.Response], retries: int = 0
) -> anthropic.Anthropic:
    return anthropic.Anthropic(
        api_key=KEY,
        base_url="https://api.anthropic.com",
        max_retries=retries,
        http_client=httpx2.Client(transport=httpx2.MockTransport(handler)),
    )


FAILURES: dict[str, Callable[[httpx2.Request], httpx2.Response]] = {
    "401": _error(401, "authentication_error"),
    "403": _error(403, "permission_error"),
    "404": _error(404, "not_found_error"),
    "400": _error(400, "invalid_request_error"),
    "429": _error(429, "rate_limit_error"),
    "500": _error(500, "api_error"),
    "529": _error(529, "overloaded_error"),
    "timeout": _raise(httpx2.ReadTimeout),
    "connect": _raise(httpx2.ConnectError),
}


@pytest.mark.parametrize("failure", list(FAILURES))
def test_agent_loop_failures_never_show_the_key(
    tmp_path: Path, failure: str, every_log: pytest.LogCaptureFixture
) -> None:
    store = open_sample_store(tmp_path)
    retries = 1 if failure in ("429", "529", "timeout") else 0  # the SDK's retry path logs too
    with pytest.raises(ModelAPIError) as caught:
        agent_loop(
            "What did we decide about layered memory?",
            client=_client(FAILURES[failure], retries),
            model=MODEL,
            store=store,
            as_of=SAMPLE_AS_OF,
        )
    error = caught.value
    assert isinstance(error, RemoteMemoryError) and "\n" not in str(error)
    assert_clean(*exception_texts(error), *log_texts(every_log))
    assert any(r.name.startswith("anthropic") for r in every_log.records)  # logs were on


def test_the_test_would_see_a_leak(every_log: pytest.LogCaptureFixture) -> None:
    """The checks can fail: the SDK's own exception carries the echoed key."""
    with pytest.raises(anthropic.AuthenticationError) as caught:
        _client(FAILURES["401"]).messages.create(
            model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        )
    with pytest.raises(AssertionError, match="leaked"):
        assert_clean(*exception_texts(caught.value))


@pytest.mark.parametrize("missing", ["MODEL_ID", "anthropic"])
def test_runtime_client_refusals_never_show_the_key(
    monkeypatch: pytest.MonkeyPatch, every_log: pytest.LogCaptureFixture, missing: str
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("MODEL_ID", MODEL)
    if missing == "MODEL_ID":
        monkeypatch.delenv("MODEL_ID")
    else:
        monkeypatch.setitem(sys.modules, "anthropic", None)  # "not installed"
    with pytest.raises(MissingConfigurationError) as caught:
        runtime_client()
    assert_clean(*exception_texts(caught.value), *log_texts(every_log))


def test_a_built_client_does_not_show_the_key_in_its_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("MODEL_ID", MODEL)
    client = runtime_client()
    assert client.api_key == KEY
    assert_clean(repr(client), str(client))


@pytest.mark.parametrize("failure", ["401", "529", "timeout", "connect"])
def test_cli_chat_failures_never_print_the_key(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    every_log: pytest.LogCaptureFixture,
    failure: str,
) -> None:
    from memlib import _runtime as runtime
    from memlib import cli

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("MODEL_ID", MODEL)
    monkeypatch.setattr(runtime, "runtime_client", lambda: _client(FAILURES[failure]))
    assert cli.main(["chat", "--sample", "--message", "What about layered memory?"]) == 2
    out, err = capsys.readouterr()
    assert err.startswith("memlib: error: ") and err.count("\n") == 1
    assert_clean(out, err, *log_texts(every_log))


def test_interactive_cli_chat_failures_never_print_the_key(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    every_log: pytest.LogCaptureFixture,
) -> None:
    import io

    from memlib import _runtime as runtime
    from memlib import cli

    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("MODEL_ID", MODEL)
    monkeypatch.setattr(runtime, "runtime_client", lambda: _client(FAILURES["529"]))
    monkeypatch.setattr(sys, "stdin", io.StringIO("first\nsecond\n"))
    assert cli.main(["chat", "--sample"]) == 0  # a 529 turn does not end the session
    out, err = capsys.readouterr()
    assert err.count("HTTP 529") == 2
    assert_clean(out, err, *log_texts(every_log))
    monkeypatch.setattr(runtime, "runtime_client", lambda: _client(FAILURES["401"]))
    monkeypatch.setattr(sys, "stdin", io.StringIO("first\n"))
    assert cli.main(["chat", "--sample"]) == 2  # a rejected key ends it
    out, err = capsys.readouterr()
    assert "HTTP 401" in err
    assert_clean(out, err, *log_texts(every_log))


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the with ends


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("ANTHROPIC_", "WORKBUDDY_", "MEMLIB_")) and k != "MODEL_ID"
    }
    env.update(PYTHONIOENCODING="utf-8", **extra)
    return env


@pytest.mark.parametrize("log_level", ["", "debug"])
def test_memlib_chat_process_against_an_unreachable_api(tmp_path: Path, log_level: str) -> None:
    """The real SDK over a real socket (refused), with its own logging on or off."""
    env = _env(
        ANTHROPIC_API_KEY=KEY,
        MODEL_ID=MODEL,
        HOME=str(tmp_path),
        ANTHROPIC_BASE_URL=f"http://127.0.0.1:{_closed_port()}",
    )
    if log_level:
        env["ANTHROPIC_LOG"] = log_level
    done = subprocess.run(
        [sys.executable, "-m", "memlib", "chat", "--sample", "--message", "layered memory?"],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 2 and done.stdout == ""
    assert "could not connect to the Anthropic API" in done.stderr
    if not log_level:  # ANTHROPIC_LOG=debug makes the SDK print its own tracebacks
        assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    else:
        assert "Sending HTTP Request" in done.stderr  # the SDK's debug log really ran
    assert_clean(done.stdout, done.stderr)


def test_memlib_chat_without_model_id_never_prints_the_key(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "memlib", "chat", "--message", "hello"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=60,
        env=_env(ANTHROPIC_API_KEY=KEY, HOME=str(tmp_path)),
    )
    assert done.returncode == 2 and "MODEL_ID" in done.stderr and done.stderr.count("\n") == 1
    assert_clean(done.stdout, done.stderr)


# -- notebooks --------------------------------------------------------------------------


def _outputs_text(cell: dict[str, Any]) -> str:
    return json.dumps(cell.get("outputs", []), ensure_ascii=False)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_committed_notebook_outputs_hold_no_key(path: Path) -> None:
    import re

    nb = json.loads(path.read_text(encoding="utf-8"))
    for index, cell in enumerate(nb["cells"]):
        text = _outputs_text(cell)
        found = re.search(r"sk-ant-[A-Za-z0-9_-]{6,}|x-api-key\W+[A-Za-z0-9]", text)
        assert found is None, f"{path.name} cell {index} output shows {found.group()!r}"
    assert_clean(path.read_text(encoding="utf-8"))


def test_the_agent_notebooks_online_cell_with_a_key_set_shows_no_key(tmp_path: Path) -> None:
    """Run notebook 10's setup and online cells in a real kernel with the fake key set
    and an API that refuses connections: the cell fails, and no output shows the key."""
    import nbformat
    from nbclient import NotebookClient

    source = nbformat.read(ROOT / "notebooks" / "10_agent_loop.ipynb", as_version=4)
    code = [c for c in source.cells if c.cell_type == "code"]
    # The online cell is the one that runs only when the key and the model are set.
    online = [
        c
        for c in code
        if "runtime_client" in "".join(c.source)
        and 'os.environ.get("ANTHROPIC_API_KEY")' in "".join(c.source)
    ]
    assert len(online) == 1
    trimmed = nbformat.v4.new_notebook(metadata=source.metadata)
    trimmed.cells = [code[0], online[0]]
    env = _env(
        ANTHROPIC_API_KEY=KEY,
        MODEL_ID=MODEL,
        HOME=str(tmp_path),
        ANTHROPIC_BASE_URL=f"http://127.0.0.1:{_closed_port()}",
    )
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(env)  # the kernel inherits this environment
    try:
        NotebookClient(
            trimmed,
            timeout=120,
            kernel_name="python3",
            allow_errors=True,
            resources={"metadata": {"path": str(tmp_path)}},
        ).execute()
    finally:
        os.environ.clear()
        os.environ.update(saved)
    outputs = [o for c in trimmed.cells for o in c.get("outputs", [])]
    errors = [o for o in outputs if o.get("output_type") == "error"]
    assert errors and errors[0]["ename"] == "ModelAPIError"  # the online path really ran
    assert "could not connect" in errors[0]["evalue"]
    assert_clean(json.dumps([c.get("outputs", []) for c in trimmed.cells], ensure_ascii=False))
