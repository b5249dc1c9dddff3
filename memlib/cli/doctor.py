"""``memlib doctor PATH [--repair]``: check a JSONL store file (the checks and the repair
are ``memlib.stores.jsonl._doctor``'s); exit 0 when healthy, 1 when not, never a traceback.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import RemoteMemoryError
from ..stores.jsonl import _doctor
from ._common import write_error, write_line

__all__ = ["cmd_doctor", "register"]

MAX_SHOWN = 50  # problems printed; the count is always exact


def _path_of(text: str) -> Path:
    scheme, sep, rest = text.partition(":")
    if sep and scheme.lower() == "jsonl":
        return Path(rest)
    if sep and scheme.lower() in ("sqlite", "postgresql", "postgres"):
        raise _doctor.RepairError(f"doctor checks JSONL store files only, not {scheme}: stores")
    return Path(text)


def _print_report(report: _doctor.DoctorReport) -> None:
    write_line(f"checked {report.path}")
    kinds = ", ".join(f"{n} {k}" for k, n in sorted(report.kinds.items())) or "none"
    write_line(f"lines: {report.lines} complete, {report.records} valid records ({kinds})")
    if report.scopes:
        scopes = ", ".join(f"{s} ({n})" for s, n in sorted(report.scopes.items()))
        write_line(f"user scopes: {scopes}")
    for problem in report.problems[:MAX_SHOWN]:
        write_line(f"problem: {problem.message}")
    if len(report.problems) > MAX_SHOWN:
        write_line(f"… and {len(report.problems) - MAX_SHOWN} more problems")
    index = report.index
    if index is not None:
        detail = {
            "fresh": f"fresh (covers all {index.covered_lines} records)",
            "stale": f"stale by {report.lines - index.covered_lines} records (caught up from "
            "the log's tail when read)",
            "invalid": f"invalid, not used: {index.reason}",
            "absent": "absent",
        }[index.status]
        write_line(f"index file: {detail}")
    for line in _doctor.vector_lines(report):
        write_line(line)
    n = len(report.problems)
    write_line(f"status: {n} problem{'s' if n != 1 else ''}" if n else "status: healthy")


def _repair(path: Path, user_id: str | None, report: _doctor.DoctorReport) -> _doctor.DoctorReport:
    """``--repair``: each step that ran says what it did, and the file is checked again."""
    repaired = False
    if removed := _doctor.remove_temp_files(report):
        write_line(
            f"repaired: removed {len(removed)} stale temporary files "
            f"({sum(n for _, n in removed):,} bytes)"
        )
        report, repaired = _doctor.check_store(path, user_id=user_id), True
    if report.torn_bytes:
        if (cut := _doctor.repair_torn_tail(path)) is not None:
            write_line(
                f"repaired: cut a torn tail of {cut[1]} bytes; the whole file was "
                f"first copied to {cut[0]}"
            )
        report, repaired = _doctor.check_store(path, user_id=user_id), True
    elif _doctor.rebuild_index_file(report):  # only a stale or invalid one of a healthy log
        write_line("repaired: rebuilt the index file from the log")
        report, repaired = _doctor.check_store(path, user_id=user_id), True
    # After a torn tail is cut: the rows of the records cut go with it.
    if (rows := _doctor.repair_vectors_file(report)) is not None:
        write_line(
            f"repaired: rewrote the vectors file, kept {rows[0]} rows, dropped {rows[1]}"
            if any(rows)
            else "repaired: removed an unreadable vectors file"
        )
        report, repaired = _doctor.check_store(path, user_id=user_id), True
    if not repaired:
        write_line("repair: no torn tail, nothing to do")
    return report


def cmd_doctor(args: argparse.Namespace) -> int:
    try:
        path = _path_of(args.path)
        user_id = getattr(args, "user", None)  # an empty one is refused by main()
        report = _doctor.check_store(path, user_id=user_id)
        if args.repair:
            report = _repair(path, user_id, report)
        _print_report(report)
    except _doctor.RepairError as exc:
        write_error(f"memlib doctor: error: {exc}")
        return 1
    except (OSError, UnicodeError, ValueError, RemoteMemoryError) as exc:
        # Never a traceback: one line that says what went wrong.
        write_error(f"memlib doctor: error: {_doctor.describe(exc)}")
        return 1
    return 0 if report.healthy else 1


def register(subparsers: Any) -> None:
    doctor = subparsers.add_parser(
        "doctor",
        help="check a JSONL store file (parse, scope, duplicates, torn tail, permissions)",
        description=(
            "Check a JSONL records file and report every problem without changing anything. "
            "Exit 0 when healthy, 1 when not. With --repair, a torn tail (a last line without a "
            "newline) is cut after the whole file is copied to a backup next to it, a stale "
            "index file is rebuilt and the vectors file keeps only the rows that match the log; "
            "no record is ever changed. The global --user also checks that every record belongs "
            "to that user's scope."
        ),
    )
    doctor.add_argument("path", metavar="PATH", help="records.jsonl (or jsonl:PATH)")
    doctor.add_argument(
        "--repair",
        action="store_true",
        help="cut a torn tail (after a backup copy), remove stale temporary files, rebuild "
        "the index and vectors files from the log",
    )
    doctor.set_defaults(func=cmd_doctor)
