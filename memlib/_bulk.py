"""Many records at once from a JSONL file, checked first, written in batches.

Each line holds ``store.append``'s keywords (``kind`` defaults to ``conversation``) or an
exported record of the target's scope. Every line is checked before the first write, so
bad input writes nothing; each batch is all or nothing, and a failure says how many
records were imported before it."""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any

from ._progress import progress_bar
from ._safejson import loads_input_line
from ._visible import shown_name
from .errors import RemoteMemoryDuplicateError, RemoteMemoryError, RemoteMemoryValidationError
from .records import MemoryKind, record_from_item
from .stores._base import IdLookup, MemoryStore

DEFAULT_BATCH = 5_000
# Ids named in an error line; a re-import of 10,000 records must not print them all.
SHOWN_IDS = 5
_ITEM_KEYS = ("kind", "memory_id", "content", "summary", "source")
_EXPORT_KEYS = ("user_scope", "stored_at")
_CHECK_AT = "2000-01-01T00:00:00Z"


@dataclass(frozen=True)
class ImportReport:
    records: int
    batches: int


def _item(data: Any, number: int, user_scope: str) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise RemoteMemoryValidationError(f"line {number}: not a JSON object")
    if "user_scope" in data and data["user_scope"] != user_scope:
        raise RemoteMemoryValidationError(
            f"line {number}: memory {shown_name(str(data.get('memory_id')))} belongs to "
            "another user scope"
        )
    if "retracts" in data or data.get("kind") == MemoryKind.RETRACTION.value:
        raise RemoteMemoryValidationError(
            f"line {number}: retractions are not imported; use `memlib retract`"
        )
    item = {k: v for k, v in data.items() if k not in _EXPORT_KEYS}
    item.setdefault("kind", MemoryKind.CONVERSATION.value)
    unknown = sorted(set(item) - set(_ITEM_KEYS))
    if unknown:
        raise RemoteMemoryValidationError(
            f"line {number}: unknown record fields: {', '.join(map(shown_name, unknown))}"
        )
    missing = [k for k in _ITEM_KEYS if k not in item]
    if missing:
        raise RemoteMemoryValidationError(f"line {number}: record is missing {', '.join(missing)}")
    return item


def read_import_items(
    path: str | os.PathLike[str], user_scope: str
) -> Iterator[tuple[int, dict[str, Any]]]:
    """``(line number, append item)`` for each non-blank line; JSON errors name the line."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 (closed by the with below)
    except OSError as exc:
        raise RemoteMemoryError(f"cannot read {path}: {exc.strerror}") from None
    with handle:
        for number, raw in enumerate(handle, start=1):
            if not raw.strip():
                continue
            yield number, _item(loads_input_line(raw, f"line {number}"), number, user_scope)


def _check(number: int, item: dict[str, Any], user_scope: str) -> str:
    """Validate one item exactly as an append would (the record is thrown away)."""
    try:
        record = record_from_item(item, user_scope, _CHECK_AT)
    except RemoteMemoryError as exc:
        raise type(exc)(f"line {number}: {exc}") from None
    return record.memory_id


def existing_ids(store: MemoryStore, memory_ids: Sequence[str]) -> set[str]:
    if isinstance(store, IdLookup):
        return set(store.existing_ids(memory_ids))
    wanted = set(memory_ids)
    return {r.memory_id for r in store.read_all() if r.memory_id in wanted}


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


def import_jsonl(
    store: MemoryStore,
    path: str | os.PathLike[str],
    *,
    batch_size: int = DEFAULT_BATCH,
    progress: bool = False,
) -> ImportReport:
    """Check every line of ``path``, then append them all in batches of ``batch_size``."""
    if batch_size < 1:
        raise RemoteMemoryValidationError("batch size must be at least 1")
    scope = store.user_scope
    # Pass 1: every line valid, every id new. Only the ids are kept in memory.
    seen: dict[str, int] = {}
    repeated: list[str] = []
    with _bar(None, "checking", progress) as bar:
        for number, item in read_import_items(path, scope):
            memory_id = _check(number, item, scope)
            if memory_id in seen:
                if memory_id not in repeated:
                    repeated.append(memory_id)
            else:
                seen[memory_id] = number
            bar.update()
    if repeated:
        raise RemoteMemoryDuplicateError(repeated)
    ids = list(seen)
    stored = existing_ids(store, ids)
    if stored:
        raise RemoteMemoryDuplicateError([i for i in ids if i in stored])
    # Pass 2: the writes, one append_many per batch.
    written = batches = 0
    next_id = ids[0] if ids else None
    with _bar(len(ids), "importing", progress) as bar:
        try:
            rest = (item for _, item in read_import_items(path, scope))
            while batch := list(islice(rest, batch_size)):
                next_id = batch[0]["memory_id"]
                store.append_many(batch)
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
    refresh = getattr(store, "refresh_statistics", None)
    if written and refresh is not None:  # PostgreSQL: plan the next recall on what is there
        refresh()
    return ImportReport(records=written, batches=batches)


def _os_error(exc: OSError) -> str:
    where = f"{exc.filename}: " if exc.filename else ""
    return f"{where}{exc.strerror or exc}"
