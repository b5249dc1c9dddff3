"""The ``memlib`` command line: demo, recall, append, profile, retract.

Bad input never shows a traceback: one line on stderr that names the problem, and exit
status 2. Commands owned by other modules (chat, import, eval, db, doctor) register
themselves through ``_EXTENSIONS`` so this file stays the core's.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, NoReturn

from .engine import RecallEngine
from .errors import RemoteMemoryDuplicateError, RemoteMemoryError, RemoteMemoryValidationError
from .normalize import as_utc
from .records import MemoryKind, MemorySource, format_timestamp
from .render import render_recall_context, render_remote_profile
from .runtime import default_store_url, default_user_id
from .safejson import loads_input_line
from .stores import open_store
from .stores.base import MemoryStore

__all__ = [
    "main", "build_parser", "CliError", "open_cli_store", "parse_as_of", "error_line",
]

EXIT_USAGE = 2
EXIT_FAILURE = 1
# Ids named in an error line; a re-import of 10,000 records must not print them all.
SHOWN_IDS = 5
DEMO_QUERY = "layered memory"
DEMO_QUERY_ID = "demo-query-001"

# Modules that add subcommands: each has ``register(subparsers)``. Missing ones are
# skipped, so a slim install without an optional module still has the core commands.
_EXTENSIONS = (
    "memlib.agent.cli",
    "memlib.bulk",
    "memlib.eval.cli",
    "memlib.doctor",
    "memlib.stores.admin",
)


class CliError(Exception):
    """A one-line problem with the command line itself."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse prints the whole usage; a student needs the one line that matters.
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def parse_as_of(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return as_utc(datetime.fromisoformat(text.strip()))
    except ValueError:
        raise RemoteMemoryValidationError(f"invalid --as-of timestamp: {text!r}") from None


def open_cli_store(args: argparse.Namespace) -> MemoryStore:
    user_id = default_user_id() if args.user is None else args.user
    url = args.store or default_store_url(user_id)
    return open_store(url, user_id=user_id)


def _print(text: str) -> None:
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


# -- commands -----------------------------------------------------------------------

def cmd_demo(args: argparse.Namespace) -> int:
    from .sample import SAMPLE_AS_OF, open_sample_store

    def run(root: str) -> None:
        store = open_sample_store(root)
        result = RecallEngine(store).recall(
            DEMO_QUERY, limit=args.limit, as_of=SAMPLE_AS_OF, query_id=DEMO_QUERY_ID
        )
        _print("# Session start: the latest profile snapshot")
        _print(render_remote_profile(store.latest_profile()))
        _print("")
        at = format_timestamp(SAMPLE_AS_OF)
        _print(f"# recall_history({DEMO_QUERY!r}, limit={args.limit}) at {at}")
        _print(result.to_json())
        _print("")
        _print("# Rendered context for the prompt")
        _print(render_recall_context(result) or "(no hits: nothing is injected)")

    if args.root:
        run(args.root)
    else:
        with tempfile.TemporaryDirectory(prefix="memlib-demo-") as root:
            run(root)
    return 0


def cmd_recall(args: argparse.Namespace) -> int:
    store = open_cli_store(args)
    engine = RecallEngine(store, ranker=args.ranker)
    result = engine.recall(
        args.text, limit=args.limit, as_of=parse_as_of(args.as_of), query_id=args.query_id
    )
    if args.json:
        _print(result.to_json())
    elif result.hits:
        _print(render_recall_context(result))
    else:
        _print(
            f"no hits ({result.empty_reason}): searched {result.searched_records} "
            f"conversation records, {result.candidate_records} shared a term"
        )
    return 0


_APPEND_FLAGS = (
    "memory_id", "content", "summary", "source_id", "source_type", "title", "captured_at",
)


def _items_from_stdin() -> list[dict[str, Any]]:
    items = []
    # Bytes, decoded as UTF-8 (JSON's encoding) whatever the locale says.
    stream = getattr(sys.stdin, "buffer", None)
    lines: Iterable[bytes] = (
        stream if stream is not None
        else (line.encode("utf-8", "surrogatepass") for line in sys.stdin)
    )
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        data = loads_input_line(line, f"stdin line {number}")
        if not isinstance(data, dict):
            raise RemoteMemoryValidationError(f"stdin line {number} is not a JSON object")
        items.append(data)
    if not items:
        raise RemoteMemoryValidationError("no record on stdin (one JSON object per line)")
    return items


def cmd_append(args: argparse.Namespace) -> int:
    given = [name for name in _APPEND_FLAGS if getattr(args, name) is not None]
    if given:
        missing = [f"--{n.replace('_', '-')}" for n in _APPEND_FLAGS if getattr(args, n) is None]
        if missing:
            raise CliError(f"append needs {', '.join(missing)} (or a JSON line on stdin)")
        items: list[dict[str, Any]] = [
            {
                "kind": args.kind,
                "memory_id": args.memory_id,
                "content": args.content,
                "summary": args.summary,
                "source": {
                    "source_id": args.source_id,
                    "source_type": args.source_type,
                    "title": args.title,
                    "captured_at": args.captured_at,
                },
            }
        ]
    else:
        if sys.stdin.isatty():
            raise CliError("append needs flags (see --help) or JSON lines on stdin")
        items = _items_from_stdin()
        for item in items:
            item.setdefault("kind", args.kind)
    store = open_cli_store(args)
    for record in store.append_many(items):
        _print(json.dumps(record.to_dict(), ensure_ascii=False))
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    store = open_cli_store(args)
    profile = store.latest_profile()
    if profile is None:
        print("no profile stored for this user", file=sys.stderr)
        return 1
    _print(render_remote_profile(profile))
    return 0


def cmd_retract(args: argparse.Namespace) -> int:
    store = open_cli_store(args)
    source = MemorySource(
        source_id=args.source_id,
        source_type="manual_retraction",
        title=f"Retraction of {args.memory_id}",
        captured_at=args.captured_at or format_timestamp(as_utc(None)),
    )
    record = store.retract(args.memory_id, reason=args.reason, source=source)
    _print(json.dumps(record.to_dict(), ensure_ascii=False))
    return 0


# -- parser -------------------------------------------------------------------------

def _limit(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError("limit must be an integer") from None


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="memlib", description="Remote memory for LLM agents.")
    parser.add_argument(
        "--store", help="store URL: jsonl:PATH, sqlite:PATH or postgresql://… "
        "(default: $MEMLIB_STORE, else JSONL under $WORKBUDDY_HOME)",
    )
    parser.add_argument("--user", help="user id (default: $WORKBUDDY_USER_ID or local-user)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    demo = sub.add_parser("demo", help="offline demo on the sample corpus (same output every run)")
    demo.add_argument("--limit", type=_limit, default=5)
    demo.add_argument(
        "--root", help="keep the demo store in this folder instead of a temporary one"
    )
    demo.set_defaults(func=cmd_demo)

    recall = sub.add_parser("recall", help="recall conversation records for a query")
    recall.add_argument("text")
    recall.add_argument("--limit", type=_limit, default=5)
    recall.add_argument("--as-of", help="ISO-8601 instant (default: now, UTC)")
    recall.add_argument("--query-id")
    recall.add_argument("--ranker", default="baseline")
    recall.add_argument("--json", action="store_true", help="print the tool JSON")
    recall.set_defaults(func=cmd_recall)

    append = sub.add_parser("append", help="append a record from flags, or JSON lines on stdin")
    append.add_argument("--kind", default=MemoryKind.CONVERSATION.value,
                        choices=[MemoryKind.CONVERSATION.value, MemoryKind.PROFILE.value])
    for name in _APPEND_FLAGS:
        append.add_argument(f"--{name.replace('_', '-')}", dest=name)
    append.set_defaults(func=cmd_append)

    profile = sub.add_parser("profile", help="print the latest profile block")
    profile.set_defaults(func=cmd_profile)

    retract = sub.add_parser("retract", help="retract a record (appends a RETRACTION)")
    retract.add_argument("memory_id")
    retract.add_argument("--reason", required=True)
    retract.add_argument("--source-id", default="cli")
    retract.add_argument("--captured-at")
    retract.set_defaults(func=cmd_retract)

    for module_name in _EXTENSIONS:
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and module_name.startswith(exc.name):
                continue
            raise
        module.register(sub)
    return parser


def error_line(exc: BaseException) -> str:
    """The one line an error prints: long id lists cut, no line breaks."""
    if isinstance(exc, RemoteMemoryDuplicateError) and len(exc.memory_ids) > SHOWN_IDS:
        ids = exc.memory_ids
        message = (f"duplicate memory_id: {', '.join(ids[:SHOWN_IDS])} … and "
                   f"{len(ids) - SHOWN_IDS:,} more ({len(ids):,} in all)")
    else:
        message = str(exc)
    if "\n" in message or "\r" in message:
        message = " ".join(message.split())
    return message


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        # SPEC §1: an empty user id is an error, never "the default user" — for every
        # command, those of the extensions too.
        if args.user is not None and not args.user.strip():
            raise RemoteMemoryValidationError("--user must not be empty")
        return int(args.func(args) or 0)
    except (RemoteMemoryError, CliError) as exc:
        print(f"memlib: error: {error_line(exc)}", file=sys.stderr)
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
        print(f"memlib: error: {where}{exc.strerror or exc}", file=sys.stderr)
        return EXIT_FAILURE


if __name__ == "__main__":
    raise SystemExit(main())
