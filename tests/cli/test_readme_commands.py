"""The README's command list stays true: every ``memlib`` subcommand is in it, and every
``memlib …`` line it shows names a real one."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

from memlib.cli import build_parser

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
# ``memlib``, then global options with their values (``--store URL``), then the command.
_PREFIX = r"\bmemlib (?:--[\w-]+ \S+ )*"


def _subparsers(
    parser: argparse.ArgumentParser,
) -> argparse._SubParsersAction[argparse.ArgumentParser] | None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return action
    return None


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[str]:
    """Every leaf command, as typed: ``demo``, ``db init``, ``eval locomo``, …"""
    sub = _subparsers(parser)
    if sub is None:
        yield " ".join(path)
        return
    for name, child in sub.choices.items():
        yield from _commands(child, (*path, name))


COMMANDS = sorted(_commands(build_parser()))


def test_the_parser_has_the_commands_this_test_expects() -> None:
    # A guard on the walk itself: nested commands are found, not only the top level.
    assert {"demo", "recall", "import", "doctor", "db init", "eval locomo"} <= set(COMMANDS)


def test_every_command_is_in_the_readme() -> None:
    missing = [c for c in COMMANDS if not re.search(_PREFIX + re.escape(c) + r"(?![\w-])", README)]
    assert missing == [], f"README.md does not show: {', '.join(f'memlib {c}' for c in missing)}"


def test_every_command_line_in_the_readme_is_real() -> None:
    groups = {c.split()[0] for c in COMMANDS if " " in c}
    shown = re.findall(r"(?m)^\s*" + _PREFIX + r"([a-z][\w-]*(?: [a-z][\w-]*)?)", README)
    assert shown, "no `memlib …` command line found in README.md"
    unknown = sorted(
        {
            words
            for words in shown
            if (
                words not in COMMANDS
                if words.split()[0] in groups
                else words.split()[0] not in COMMANDS
            )
        }
    )
    assert unknown == []


def test_the_readme_stays_a_newcomers_page() -> None:
    # Issue 33: 200 lines at most; results, studies and history belong in docs/.
    assert len(README.splitlines()) <= 200
