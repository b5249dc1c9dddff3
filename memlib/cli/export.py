"""``memlib export``: every record of the scope, for ``memlib import`` or for people.

``--format jsonl`` (the default): one record a line in append order, as the JSONL store
keeps it; ``memlib import`` of it into an empty store gives the same records, retractions,
supersede links and ``stored_at`` included. ``--format markdown --out DIR``: one file per
source, its records in the order they happened. ``--all-projects``: every project of the
user in one file, each record naming its project (docs/contract.md). Text is escaped as
every command writes it (JSON ``\\u`` escapes read back to the stored text); files are
created mode 0600, never overwritten.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .._bulk import export_lines
from ..errors import RemoteMemoryValidationError
from ..records import MemoryKind, StoredMemory
from ..stores._projects import all_projects_of
from ._common import add_project_options, open_cli_store, shown, write_line

_SLUG = re.compile(r"[^A-Za-z0-9._-]+")


def cmd_export(args: argparse.Namespace) -> int:
    if args.format == "markdown" and args.out is None:
        raise RemoteMemoryValidationError("--format markdown needs --out DIR")
    opened = open_cli_store(args)
    store = all_projects_of(opened) if args.all_projects else opened
    try:
        if args.format == "markdown":
            records = store.read_all()
            count = _write_markdown(Path(args.out), records)
            write_line(f"exported {len(records)} records in {count} files to {args.out}")
        elif args.out is None:
            for line in export_lines(store):
                write_line(line, "json")
        else:
            count = _write_jsonl(Path(args.out), export_lines(store))
            write_line(f"exported {count} records to {args.out}")
    finally:
        store.close()
        if store is not opened:
            opened.close()
    return 0


def _create(path: Path) -> int:
    """A new file, mode 0600; an existing one is refused, never overwritten."""
    try:
        return os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    except FileExistsError:
        raise RemoteMemoryValidationError(f"{path} exists; export writes only new files") from None


def _write_jsonl(path: Path, lines: Iterable[str]) -> int:
    count = 0
    with os.fdopen(_create(path), "w", encoding="utf-8", newline="\n") as handle:
        for line in lines:
            handle.write(shown(line, "json") + "\n")
            count += 1
    return count


def _write_markdown(folder: Path, records: Sequence[StoredMemory]) -> int:
    """One file per source; the number of files."""
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise RemoteMemoryValidationError(f"{folder} exists and is not an empty folder")
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    by_source: dict[str, list[StoredMemory]] = {}
    for record in records:
        by_source.setdefault(record.source.source_id, []).append(record)
    retractions = {r.retracts: r for r in records if r.retracts is not None}
    for source_id, group in by_source.items():
        name = _file_name(source_id)
        text = _source_markdown(group, retractions)
        with os.fdopen(_create(folder / name), "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
    return len(by_source)


def _file_name(source_id: str) -> str:
    """A safe, readable name; a hash of the id tells apart two ids of the same slug."""
    slug = _SLUG.sub("-", source_id).strip("-.")[:60] or "source"
    digest = hashlib.sha256(source_id.encode("utf-8")).hexdigest()[:12]
    return f"{slug}-{digest}.md"


def _md(text: str) -> str:
    """Stored text as visible, inert Markdown: no raw HTML, no forged heading or link."""
    for char in "\\`*_[]<>#|":
        text = text.replace(char, "\\" + char)
    return shown(text, "text")


def _source_markdown(group: list[StoredMemory], retractions: dict[str, StoredMemory]) -> str:
    first = group[0].source
    lines = [
        f"# {_md(first.title)}",
        "",
        f"- source_id: {_md(first.source_id)}",
        f"- source_type: {_md(first.source_type)}",
        f"- records: {len(group)}",
        "",
    ]
    ordered = sorted(enumerate(group), key=lambda pair: (pair[1].captured_at, pair[0]))
    for _, record in ordered:
        lines += _record_markdown(record, retractions.get(record.memory_id))
    return "\n".join(lines)


def _record_markdown(record: StoredMemory, retraction: StoredMemory | None) -> list[str]:
    head = f"## {record.captured_at} · {record.kind.value} · {_md(record.memory_id)}"
    lines = [head, ""]
    if record.kind is MemoryKind.RETRACTION:
        lines.append(f"Retracts {_md(str(record.retracts))}: {_md(record.content)}")
    else:
        lines.append(_md(record.content))
        if record.summary != record.content[: len(record.summary)]:
            lines += ["", f"*Summary:* {_md(record.summary)}"]
    if record.supersedes is not None:
        lines += ["", f"*Supersedes* {_md(record.supersedes)}."]
    if retraction is not None:
        verb = "Superseded" if retraction.superseded_by else "Retracted"
        by = f" by {_md(retraction.superseded_by)}" if retraction.superseded_by else ""
        lines += ["", f"**{verb}{by}** at {retraction.stored_at}: {_md(retraction.content)}"]
    lines += ["", f"<sub>stored at {record.stored_at}</sub>", ""]
    return lines


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "export", help="write every record of the scope: JSONL for import, or Markdown"
    )
    parser.add_argument(
        "--format",
        choices=("jsonl", "markdown"),
        default="jsonl",
        help="jsonl (default): one record a line, read back by `memlib import`; "
        "markdown: one file per source, for people",
    )
    parser.add_argument(
        "--out",
        help="jsonl: a new file (default: standard output); markdown: a new or empty folder",
    )
    add_project_options(parser, all_projects=True)
    parser.set_defaults(func=cmd_export)
