"""What every ``memlib`` command shares: the parser class, the store, errors, output.

Bad input never shows a traceback: one line on stderr that names the problem, and exit
status 2 (``EXIT_USAGE``).
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime
from typing import NoReturn

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


def parse_as_of(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return as_utc(datetime.fromisoformat(text.strip()))
    except ValueError:
        raise RemoteMemoryValidationError(f"invalid --as-of timestamp: {text!r}") from None


def open_cli_store(args: argparse.Namespace) -> MemoryStore:
    """The store named by the global ``--store`` / ``--user`` (or the environment)."""
    user_id = default_user_id() if args.user is None else args.user
    url = args.store or default_store_url(user_id)
    return open_store(url, user_id=user_id)


def write_line(text: str) -> None:
    """``text`` on stdout, ending in exactly one newline."""
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
