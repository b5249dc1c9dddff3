"""``memlib profile``: the latest profile block, as the system prompt shows it."""

from __future__ import annotations

import argparse
from typing import Any

from ..render import render_remote_profile
from ._common import EXIT_FAILURE, add_project_options, open_cli_store, write_error, write_line


def cmd_profile(args: argparse.Namespace) -> int:
    profile = open_cli_store(args).latest_profile()
    if profile is None:
        write_error("no profile stored for this user")
        return EXIT_FAILURE
    write_line(render_remote_profile(profile), "xml")
    return 0


def register(subparsers: Any) -> None:
    profile = subparsers.add_parser("profile", help="print the latest profile block")
    add_project_options(profile)
    profile.set_defaults(func=cmd_profile)
