"""What every ``memlib`` command shares: the parser class, the store, errors, output.

Every line a command writes goes through ``write_line``, ``write_json`` or
``write_error``, as visible text (docs/contract.md, "What the model reads"): what a store
holds may reach a terminal or a model, and an ESC or a bidi override is never sent raw.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable
from datetime import datetime
from typing import Any, NoReturn

from .._runtime import default_project, default_store_url, default_user_id
from .._visible import Form, visible
from ..errors import RemoteMemoryValidationError
from ..normalize import as_utc
from ..records import MemorySource, format_timestamp
from ..stores import open_store
from ..stores._base import Clock, MemoryStore

EXIT_USAGE = 2
EXIT_FAILURE = 1


class CliError(Exception):
    """A one-line problem with the command line itself."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse prints the whole usage; a student needs the one line that matters. Its
        # messages quote the command line, which may hold what a store held.
        self.exit(EXIT_USAGE, shown(f"{self.prog}: error: {message}", "text") + "\n")


def int_arg(
    not_int: str, low: int = -(2**63), high: int = 2**63, out_of_range: str = ""
) -> Callable[[str], int]:
    """An argparse ``type``: an integer in ``low..high``, refused with these messages
    (``{text!r}`` and ``{value}`` are filled in)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(not_int.format(text=text)) from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(out_of_range.format(value=value))
        return value

    return parse


def parse_as_of(text: str | None, option: str = "--as-of") -> datetime | None:
    if text is None:
        return None
    try:
        return as_utc(datetime.fromisoformat(text.strip()))
    except ValueError:
        raise RemoteMemoryValidationError(f"invalid {option} timestamp: {text!r}") from None


def embedder_name(args: argparse.Namespace) -> str | None:
    return getattr(args, "embedder", None) or os.environ.get("MEMLIB_EMBEDDER") or None


def open_cli_store(args: argparse.Namespace, clock: Clock | None = None) -> MemoryStore:
    """The store named by the global ``--store`` / ``--user`` (or the environment),
    embedding what it appends when ``--embedder`` (or ``$MEMLIB_EMBEDDER``) names a model."""
    user_id = default_user_id() if args.user is None else args.user
    url = args.store or default_store_url(user_id)
    project = getattr(args, "project", None)
    project = default_project() if project is None else project
    embedder = None
    if name := embedder_name(args):
        from ..rankers.embeddings import get_embedder  # the model only when one is named

        embedder = get_embedder(name)
    return open_store(url, user_id=user_id, clock=clock, embedder=embedder, project=project)


def cli_source(args: argparse.Namespace, source_type: str, title: str) -> MemorySource:
    """The source of a record written from flags: ``--source-id``, ``--captured-at`` (else now)."""
    captured_at = args.captured_at or format_timestamp(as_utc(None))
    return MemorySource(
        source_id=args.source_id, source_type=source_type, title=title, captured_at=captured_at
    )


def add_project_options(parser: Any, *, all_projects: bool = False) -> None:
    parser.add_argument(
        "--project",
        default=argparse.SUPPRESS,  # a global --project, if any, is not overwritten
        help="the project inside the user (default: $MEMLIB_PROJECT, else none)",
    )
    if all_projects:
        parser.add_argument(
            "--all-projects",
            action="store_true",
            help="read every project of the user, not only the current one",
        )


def show_progress(args: argparse.Namespace) -> bool:
    return bool(args.progress or (not args.no_progress and sys.stderr.isatty()))


def store_embedder(store: Any, args: argparse.Namespace) -> Any:
    """The model for ``store``'s vectors: the one named on the command line, else the one
    its vectors were made by, else the default model. Set as the store's embedder."""
    from ..rankers.embeddings import DEFAULT_EMBEDDER, get_embedder

    if store.embedder is None:
        recorded = store.vector_state().model
        store.embedder = get_embedder(embedder_name(args) or recorded or DEFAULT_EMBEDDER)
    return store.embedder


# What ``visible`` leaves as it is but a terminal does not show as written: a carriage
# return moves the cursor back over the line (a stored "ok\rno" shows "no"), and a
# terminal may break the line at U+2028/U+2029 or draw nothing. A prompt block keeps them
# (an XML or JSON parser reads them as text); a terminal gets them as escapes too.
_TERMINAL = re.compile("[\r\u2028\u2029]")
_TERMINAL_ESCAPE = {"xml": "&#x{:X};", "json": "\\u{:04x}", "text": "\\u{:04x}"}


def shown(text: str, form: Form = "text") -> str:
    """``text`` as a command prints it: ``visible(text, form)`` with carriage returns and
    line/paragraph separators escaped too, in the syntax of ``form``."""
    escape = _TERMINAL_ESCAPE[form]
    return _TERMINAL.sub(lambda m: escape.format(ord(m.group())), visible(text, form))


def write_line(text: str, form: Form = "text") -> None:
    """``text`` on stdout as ``shown`` text of ``form``, ending in exactly one newline."""
    text = shown(text, form)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")


def write_json(value: Any) -> None:
    """``value`` as one JSON document on stdout: non-ASCII text as it is (中文, café), every
    invisible, control or direction-changing character as a ``\\uXXXX`` escape."""
    write_line(json.dumps(value, ensure_ascii=False), "json")


def write_error(text: str) -> None:
    """``text`` on stderr as one line of visible text."""
    if "\n" in text or "\r" in text:
        # An error is one line (as ``error_line`` makes it): a message that quotes stored
        # text cannot add a line that reads as another message.
        text = " ".join(text.split())
    sys.stderr.write(shown(text, "text") + "\n")
