"""``memlib mcp``: serve the memory to MCP clients (stdio; ``--transport http`` on localhost).

The store, the user and the engine are fixed here, once, before the first message: a
bad store URL or an unreadable store fails as every command does (one line on stderr,
exit 2) instead of inside a client's session. The server itself, and the ``mcp``
package it needs, are imported only when the command runs.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ._common import CliError, parse_as_of
from .recall import open_recall_engine

__all__ = ["MCP_MISSING", "cmd_mcp", "register"]

MCP_MISSING = "memlib mcp needs the mcp extra: pip install 'memlib[mcp]'"


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65_535:
        raise argparse.ArgumentTypeError(f"port must be between 0 and 65535: {value}")
    return value


def cmd_mcp(args: argparse.Namespace) -> int:
    try:
        from ..agent import mcp_server
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in ("mcp", "mcp_types"):
            raise
        raise CliError(MCP_MISSING) from None
    if args.port is not None and args.transport != "http":
        raise CliError("--port is for --transport http")
    # The model's calls cannot name a floor: the engine's own applies to each.
    floor = args.min_score or os.environ.get("MEMLIB_MIN_SCORE") or None
    engine = open_recall_engine(args, min_score=floor)
    try:
        memory = mcp_server.MemoryTools(
            engine, as_of=parse_as_of(args.as_of), query_id_prefix=args.query_id_prefix,
        )
        memory.check_store()
        mcp_server.serve(
            memory, transport=args.transport,
            port=mcp_server.DEFAULT_PORT if args.port is None else args.port,
        )
    finally:
        engine.store.close()
    return 0


def register(subparsers: Any) -> None:
    mcp = subparsers.add_parser(
        "mcp",
        help="serve recall_history, remember, forget and explain to MCP clients",
        description=(
            "Serve this user's memory over the Model Context Protocol: the tools "
            "recall_history, remember, forget and explain, the resource memlib://profile "
            "and the prompt session_start. The user is the one of --user/--store (or the "
            "environment); no tool can name another. Needs the mcp extra."
        ),
    )
    mcp.add_argument("--ranker", default="baseline",
                     help="ranker of every recall (default: baseline, as memlib recall)")
    mcp.add_argument("--min-score", help="every recall_history call drops hits under this "
                     "floor: a number or 'suggested' (default: $MEMLIB_MIN_SCORE, else none)")
    mcp.add_argument("--as-of", help="ISO-8601 instant every recall is made at (default: "
                     "now), to compare with the library or a notebook byte for byte")
    mcp.add_argument("--query-id-prefix", help="number the query ids of the calls PREFIX-001, "
                     "PREFIX-002… (default: random ids)")
    mcp.add_argument("--transport", choices=("stdio", "http"), default="stdio",
                     help="stdio (default), or streamable HTTP on 127.0.0.1 only")
    mcp.add_argument("--port", type=_port, help="HTTP port on 127.0.0.1 (default 8000; "
                     "0: any free port, named on stderr)")
    mcp.set_defaults(func=cmd_mcp)
