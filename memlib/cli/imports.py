"""``memlib import FILE.jsonl``: ``memlib._bulk.import_jsonl`` from the command line. A
stream (``-``, a pipe) is read once into a private temporary file: the import reads twice.
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

from .._bulk import DEFAULT_BATCH, import_jsonl
from ..errors import RemoteMemoryError, RemoteMemoryValidationError
from ._common import int_arg, open_cli_store, write_line


def _is_stream(name: str) -> bool:
    """``-``, or a path that is not a regular file: a pipe, ``/dev/stdin``, a FIFO."""
    if name == "-":
        return True
    try:
        return not stat.S_ISREG(os.stat(name).st_mode)
    except OSError:
        return False  # missing: said as "no such file" below


def cmd_import(args: argparse.Namespace) -> int:
    if _is_stream(args.file):
        # Read once, whole, before the store opens: checking and writing read it twice.
        # The spool is created mode 0600 and removed on the way out.
        with tempfile.NamedTemporaryFile(prefix="memlib-import-", suffix=".jsonl") as spool:
            if args.file == "-":
                shutil.copyfileobj(sys.stdin.buffer, spool)
            else:
                try:
                    with open(args.file, "rb") as stream:
                        shutil.copyfileobj(stream, spool)
                except OSError as exc:
                    raise RemoteMemoryError(f"cannot read {args.file}: {exc.strerror}") from None
            spool.flush()
            return _import(args, spool.name)
    if not Path(args.file).is_file():
        raise RemoteMemoryValidationError(f"no such file: {args.file}")
    return _import(args, args.file)


def _import(args: argparse.Namespace, path: str) -> int:
    store = open_cli_store(args)
    try:
        progress = args.progress or (not args.no_progress and sys.stderr.isatty())
        report = import_jsonl(store, path, batch_size=args.batch_size, progress=progress)
    finally:
        store.close()
    write_line(f"imported {report.records} records in {report.batches} batches")
    return 0


_positive = int_arg(
    "batch size must be an integer", 1, out_of_range="batch size must be at least 1"
)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "import", help="import records from a JSONL file (checked first, then batched)"
    )
    parser.add_argument(
        "file",
        help="one JSON object per line: memory_id, content, summary, source[, kind]; "
        "- reads standard input",
    )
    parser.add_argument("--batch-size", type=_positive, default=DEFAULT_BATCH)
    parser.add_argument(
        "--progress", action="store_true", help="show the progress bar even when not a terminal"
    )
    parser.add_argument("--no-progress", action="store_true", help="never show the progress bar")
    parser.set_defaults(func=cmd_import)
