"""``memlib mcp``: HTTP needs a bearer token only its user can read, and neither
transport builds a message over ``MESSAGE_MAX_BYTES`` in memory.

The servers are the real command (``python -m memlib mcp``) in a subprocess, reached as
the red-team report reached them: raw HTTP on 127.0.0.1, raw JSON lines on stdin, the
SDK's client, and (as root) a forked child that has become another account (uid 65534).
Memory is the server's peak resident size (``VmHWM`` in ``/proc/PID/status``).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

pytest.importorskip("mcp")

import anyio  # noqa: E402
import httpx2  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from memlib._runtime import scope_path  # noqa: E402
from memlib.cli import main  # noqa: E402
from memlib.sample import SAMPLE_AS_OF, SAMPLE_QUERY, open_sample_store  # noqa: E402

CAP = 1 << 20  # MESSAGE_MAX_BYTES, restated: the test must not take it from the code
REFUSED_401 = b"memlib mcp: missing or wrong bearer token\n"
OTHER_UID = 65_534  # nobody
MiB = 1 << 20
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "1"},
    },
}
MCP_HEADERS = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
AS_OF = SAMPLE_AS_OF.isoformat()


# -- helpers ---------------------------------------------------------------------------


@pytest.fixture
def store_url(tmp_path: Path) -> str:
    root = tmp_path / "memory"
    open_sample_store(root).close()
    return f"jsonl:{scope_path(root, 'alice')}"


@pytest.fixture
def server_env(tmp_path: Path, subprocess_env: dict[str, str]) -> dict[str, str]:
    return {**subprocess_env, "WORKBUDDY_HOME": str(tmp_path / "workbuddy-home")}


def new_token(path: Path) -> str:
    assert main(["mcp", "--new-token", "--token-file", str(path)]) == 0
    return path.read_text(encoding="ascii").strip()


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    return tmp_path / "private" / "mcp-token"


def peak_kib(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text(encoding="ascii")
    found = re.search(r"^VmHWM:\s+(\d+) kB$", status, re.M)
    assert found, status
    return int(found.group(1))


@pytest.fixture
def http_server(store_url: str, server_env: dict[str, str]) -> Callable[..., Any]:
    """``with http_server(token_file) as (url, pid)``: a server on a free port, stopped on
    exit; it must not have written a traceback."""

    @contextmanager
    def start(token_path: Path) -> Iterator[tuple[str, int]]:
        process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memlib",
                "--store",
                store_url,
                "--user",
                "alice",
                "mcp",
                "--as-of",
                AS_OF,
                "--transport",
                "http",
                "--port",
                "0",
                "--token-file",
                str(token_path),
            ],
            env=server_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert process.stderr is not None
            line = process.stderr.readline()
            found = re.fullmatch(
                r"memlib mcp: streamable HTTP on (http://127\.0\.0\.1:\d+/mcp)\n", line
            )
            assert found, line
            yield found.group(1), process.pid
        finally:
            process.terminate()
            stdout, stderr = process.communicate(timeout=15)
        assert stdout == ""
        assert "Traceback" not in stderr

    return start


def post(
    url: str,
    body: bytes | None = None,
    *,
    authorization: str | list[str] | None = None,
    method: str = "POST",
    headers: dict[str, str] | None = None,
) -> tuple[int, bytes]:
    """``(status, body)`` of one request; the body of an event stream is not read."""
    parts = urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=20)
    try:
        connection.putrequest(method, parts.path)
        for name, value in {**MCP_HEADERS, **(headers or {})}.items():
            connection.putheader(name, value)
        values = [authorization] if isinstance(authorization, str) else authorization or []
        for value in values:
            connection.putheader("Authorization", value)
        data = json.dumps(INITIALIZE).encode() if body is None else body
        connection.putheader("Content-Length", str(len(data)))
        connection.endheaders(data)
        response = connection.getresponse()
        if response.getheader("content-type", "").startswith("text/event-stream"):
            return response.status, response.readline() + response.readline()
        return response.status, response.read()
    finally:
        connection.close()


# -- the bearer token ------------------------------------------------------------------


def test_new_token_writes_a_private_file_once(tmp_path: Path, capsys) -> None:
    path = tmp_path / "home" / "new" / "mcp-token"
    token = new_token(path)
    assert capsys.readouterr().out == f"memlib mcp: new bearer token in {path} (mode 0600)\n"
    assert re.fullmatch(r"[A-Za-z0-9_-]{43}", token)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) & 0o077 == 0
    # A second one would lock out the hosts configured with the first.
    assert main(["mcp", "--new-token", "--token-file", str(path)]) == 2
    assert capsys.readouterr().err == (
        f"memlib: error: {path} already exists: remove it first to make a new token\n"
    )
    assert path.read_text(encoding="ascii").strip() == token


def test_http_answers_401_without_the_token_and_serves_with_it(
    http_server: Callable[..., Any], token_file: Path
) -> None:
    token = new_token(token_file)
    with http_server(token_file) as (url, _pid):
        for authorization in (
            None,
            "",
            "Bearer",
            "Bearer wrong",
            f"Bearer {token}x",
            f"Bearer {token[:-1]}",
            f"Basic {token}",
            token,
            f"Token {token}",
            [f"Bearer {token}", "Bearer wrong"],
        ):
            assert post(url, authorization=authorization) == (401, REFUSED_401), authorization
        # Every method and path, not only the POST of /mcp: the event stream, the end
        # of a session, a session id guessed.
        assert post(url, b"", method="GET") == (401, REFUSED_401)
        assert post(url, b"", method="DELETE", headers={"Mcp-Session-Id": "x"}) == (
            401,
            REFUSED_401,
        )
        assert post(url.replace("/mcp", "/"), b"", method="GET") == (401, REFUSED_401)

        status, body = post(url, authorization=f"bearer {token}")  # the scheme's case is free
        assert status == 200 and b'"serverInfo"' in body

        async def session() -> str:
            headers = {"Authorization": f"Bearer {token}"}
            async with (
                httpx2.AsyncClient(headers=headers) as client,
                streamable_http_client(url, http_client=client) as (read, write),
                ClientSession(read, write) as s,
            ):
                await s.initialize()
                result = await s.call_tool("recall_history", {"query": SAMPLE_QUERY, "limit": 1})
                assert not result.is_error
                return str(result.content[0].text)  # type: ignore[union-attr]

        hits = json.loads(anyio.run(session))["hits"]
        assert hits[0]["memory_id"] == "conversation-003"


def _as_other_account(work: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``work()`` run in a forked child that has dropped root for uid/gid 65534."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child reports through the pipe
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(OTHER_UID)
            os.setuid(OTHER_UID)
            result = work()
        except BaseException as exc:
            result = {"child failed": repr(exc)}
        os.write(write_end, json.dumps(result).encode())
        os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as reader:
        data = reader.read()
    os.waitpid(pid, 0)
    return dict(json.loads(data))


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0,
    reason="becoming another account (uid 65534) needs root, as in CI",
)
def test_another_account_reads_neither_the_token_nor_the_memory(
    http_server: Callable[..., Any],
) -> None:
    # A folder every account can enter: the file's own mode is what keeps them out.
    shared = Path(tempfile.mkdtemp(prefix="memlib-token-"))
    try:
        shared.chmod(0o755)
        token_file = shared / "mcp-token"
        token = new_token(token_file)
        with http_server(token_file) as (url, _pid):
            recall = json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "recall_history", "arguments": {"query": SAMPLE_QUERY}},
                }
            ).encode()

            def attack() -> dict[str, Any]:
                try:
                    token_file.read_text(encoding="ascii")
                    read = "read"
                except PermissionError:
                    read = "permission denied"
                return {
                    "uid": os.getuid(),
                    "token file": read,
                    "initialize": post(url)[0],
                    "recall_history": post(url, recall, headers={"Mcp-Session-Id": "x"})[0],
                    "guessed": post(url, authorization="Bearer " + "A" * 43)[0],
                    # The same account holding the token gets in: what stopped it above
                    # was the token, not the network.
                    "leaked": post(url, authorization=f"Bearer {token}")[0],
                }

            assert _as_other_account(attack) == {
                "uid": OTHER_UID,
                "token file": "permission denied",
                "initialize": 401,
                "recall_history": 401,
                "guessed": 401,
                "leaked": 200,
            }
    finally:
        shutil.rmtree(shared)


def _bad_token_files(tmp_path: Path) -> dict[str, tuple[list[str], str]]:
    """Case name -> (the --token-file option, what the one line must say)."""
    folder = tmp_path / "tokens"
    folder.mkdir(mode=0o700)
    good = folder / "good"
    new_token(good)
    cases: dict[str, tuple[list[str], str]] = {
        "missing": (
            ["--token-file", str(folder / "none")],
            f"{folder / 'none'} does not exist: make one with memlib mcp --new-token",
        ),
        "default missing": ([], "workbuddy-home/mcp-token does not exist"),
        "symlink": (["--token-file", str(folder / "link")], "is a symbolic link"),
        "folder": (["--token-file", str(folder)], "is a folder, not a regular file"),
        "short": (["--token-file", str(folder / "short")], "shorter than 32 characters"),
        "empty": (["--token-file", str(folder / "empty")], "does not hold a bearer token"),
    }
    (folder / "link").symlink_to(good)
    for name, text in (("short", "hunter2\n"), ("empty", "")):
        (folder / name).write_text(text, encoding="ascii")
        (folder / name).chmod(0o600)
    for mode, problem in (
        (0o644, "can be read"),
        (0o640, "can be read"),
        (0o604, "can be read"),
        (0o620, "is writable"),
    ):
        path = folder / f"mode-{mode:o}"
        shutil.copyfile(good, path)
        path.chmod(mode)
        cases[f"mode {mode:04o}"] = (
            ["--token-file", str(path)],
            f"{problem} by other users (mode {mode:04o})",
        )
    if os.geteuid() == 0:
        path = folder / "not-mine"
        shutil.copyfile(good, path)
        path.chmod(0o600)
        os.chown(path, OTHER_UID, OTHER_UID)
        cases["another owner"] = (["--token-file", str(path)], f"owned by uid {OTHER_UID}")
    return cases


def test_http_refuses_to_start_without_a_private_token_file(
    tmp_path: Path, store_url: str, server_env: dict[str, str]
) -> None:
    for name, (option, expected) in _bad_token_files(tmp_path).items():
        try:
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "memlib",
                    "--store",
                    store_url,
                    "--user",
                    "alice",
                    "mcp",
                    "--transport",
                    "http",
                    "--port",
                    "0",
                    *option,
                ],
                env=server_env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=20,
            )
        except subprocess.TimeoutExpired:
            pytest.fail(f"{name}: the server started")
        assert done.returncode == 2, (name, done.stderr)
        assert done.stdout == "", name
        assert done.stderr.startswith("memlib: error: ") and done.stderr.count("\n") == 1, (
            name,
            done.stderr,
        )
        assert expected in done.stderr, (name, done.stderr)


def test_token_file_is_for_http_only(capsys, token_file: Path) -> None:
    new_token(token_file)
    capsys.readouterr()
    assert main(["mcp", "--token-file", str(token_file)]) == 2
    assert capsys.readouterr().err == "memlib: error: --token-file is for --transport http\n"


# -- messages over the cap ---------------------------------------------------------------


def _biggest_remember(request_id: int) -> bytes:
    """A remember call with every field at its limit, each character a surrogate pair in
    a \\u escape: the longest line a client has reason to send (about 286 KB)."""
    wide = "\U0001f998"  # kangaroo: 12 bytes as JSON's \\ud83e\\udd98
    arguments = {
        "content": wide * 20_000,
        "summary": wide * 2_000,
        "title": wide * 1_000,
        "source_id": wide * 500,
        "source_type": wide * 100,
        "memory_id": "m" * 200,
        "captured_at": "2026-08-10T12:00:00Z",
    }
    message = {
        "jsonrpc": "2.0",
        "id": request_id,
        "method": "tools/call",
        "params": {"name": "remember", "arguments": arguments},
    }
    return json.dumps(message, ensure_ascii=True).encode() + b"\n"


def test_stdio_drops_a_100_mb_line_without_building_it(
    store_url: str, server_env: dict[str, str]
) -> None:
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "memlib",
            "--store",
            store_url,
            "--user",
            "alice",
            "mcp",
            "--as-of",
            AS_OF,
        ],
        env=server_env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    stdin, stdout = process.stdin, process.stdout

    def send(data: bytes) -> None:
        stdin.write(data)
        stdin.flush()

    def answer() -> dict[str, Any]:
        return dict(json.loads(stdout.readline()))

    try:
        send(json.dumps(INITIALIZE).encode() + b"\n")
        assert "serverInfo" in answer()["result"]
        send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        before = peak_kib(process.pid)

        biggest = _biggest_remember(2)
        assert 250_000 < len(biggest) < CAP
        send(biggest)
        stored = answer()
        assert stored["id"] == 2 and not stored["result"]["isError"], stored

        send(
            b'{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"remember",'
            b'"arguments":{"summary":"s","content":"'
        )
        chunk = b"x" * MiB
        for _ in range(100):
            stdin.write(chunk)
        send(b'"}}}\n')
        refused = answer()
        assert refused == {
            "jsonrpc": "2.0",
            "id": 3,
            "error": {
                "code": -32600,
                "message": "message refused: over the 1,048,576-byte limit of memlib mcp",
            },
        }
        after = peak_kib(process.pid)

        send(b'{"jsonrpc":"2.0","id":4,"method":"tools/list"}\n')
        assert len(answer()["result"]["tools"]) == 6  # the session goes on
    finally:
        stdin.close()
        process.wait(timeout=15)
    stderr = process.stderr.read().decode() if process.stderr else ""
    assert stderr == "memlib mcp: message refused: over the 1,048,576-byte limit of memlib mcp\n"
    # The line streamed through 64 KiB at a time: the peak barely moves (it rose by
    # hundreds of MB when the line was built whole).
    assert after - before < 30 * 1024, (before, after)
    assert after < 200 * 1024, after


def _stream_chunked(url: str, authorization: str, total: int) -> bytes:
    """Send ``total`` bytes as a chunked POST (no Content-Length), stopping when the
    server stops reading; the start of its answer."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(
            f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Authorization: {authorization}\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\n"
            "Transfer-Encoding: chunked\r\n\r\n".encode()
        )
        chunk = b"%x\r\n%s\r\n" % (MiB, b"x" * MiB)
        try:
            for _ in range(total // MiB):
                sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError, TimeoutError):
            pass
        try:
            return sock.recv(200)
        except ConnectionResetError:
            return b""


def _declared(url: str, authorization: str, size: int) -> bytes:
    """A POST that declares ``size`` bytes and sends 64 KiB of them; the start of the
    answer."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=10) as sock:
        sock.sendall(
            f"POST {parts.path} HTTP/1.1\r\nHost: {parts.netloc}\r\n"
            f"Authorization: {authorization}\r\nContent-Type: application/json\r\n"
            "Accept: application/json, text/event-stream\r\n"
            f"Content-Length: {size}\r\n\r\n".encode()
            + b"x" * 65_536
        )
        return sock.recv(200)


def test_http_refuses_a_100_mb_body_before_reading_it(
    http_server: Callable[..., Any], token_file: Path
) -> None:
    token = new_token(token_file)
    bearer = f"Bearer {token}"
    with http_server(token_file) as (url, pid):
        assert post(url, authorization=bearer)[0] == 200
        before = peak_kib(pid)
        assert _declared(url, bearer, 100 * MiB).startswith(b"HTTP/1.1 413 ")
        assert _declared(url, "Bearer wrong", 100 * MiB).startswith(b"HTTP/1.1 401 ")
        answer = _stream_chunked(url, bearer, 100 * MiB)
        assert answer.startswith(b"HTTP/1.1 413 ") or answer == b"", answer
        after = peak_kib(pid)
        status, body = post(url, authorization=bearer)
        assert status == 200 and b'"serverInfo"' in body
    assert after - before < 30 * 1024, (before, after)
    assert after < 200 * 1024, after


# -- the stdio reader, in process --------------------------------------------------------


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":', 5),
        (b'{ "jsonrpc" : "2.0" , "id" : "req-1" , "method"', "req-1"),
        (b'{"id":-3,"jsonrpc"', -3),
        (b'{"jsonrpc":"2.0","method":"x","params":{"id":5,"arguments":{', None),
        (b'{"method":"x","params":{"content":"\\"id\\":3,', None),
        (b'{"jsonrpc":"2.0","id":12', None),  # maybe 123: cut off
        (b'{"jsonrpc":"2.0","id":', None),
        (b'[{"jsonrpc":"2.0","id":1,', None),
        (b'{"jsonrpc":"2.0","id":true,', None),
        (b'{"jsonrpc":"2.0","id":1.5,', None),
        (b'{"jsonrpc":"2.0","method":"notifications/x","params":{"a":"', None),
    ],
)
def test_the_id_of_a_refused_request_comes_from_its_first_bytes(
    head: bytes, expected: object
) -> None:
    from memlib.agent.mcp_server import _request_id

    assert _request_id(head) == expected


def test_bounded_lines_pass_the_cap_exactly_and_drop_what_is_over(monkeypatch) -> None:
    from memlib.agent import mcp_server

    monkeypatch.setattr(mcp_server, "READ_SIZE", 7)  # lines and the cap cross reads
    cap = 100
    at_cap = b'{"id":1,"a":"' + b"x" * (cap - 15) + b'"}'
    over = b'{"jsonrpc":"2.0","id":2,"a":"' + b"y" * cap + b'"}'
    data = b"".join(
        [
            at_cap,
            b"\n",
            over,
            b"\n",
            b"\n  \n",
            b'{"id":3}\n',
            b"z" * (cap + 1),
            b"\n",
            '{"a":"é"}'.encode(),
            b"\n",
            b'{"tail":1}',
        ]
    )
    assert len(at_cap) == cap
    read_end, write_end = os.pipe()

    def write() -> None:
        os.write(write_end, data)
        os.close(write_end)

    writer = threading.Thread(target=write)
    writer.start()
    sent: list[Any] = []

    class Answers:
        async def send(self, message: Any) -> None:
            sent.append(message.message.model_dump(by_alias=True, exclude_unset=True))

    async def read_all() -> list[str]:
        lines = mcp_server._BoundedLines(read_end, cap)
        lines.attach(Answers())
        return [line async for line in lines]

    try:
        got = anyio.run(read_all)
    finally:
        writer.join()
        os.close(read_end)
    assert got == [at_cap.decode(), '{"id":3}', '{"a":"é"}', '{"tail":1}']
    assert sent == [
        {
            "jsonrpc": "2.0",
            "id": 2,
            "error": {
                "code": -32600,
                "message": "message refused: over the 100-byte limit of memlib mcp",
            },
        }
    ]
