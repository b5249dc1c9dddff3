"""The ``memlib`` command line: one module a command, each with ``register(subparsers)``.

Bad input never shows a traceback: one line on stderr that names the problem, and exit
status 2. Command modules import nothing heavy (no SDK, no tqdm) until their command runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from collections.abc import Sequence

from .._bulk import error_line
from ..errors import RemoteMemoryError, RemoteMemoryValidationError
from ._common import EXIT_FAILURE, EXIT_USAGE, CliError, Parser, write_error

__all__ = ["main", "build_parser"]

# In this order in ``memlib --help``: the module of each command.
COMMANDS = (  # noqa: SIM905 (a word list reads better as prose)
    "demo recall explain append profile retract supersede chat mcp imports export embed evaluate "
    "doctor db"
).split()


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="memlib", description="Remote memory for LLM agents.")
    parser.add_argument(
        "--store",
        help="store URL: jsonl:PATH, sqlite:PATH or postgresql://… "
        "(default: $MEMLIB_STORE, else JSONL under $WORKBUDDY_HOME)",
    )
    parser.add_argument("--user", help="user id (default: $WORKBUDDY_USER_ID or local-user)")
    parser.add_argument(
        "--embedder",
        help="embed appended and imported records with this model and keep the vectors: "
        "multilingual-e5-small (e5, the default model) or memlib-hashing-64 (hashing) "
        "(default: $MEMLIB_EMBEDDER, else none)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    sub.required = True
    for command in COMMANDS:
        importlib.import_module(f"{__name__}.{command}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        # An empty user id is an error, never "the default user" — for every command
        # (docs/reference.md "Records").
        if args.user is not None and not args.user.strip():
            raise RemoteMemoryValidationError("--user must not be empty")
        return int(args.func(args) or 0)
    except (RemoteMemoryError, CliError) as exc:
        write_error(f"memlib: error: {error_line(exc)}")
        return EXIT_USAGE
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (``memlib demo | head``): not an error of ours.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as exc:
        # A file named on the command line or a folder memlib could not use.
        where = f"{exc.filename}: " if exc.filename else ""
        write_error(f"memlib: error: {where}{exc.strerror or exc}")
        return EXIT_FAILURE
