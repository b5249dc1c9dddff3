"""Many records at once from a JSONL file: every line checked before the first write, then
written in batches, each all or nothing (a failure says what was imported before it).

A line holds ``store.append``'s keywords or a record ``memlib export`` wrote (with
``stored_at``), imported as it was stored: by ``store.retract`` or ``store.supersede`` for
those, and at its ``stored_at`` with a ``ReplayClock`` (docs/reference.md#export)."""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ._progress import progress_bar
from ._safejson import loads_input_line
from ._visible import shown_name
from .errors import (
    RemoteMemoryCorruptionError,
    RemoteMemoryDuplicateError,
    RemoteMemoryError,
    RemoteMemoryValidationError,
)
from .records import (
    MemoryKind,
    MemorySource,
    StoredMemory,
    format_timestamp,
    parse_timestamp,
    project_name,
    record_from_item,
    record_json,
)
from .stores._base import BaseMemoryStore, IdLookup, MemoryStore, records_by_id_of

DEFAULT_BATCH = 5_000
# Ids named in an error line; a re-import of 10,000 records must not print them all.
SHOWN_IDS = 5
_ITEM_KEYS = ("kind", "memory_id", "content", "summary", "source")
_LINK_KEYS = ("retracts", "supersedes", "superseded_by")
_CHECK_AT = "2000-01-01T00:00:00Z"
_Path = str | os.PathLike[str]


@dataclass(frozen=True)
class ImportReport:
    records: int
    batches: int
    # Records an importer found already stored (the same message imported before).
    skipped: int = 0


class ReplayClock:
    """A store clock (``open_store(…, clock=ReplayClock())``) that says the ``stored_at``
    of the exported record being imported, and the real time otherwise."""

    def __init__(self) -> None:
        self.moment: datetime | None = None

    def __call__(self) -> datetime:
        return self.moment if self.moment is not None else datetime.now(UTC)


@dataclass(frozen=True)
class _Line:
    """One line to import: append keywords, and an exported record's time and links."""

    number: int
    item: dict[str, Any]
    stored_at: str | None = None
    retracts: str | None = None
    supersedes: str | None = None
    superseded_by: str | None = None

    @property
    def memory_id(self) -> str:
        return str(self.item["memory_id"])


def _fail(number: int, message: str) -> RemoteMemoryValidationError:
    return RemoteMemoryValidationError(f"line {number}: {message}")


def _line(data: Any, number: int, user_scope: str, project: str | None) -> _Line:
    if not isinstance(data, dict):
        raise _fail(number, "not a JSON object")
    name = shown_name(str(data.get("memory_id")))
    if "user_scope" in data and data["user_scope"] != user_scope:
        raise _fail(number, f"memory {name} belongs to another user scope")
    if (theirs := data.get("project", project)) != project:
        held = "no project" if theirs is None else f"project {shown_name(str(theirs))}"
        ours = "no project" if project is None else f"project {shown_name(project)}"
        raise _fail(number, f"project: memory {name} is of {held}; the store is opened in {ours}")
    data = {k: v for k, v in data.items() if k != "project"}  # the store's own, checked
    if "stored_at" in data:
        return _exported(data, number)
    if "retracts" in data or data.get("kind") == MemoryKind.RETRACTION.value:
        raise _fail(
            number,
            "retractions are not imported; use `memlib retract` "
            "(or import the whole record as `memlib export` writes it, with stored_at)",
        )
    item = {k: v for k, v in data.items() if k != "user_scope"}
    return _Line(number, _complete(item, number))


def _complete(item: dict[str, Any], number: int) -> dict[str, Any]:
    item.setdefault("kind", MemoryKind.CONVERSATION.value)
    unknown = sorted(set(item).difference(_ITEM_KEYS))
    if unknown:
        raise _fail(number, f"unknown record fields: {', '.join(map(shown_name, unknown))}")
    missing = [k for k in _ITEM_KEYS if k not in item]
    if missing:
        raise _fail(number, f"record is missing {', '.join(missing)}")
    return item


def _exported(data: dict[str, Any], number: int) -> _Line:
    """A record as ``memlib export`` writes it (``StoredMemory.to_dict``)."""
    item = {k: v for k, v in data.items() if k not in ("user_scope", "stored_at", *_LINK_KEYS)}
    item = _complete(item, number)
    links: dict[str, str | None] = {}
    for name in ("stored_at", *_LINK_KEYS):
        value = data.get(name)
        if value is not None and not isinstance(value, str):
            raise _fail(number, f"{name} must be a string")
        links[name] = value
    stored_at = links.pop("stored_at")
    try:
        stored_at = format_timestamp(parse_timestamp(stored_at))
    except RemoteMemoryCorruptionError as exc:
        raise _fail(number, f"stored_at: {exc}") from None
    return _Line(number, item, stored_at, **links)


def _read_lines(path: _Path, user_scope: str, project: str | None, others: bool) -> Iterator[_Line]:
    """The lines of ``path``; another project's are refused, or skipped with ``others``."""
    for number, data in _json_lines(path):
        if others and isinstance(data, dict) and data.get("project") != project:
            continue
        yield _line(data, number, user_scope, project)


def _json_lines(path: _Path) -> Iterator[tuple[int, Any]]:
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed by the with below)
    except OSError as exc:
        raise RemoteMemoryError(f"cannot read {path}: {exc.strerror}") from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            if raw.strip():
                yield number, loads_input_line(raw, f"line {number}")


def _projects_in(path: _Path) -> list[str | None]:
    """The projects the lines of ``path`` name (None: none), in the order they come."""
    found: dict[str | None, None] = {}
    for number, data in _json_lines(path):
        theirs = data.get("project") if isinstance(data, dict) else None
        try:
            found.setdefault(None if theirs is None else project_name(theirs))
        except RemoteMemoryValidationError as exc:
            raise _fail(number, f"project: {exc}") from None
    return list(found)


def _record(line: _Line, user_scope: str) -> StoredMemory:
    """The record the line becomes, validated exactly as its write would (thrown away)."""
    item, number = line.item, line.number
    try:
        if line.stored_at is None or line.item["kind"] != MemoryKind.RETRACTION.value:
            record = record_from_item(item, user_scope, line.stored_at or _CHECK_AT)
            if line.retracts is not None or line.superseded_by is not None:
                name = "retracts" if line.retracts is not None else "superseded_by"
                raise RemoteMemoryValidationError(
                    f"{name}: only a retraction record may name {name!r}"
                )
            return record
        return StoredMemory(
            memory_id=item["memory_id"],
            user_scope=user_scope,
            kind=MemoryKind.RETRACTION,
            content=item["content"],
            summary=item["summary"],
            source=MemorySource.from_dict(item["source"]),
            stored_at=line.stored_at,
            retracts=line.retracts,
            supersedes=line.supersedes,
            superseded_by=line.superseded_by,
        )
    except RemoteMemoryError as exc:
        raise type(exc)(f"line {number}: {exc}") from None


def existing_ids(store: MemoryStore, memory_ids: Sequence[str]) -> set[str]:
    if isinstance(store, IdLookup):
        return set(store.existing_ids(memory_ids))
    wanted = set(memory_ids)
    return {r.memory_id for r in store.read_all() if r.memory_id in wanted}


@dataclass
class _Checker:
    """Pass 1: every line valid, every id new, every retraction and supersede one the
    store will accept in this order. Only ids and kinds are kept in memory."""

    user_scope: str
    kinds: dict[str, MemoryKind] = field(default_factory=dict)
    repeated: list[str] = field(default_factory=list)
    retracted: set[str] = field(default_factory=set)
    # Retraction targets not in the file before their retraction: (line, successor's kind).
    outside: dict[str, tuple[int, MemoryKind | None]] = field(default_factory=dict)
    pending: _Line | None = None  # a record that supersedes, before its retraction

    def add(self, line: _Line) -> None:
        record = _record(line, self.user_scope)
        if self.pending is not None and line.superseded_by != self.pending.memory_id:
            raise self._unpaired(self.pending)
        if record.kind is MemoryKind.RETRACTION:
            self._retraction(line, record)
        elif line.supersedes is not None:
            self.pending = line
        if record.memory_id in self.kinds:
            if record.memory_id not in self.repeated:
                self.repeated.append(record.memory_id)
        else:
            self.kinds[record.memory_id] = record.kind

    @staticmethod
    def _unpaired(line: _Line) -> RemoteMemoryValidationError:
        return _fail(
            line.number,
            f"supersedes: the retraction of {line.supersedes} naming {line.memory_id} in "
            "superseded_by must come on the next line, as `memlib export` writes it",
        )

    def _retraction(self, line: _Line, record: StoredMemory) -> None:
        target = str(record.retracts)
        successor = self.pending
        self.pending = None
        if record.superseded_by is None:
            wanted = f"Retracts {target}"
        elif successor is None or successor.supersedes != target:
            raise _fail(
                line.number,
                f"superseded_by: {record.superseded_by} must come on the line before, "
                f"naming {target} in supersedes",
            )
        else:
            wanted = f"Superseded {target} by {successor.memory_id}"
            if successor.stored_at != line.stored_at:
                raise _fail(line.number, "stored_at: differs from its successor's line before")
        if record.summary != wanted:
            raise _fail(
                line.number,
                f"summary: a retraction's summary is {wanted!r}, as the store writes it; "
                "another cannot be imported as it was",
            )
        kind = self.kinds.get(target)
        new_kind = None if successor is None else MemoryKind(successor.item["kind"])
        if target in self.retracted:
            raise _fail(line.number, f"retracts: memory {target} is already retracted")
        self.retracted.add(target)
        if kind is None:
            self.outside[target] = (line.number, new_kind)
            return
        _check_target(line.number, target, kind, new_kind)

    def finish(self, store: MemoryStore) -> list[str]:
        """Checks that need the whole file and the store; the ids, in file order."""
        if self.pending is not None:
            raise self._unpaired(self.pending)
        if self.repeated:
            raise RemoteMemoryDuplicateError(self.repeated)
        ids = list(self.kinds)
        stored = existing_ids(store, ids)
        if stored:
            raise RemoteMemoryDuplicateError([i for i in ids if i in stored])
        later = next((t for t in self.outside if t in self.kinds), None)
        if later is not None:
            raise _fail(self.outside[later][0], f"retracts: memory {later} comes later in the file")
        if self.outside:
            found = {r.memory_id: r.kind for r in records_by_id_of(store, list(self.outside))}
            for target, (number, new_kind) in self.outside.items():
                kind = found.get(target)
                if kind is None:
                    raise _fail(number, f"retracts: cannot retract unknown memory_id: {target}")
                _check_target(number, target, kind, new_kind)
                if store.retraction_of(target) is not None:
                    raise _fail(number, f"retracts: memory {target} is already retracted")
        return ids


def _check_target(number: int, target: str, kind: MemoryKind, new: MemoryKind | None) -> None:
    if kind is MemoryKind.RETRACTION:
        raise _fail(number, f"retracts: cannot retract a retraction: {target}")
    if new is not None and new is not kind:
        raise _fail(
            number,
            f"retracts: cannot supersede {kind.value} record {target} with a {new.value} record",
        )


def _bar(total: int | None, desc: str, enabled: bool) -> Any:
    return progress_bar(total, desc, enabled=enabled, unit="rec", unit_scale=True, mininterval=0.5)


def error_line(exc: BaseException) -> str:
    """The one line an error prints: long id lists cut, no line breaks."""
    if isinstance(exc, RemoteMemoryDuplicateError) and len(exc.memory_ids) > SHOWN_IDS:
        ids = exc.memory_ids
        message = (
            f"duplicate memory_id: {', '.join(ids[:SHOWN_IDS])} … and "
            f"{len(ids) - SHOWN_IDS:,} more ({len(ids):,} in all)"
        )
    else:
        message = str(exc)
    if "\n" in message or "\r" in message:
        message = " ".join(message.split())
    return message


def _writes(lines: Iterable[_Line], batch_size: int) -> Iterator[list[_Line]]:
    """The file cut into writes: a retraction alone, a supersede's pair, else runs of
    records of one ``stored_at`` (one run: one ``append_many``) of ``batch_size`` at most."""
    run: list[_Line] = []
    for line in lines:
        if line.retracts is not None and line.superseded_by is not None:
            yield [*run, line]  # run is the one record that supersedes
            run = []
        elif line.retracts is not None or line.supersedes is not None:
            if run:
                yield run
            run = [line]
            if line.retracts is not None:
                yield run
                run = []
        else:
            if run and (len(run) >= batch_size or run[0].stored_at != line.stored_at):
                yield run
                run = []
            run.append(line)
    if run:
        yield run


def _write(store: MemoryStore, lines: list[_Line], clock: ReplayClock | None) -> None:
    first, last = lines[0], lines[-1]
    if clock is not None:
        clock.moment = None if first.stored_at is None else parse_timestamp(first.stored_at)
    if last.retracts is None:
        store.append_many([line.item for line in lines])
        return
    stored = dict(
        reason=last.item["content"], source=last.item["source"], retraction_id=last.memory_id
    )
    if len(lines) == 1:
        store.retract(last.retracts, **stored)
    else:
        store.supersede(last.retracts, first.item, **stored)


def import_jsonl(
    store: MemoryStore,
    path: str | os.PathLike[str],
    *,
    batch_size: int = DEFAULT_BATCH,
    progress: bool = False,
    clock: ReplayClock | None = None,
    all_projects: bool = False,
) -> ImportReport:
    """Check every line of ``path``, then append them all in batches of ``batch_size``.
    ``clock``: the ``ReplayClock`` ``store`` was opened with, so exported records keep
    their ``stored_at`` (without it they are stored at the store's own time).
    [beyond] A store opened for a project (docs/contract.md, "Projects") takes its own
    records only; ``all_projects``: each record goes to its project of ``store``'s user,
    every project checked before the first write."""
    if batch_size < 1:
        raise RemoteMemoryValidationError("batch size must be at least 1")
    own: str | None = getattr(store, "project", None)
    stores: dict[str | None, MemoryStore] = {own: store}
    if all_projects:
        if not isinstance(store, BaseMemoryStore):
            raise RemoteMemoryValidationError(f"{type(store).__name__} has no projects")
        stores = {p: store if p == own else store.in_project(p) for p in _projects_in(path)}
    try:
        counts = {p: _check(part, path, p, all_projects, progress) for p, part in stores.items()}
        reports = []
        for p, part in stores.items():
            lines = _read_lines(path, store.user_scope, p, all_projects)
            reports.append(_write_all(part, lines, counts[p], batch_size, progress, clock))
    finally:
        for part in stores.values():
            if part is not store:
                part.close()
    return ImportReport(sum(r.records for r in reports), sum(r.batches for r in reports))


def _check(store: MemoryStore, path: _Path, project: str | None, others: bool, bar: bool) -> int:
    """Pass 1 over the lines of ``project``: how many records it will write."""
    checker = _Checker(store.user_scope)
    with _bar(None, "checking", bar) as shown:
        for line in _read_lines(path, store.user_scope, project, others):
            checker.add(line)
            shown.update()
    return len(checker.finish(store))


def _write_all(
    store: MemoryStore,
    lines: Iterable[_Line],
    total: int,
    batch_size: int,
    progress: bool,
    clock: ReplayClock | None,
) -> ImportReport:
    """Pass 2: the writes, in file order; a failure says what landed before it."""
    written = batches = 0
    next_id: str | None = None
    with _bar(total, "importing", progress) as bar:
        try:
            for batch in _writes(lines, batch_size):
                next_id = batch[0].memory_id
                _write(store, batch, clock)
                written += len(batch)
                batches += 1
                bar.update(len(batch))
        except (RemoteMemoryError, OSError) as exc:
            if written == 0 and isinstance(exc, RemoteMemoryError):
                raise  # nothing landed: the store's own error says it all
            cause = error_line(exc) if isinstance(exc, RemoteMemoryError) else _os_error(exc)
            raise RemoteMemoryError(
                f"{cause} — {written} records in {batches} batches were imported before "
                f"the failure; the first record not imported is {next_id}"
            ) from None
        finally:
            if clock is not None:
                clock.moment = None
    refresh = getattr(store, "refresh_statistics", None)
    if written and refresh is not None:  # PostgreSQL: plan the next recall on what is there
        refresh()
    return ImportReport(records=written, batches=batches)


def import_items(
    store: MemoryStore,
    items: Sequence[tuple[str, dict[str, Any]]],
    *,
    batch_size: int = DEFAULT_BATCH,
    progress: bool = False,
) -> ImportReport:
    """Append ``(where, item)`` pairs an importer made (``where`` names the input and its
    place), each checked first; an id the store holds already, or the input repeats, is
    the same message imported before: skipped, and counted in ``skipped``."""
    if batch_size < 1:
        raise RemoteMemoryValidationError("batch size must be at least 1")
    scope = store.user_scope
    fresh: dict[str, dict[str, Any]] = {}
    for where, item in items:
        try:
            record = record_from_item(item, scope, _CHECK_AT)
        except RemoteMemoryError as exc:
            raise type(exc)(f"{where}: {exc}") from None
        fresh.setdefault(record.memory_id, item)
    stored = existing_ids(store, list(fresh))
    new = [item for memory_id, item in fresh.items() if memory_id not in stored]
    lines = (_Line(number, item) for number, item in enumerate(new, start=1))
    report = _write_all(store, lines, len(new), batch_size, progress, None)
    return ImportReport(report.records, report.batches, skipped=len(items) - len(new))


def export_lines(store: MemoryStore) -> Iterator[str]:
    """Every record of the scope in append order, as the line ``import_jsonl`` reads back
    to the same record (the JSONL store's own line, without its newline)."""
    for record in store.read_all():
        yield record_json(record)


def _os_error(exc: OSError) -> str:
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc}"
