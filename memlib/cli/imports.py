"""``memlib import FILE.jsonl``: ``memlib._bulk.import_jsonl`` (an exported record keeps its
``stored_at``: the store's clock is a ``ReplayClock``); a stream (``-``, a pipe) is read once
into a private temporary file, as the import reads twice. ``--format claude-code|chatgpt``:
conversations people already have (``memlib._importers``); a message imported before is
not written again.
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path
from typing import Any

from .._bulk import DEFAULT_BATCH, ReplayClock, import_items, import_jsonl
from ..errors import RemoteMemoryError, RemoteMemoryValidationError
from ._common import add_project_options, int_arg, open_cli_store, show_progress, write_line

FORMATS = ("jsonl", "claude-code", "chatgpt")


def _is_stream(name: str) -> bool:
    """``-``, or a path that is not a regular file: a pipe, ``/dev/stdin``, a FIFO."""
    if name == "-":
        return True
    try:
        return not stat.S_ISREG(os.stat(name).st_mode)
    except OSError:
        return False  # missing: said as "no such file" below


def cmd_import(args: argparse.Namespace) -> int:
    if args.format != "jsonl":
        return _import_conversations(args)
    if len(args.paths) != 1:
        raise RemoteMemoryValidationError("--format jsonl imports one FILE (or -) at a time")
    name = args.paths[0]
    if _is_stream(name):
        # Read once, whole, before the store opens: checking and writing read it twice.
        # The spool is created mode 0600 and removed on the way out.
        with tempfile.NamedTemporaryFile(prefix="memlib-import-", suffix=".jsonl") as spool:
            if name == "-":
                shutil.copyfileobj(sys.stdin.buffer, spool)
            else:
                try:
                    with open(name, "rb") as stream:
                        shutil.copyfileobj(stream, spool)
                except OSError as exc:
                    raise RemoteMemoryError(f"cannot read {name}: {exc.strerror}") from None
            spool.flush()
            return _import(args, spool.name, "<stdin>" if name == "-" else name)
    if not Path(name).is_file():
        raise RemoteMemoryValidationError(f"no such file: {name}")
    return _import(args, name, name)


def _import(args: argparse.Namespace, path: str, shown: str) -> int:
    clock = ReplayClock()
    store = open_cli_store(args, clock)
    try:
        report = import_jsonl(
            store,
            path,
            batch_size=args.batch_size,
            progress=show_progress(args),
            clock=clock,
            all_projects=args.all_projects,
        )
    except RemoteMemoryError as exc:
        if str(exc).startswith("line "):  # a line of the file: say which file
            raise type(exc)(f"{shown}: {exc}") from None
        raise
    finally:
        store.close()
    write_line(f"imported {report.records} records in {report.batches} batches")
    return 0


def _import_conversations(args: argparse.Namespace) -> int:
    from .._importers import reader_for

    if "-" in args.paths:
        raise RemoteMemoryValidationError(f"--format {args.format} reads files, not -")
    if args.all_projects:
        raise RemoteMemoryValidationError("--all-projects is for --format jsonl")
    converted = reader_for(args.format)(args.paths)  # every input read before the store opens
    store = open_cli_store(args)
    try:
        report = import_items(
            store, converted.items, batch_size=args.batch_size, progress=show_progress(args)
        )
    finally:
        store.close()
    sources = len(converted.sources)
    of = f"{sources} source" + ("" if sources == 1 else "s")
    if report.records == 0 and report.skipped:
        write_line(f"nothing new: the {report.skipped} records of {of} were imported before")
    else:
        line = f"imported {report.records} records in {report.batches} batches from {of}"
        if report.skipped:
            line += f"; {report.skipped} imported before, not written again"
        write_line(line)
    if converted.skipped:
        skipped = sorted(converted.skipped.items())
        write_line(f"skipped: {', '.join(f'{reason} ({n})' for reason, n in skipped)}")
    return 0


_positive = int_arg(
    "batch size must be an integer", 1, out_of_range="batch size must be at least 1"
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "import", help="import records from a JSONL file (checked first, then batched)"
    )
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="jsonl: one file, one JSON object per line: memory_id, content, summary, "
        "source[, kind], or records as `memlib export` writes them; - reads standard input. "
        "claude-code: session files or folders (~/.claude/projects); "
        "chatgpt: conversations.json, its folder or the export's .zip",
    )
    parser.add_argument(
        "--format", choices=FORMATS, default="jsonl", help="what the files are (default: jsonl)"
    )
    parser.add_argument("--batch-size", type=_positive, default=DEFAULT_BATCH)
    parser.add_argument(
        "--progress", action="store_true", help="show the progress bar even when not a terminal"
    )
    parser.add_argument("--no-progress", action="store_true", help="never show the progress bar")
    add_project_options(parser, all_projects=True)  # jsonl --all-projects: each to its own
    parser.set_defaults(func=cmd_import)
