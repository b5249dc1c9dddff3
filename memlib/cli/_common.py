"""What every ``memlib`` command shares: the parser class, the store, errors, output.

Bad input never shows a traceback: one line on stderr that names the problem, and exit
status 2 (``EXIT_USAGE``).
"""

from __future__ import annotations

import argparse
import os
import sys
from datetime import datetime
from typing import Any, NoReturn

from ..bulk import error_line
from ..errors import RemoteMemoryValidationError
from ..normalize import as_utc
from ..runtime import default_store_url, default_user_id
from ..stores import open_store
from ..stores.base import MemoryStore

__all__ = [
    "EXIT_FAILURE",
    "EXIT_USAGE",
    "CliError",
    "Parser",
    "error_line",
    "open_cli_store",
    "parse_as_of",
    "parse_known_at",
    "store_embedder",
    "embedder_name",
    "write_line",
]

EXIT_USAGE = 2
EXIT_FAILURE = 1


class CliError(Exception):
    """A one-line problem with the command line itself."""


class Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # argparse prints the whole usage; a student needs the one line that matters.
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def _instant(text: str | None, option: str) -> datetime | None:
    if text is None:
        return None
    try:
        return as_utc(datetime.fromisoformat(text.strip()))
    except ValueError:
        raise RemoteMemoryValidationError(f"invalid {option} timestamp: {text!r}") from None


def parse_as_of(text: str | None) -> datetime | None:
    return _instant(text, "--as-of")


def parse_known_at(text: str | None) -> datetime | None:
    return _instant(text, "--known-at")


def embedder_name(args: argparse.Namespace) -> str | None:
    return getattr(args, "embedder", None) or os.environ.get("MEMLIB_EMBEDDER") or None


def open_cli_store(args: argparse.Namespace) -> MemoryStore:
    """The store named by the global ``--store`` / ``--user`` (or the environment),
    embedding what it appends when ``--embedder`` (or ``$MEMLIB_EMBEDDER``) names a model."""
    user_id = default_user_id() if args.user is None else args.user
    url = args.store or default_store_url(user_id)
    name = embedder_name(args)
    if name is None:
        return open_store(url, user_id=user_id)
    from ..rankers.embeddings import get_embedder  # torch only when a model is named

    return open_store(url, user_id=user_id, embedder=get_embedder(name))


def store_embedder(store: Any, args: argparse.Namespace) -> Any:
    """The model for ``store``'s vectors: the one named on the command line, else the one
    its vectors were made by, else all-MiniLM-L6-v2. Set as the store's embedder."""
    from ..rankers.embeddings import MODEL_NAME, get_embedder

    if store.embedder is None:
        recorded = store.vector_state().model
        store.embedder = get_embedder(embedder_name(args) or recorded or MODEL_NAME)
    return store.embedder


def write_line(text: str) -> None:
    """``text`` on stdout, ending in exactly one newline."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
