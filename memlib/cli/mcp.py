"""``memlib mcp``: serve the memory to MCP clients (stdio; ``--transport http`` on localhost).

The store and the bearer token are fixed before the first message, so a bad one fails as
every command does, not inside a client's session. The token file is held to what
OpenSSH asks of a private key: a regular file owned by this user, no bit for others.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
import stat
from pathlib import Path
from typing import Any

from .._runtime import default_root
from ..stores._files import DIR_MODE, open_private, unsafe, write_all
from ._common import CliError, add_project_options, embedder_name, int_arg, parse_as_of, write_line
from .recall import open_recall_engine

__all__ = [
    "MCP_MISSING",
    "cmd_mcp",
    "default_mcp_ranker",
    "default_token_file",
    "read_token_file",
    "register",
]

MCP_MISSING = "memlib mcp needs the mcp extra: pip install 'memlib[mcp]'"
TOKEN_FILE_NAME = "mcp-token"
# secrets.token_urlsafe(32) gives 43 characters; a short hand-made token is refused.
TOKEN_MIN_CHARS = 32
TOKEN_FILE_MAX_BYTES = 4_096
# RFC 6750's token68: what an Authorization header carries without quoting.
_TOKEN68 = re.compile(r"[A-Za-z0-9._~+/-]+=*")


def default_token_file() -> Path:
    """``$WORKBUDDY_HOME/mcp-token`` (default ``~/.learn_workbuddy/mcp-token``)."""
    return default_root().parent / TOKEN_FILE_NAME


def read_token_file(path: str | os.PathLike[str]) -> str:
    """The bearer token in ``path``, refused unless only this user can read the file."""
    name = os.fspath(path)
    try:
        fd = open_private(name, os.O_RDONLY)
    except FileNotFoundError:
        raise CliError(
            f"--transport http needs a bearer token file and {name} does not exist: "
            "make one with memlib mcp --new-token"
        ) from None
    try:
        mode = stat.S_IMODE(os.fstat(fd).st_mode)
        # open_private refuses a file others can write; a credential must not be
        # readable by them either.
        if mode & 0o077:
            raise unsafe(name, f"can be read by other users (mode {mode:04o}): chmod 600 it")
        data = os.read(fd, TOKEN_FILE_MAX_BYTES + 1)
    finally:
        os.close(fd)
    token = data.decode("utf-8", errors="replace").strip()
    if len(data) > TOKEN_FILE_MAX_BYTES or not _TOKEN68.fullmatch(token):
        raise CliError(
            f"{name} does not hold a bearer token (one line of letters, digits and -._~+/)"
        )
    if len(token) < TOKEN_MIN_CHARS:
        raise CliError(
            f"the token in {name} is shorter than {TOKEN_MIN_CHARS} characters: "
            "make a new one with memlib mcp --new-token"
        )
    return token


def new_token_file(path: str | os.PathLike[str]) -> Path:
    """A new random token in ``path`` (mode 0600, created, never overwritten)."""
    name = os.fspath(path)
    # Replacing a token would lock out every host configured with the old one.
    if os.path.lexists(name):
        raise CliError(f"{name} already exists: remove it first to make a new token")
    os.makedirs(os.path.dirname(name) or ".", mode=DIR_MODE, exist_ok=True)
    # O_EXCL: a file that appeared since the check is refused, not overwritten.
    fd = open_private(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        write_all(fd, (secrets.token_urlsafe(32) + "\n").encode("ascii"))
    finally:
        os.close(fd)
    return Path(name)


def default_mcp_ranker(args: argparse.Namespace) -> str:
    """The ranker of a server started without ``--ranker``: the best the command line
    allows. Cross-validated R@10 on LoCoMo's five development conversations: hybrid on
    pair vectors 0.758, on turn vectors 0.714, bm25+stopwords 0.588, the chapter's
    baseline 0.385 (docs/retrieval.md). hybrid needs the model its records were embedded
    with, so it is the default only when ``--embedder`` (or ``$MEMLIB_EMBEDDER``) names one."""
    return "hybrid" if embedder_name(args) else "bm25+stopwords"


_port = int_arg(
    "not a port number: {text!r}", 0, 65_535, "port must be between 0 and 65535: {value}"
)


def cmd_mcp(args: argparse.Namespace) -> int:
    if args.new_token:
        made = new_token_file(args.token_file or default_token_file())
        write_line(f"memlib mcp: new bearer token in {made} (mode 0600)")
        return 0
    for option in ("port", "token_file"):
        if getattr(args, option) is not None and args.transport != "http":
            raise CliError(f"--{option.replace('_', '-')} is for --transport http")
    http = args.transport == "http"
    token = read_token_file(args.token_file or default_token_file()) if http else None
    # The SDK takes most of a second to import: a refused command line does not wait.
    try:
        from ..agent import mcp_server
    except ModuleNotFoundError as exc:
        if (exc.name or "").partition(".")[0] not in ("mcp", "mcp_types"):
            raise
        raise CliError(MCP_MISSING) from None
    # The model's calls cannot name a floor: the engine's own applies to each.
    floor = args.min_score or os.environ.get("MEMLIB_MIN_SCORE") or None
    args.ranker = args.ranker or default_mcp_ranker(args)
    engine = open_recall_engine(args, min_score=floor)
    # [beyond] No project from --project or $MEMLIB_PROJECT (set, even empty, it decides):
    # a stdio client's first workspace root names it (docs/mcp.md, "Projects").
    roots = (
        not http
        and getattr(engine.store, "project", None) is None
        and "MEMLIB_PROJECT" not in os.environ
    )
    memory = None
    try:
        memory = mcp_server.MemoryTools(
            engine, as_of=parse_as_of(args.as_of), query_id_prefix=args.query_id_prefix, roots=roots
        )
        memory.check_store()
        mcp_server.serve(
            memory,
            transport=args.transport,
            port=mcp_server.DEFAULT_PORT if args.port is None else args.port,
            token=token,
        )
    finally:
        if memory is not None and memory.store is not engine.store:  # a root's project
            memory.store.close()
        engine.store.close()
    return 0


def register(subparsers: Any) -> None:
    mcp = subparsers.add_parser(
        "mcp",
        help="serve this user's memory to MCP clients (recall, remember, update, list, …)",
        description=(
            "Serve this user's memory over the Model Context Protocol: the tools "
            "recall_history, remember, update, list, forget and explain, the resource "
            "memlib://profile and the prompt session_start. The user is the one of "
            "--user/--store (or the environment); no tool can name another. Needs the mcp "
            "extra."
        ),
    )
    mcp.add_argument(
        "--ranker",
        help="ranker of every recall (default: hybrid when --embedder or $MEMLIB_EMBEDDER "
        "names a model, else bm25+stopwords)",
    )
    mcp.add_argument(
        "--min-score",
        help="every recall_history call drops hits under this "
        "floor: a number or 'suggested' (default: $MEMLIB_MIN_SCORE, else none)",
    )
    mcp.add_argument(
        "--as-of",
        help="ISO-8601 instant every recall is made at (default: "
        "now), to compare with the library or a notebook byte for byte",
    )
    mcp.add_argument(
        "--query-id-prefix",
        help="number the query ids of the calls PREFIX-001, PREFIX-002… (default: random ids)",
    )
    add_project_options(mcp)
    mcp.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default), or streamable HTTP on 127.0.0.1 only",
    )
    mcp.add_argument(
        "--port",
        type=_port,
        help="HTTP port on 127.0.0.1 (default 8000; 0: any free port, named on stderr)",
    )
    mcp.add_argument(
        "--token-file",
        metavar="PATH",
        help="HTTP only: every request must send 'Authorization: Bearer' and "
        "the token in this file, which only you may read (mode 0600; "
        "default: $WORKBUDDY_HOME/mcp-token)",
    )
    mcp.add_argument(
        "--new-token",
        action="store_true",
        help="write a new random token to the token file (created with mode "
        "0600, never overwritten) and exit",
    )
    mcp.set_defaults(func=cmd_mcp)
