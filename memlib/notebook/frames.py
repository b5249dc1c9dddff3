"""Frames: library values (records, candidates, a score, results, files) as pandas tables,
one thing a row; none runs a recall of its own.
"""

from __future__ import annotations

import json
import os
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..candidates import RecallCandidate
from ..errors import RemoteMemoryError
from ..normalize import normalize_recall_query, normalize_text
from ..records import MemoryKind, StoredMemory, format_timestamp
from ..result import RecallResult
from ..sample import SAMPLE_AS_OF, SAMPLE_USER_ID
from ..score import RecallScoreBreakdown
from ..stores._base import MemoryStore
from ..stores.jsonl._store import RemoteMemoryStore
from ._common import ANY_SCOPE, QUERY_ID, pandas
from .language import tr

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


# What a record table can show, each read from one record.
_RECORD_FIELDS: Mapping[str, Callable[[StoredMemory], Any]] = {
    "memory_id": lambda r: r.memory_id,
    "kind": lambda r: r.kind.value,
    "captured_at": lambda r: r.source.captured_at,
    "stored_at": lambda r: r.stored_at,
    "source_id": lambda r: r.source.source_id,
    "title": lambda r: r.source.title,
    "retracts": lambda r: r.retracts or "",
    "supersedes": lambda r: r.supersedes or "",
    "superseded_by": lambda r: r.superseded_by or "",
    "summary": lambda r: r.summary,
}
_RECORD_COLUMNS = ("memory_id", "kind", "captured_at", "stored_at", "source_id", "title", "summary")


def records_frame(
    records: Iterable[StoredMemory], columns: Sequence[str] = _RECORD_COLUMNS
) -> pd.DataFrame:
    """Stored records, one a row, with the ``columns`` chosen from ``_RECORD_FIELDS``."""
    rows = [{c: _RECORD_FIELDS[c](r) for c in columns} for r in records]
    return pandas().DataFrame(rows, columns=list(columns))


def insertion_order_frame(stores: Mapping[str, MemoryStore], n: int | None = None) -> pd.DataFrame:
    """Conversation ids in the order each store holds them (position 1 = first line)."""
    columns = {
        label: [r.memory_id for r in store.read_all() if r.kind is MemoryKind.CONVERSATION][:n]
        for label, store in stores.items()
    }
    frame = pandas().DataFrame(columns)
    frame.index = pandas().RangeIndex(1, len(frame) + 1, name="position")
    return frame


def normalize_frame(texts: Sequence[str]) -> pd.DataFrame:
    """Readable text, normalized text and terms side by side; errors shown, not raised."""
    rows = []
    for text in texts:
        try:
            q = normalize_recall_query(
                text, user_scope=ANY_SCOPE, query_id=QUERY_ID, issued_at=SAMPLE_AS_OF
            )
            rows.append((text, q.text, q.normalized_text, ", ".join(q.terms), ""))
        except RemoteMemoryError as exc:
            rows.append((text, "", normalize_text(text), "", str(exc)))
    return pandas().DataFrame(rows, columns=["raw", "text", "normalized_text", "terms", "error"])


def candidates_frame(candidates: Iterable[RecallCandidate]) -> pd.DataFrame:
    """What each ``RecallCandidate`` carries, one a row (no score, no rank: not yet)."""
    rows = [
        {
            "query_id": c.query_id,
            "memory_id": c.record.memory_id,
            "searchable_terms": len(c.searchable_terms),
            "matched_terms": ", ".join(c.matched_terms),
            "captured_at": format_timestamp(c.captured_at),
        }
        for c in candidates
    ]
    return pandas().DataFrame(
        rows, columns=["query_id", "memory_id", "searchable_terms", "matched_terms", "captured_at"]
    )


def breakdown_frame(breakdown: RecallScoreBreakdown) -> pd.DataFrame:
    """A ``RecallScoreBreakdown`` one field a row, weights and contributions flattened."""
    flat = flatten(breakdown.to_dict())
    return pandas().DataFrame({"field": list(flat), "value": [str(v) for v in flat.values()]})


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested dicts as dotted keys; lists become comma-separated text."""
    flat: dict[str, Any] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(flatten(value, name + "."))
        elif isinstance(value, list):
            flat[name] = ", ".join(str(v) for v in value)
        else:
            flat[name] = value
    return flat


def hit_fields_frame(result: RecallResult) -> pd.DataFrame:
    """Every field of every hit's JSON, one field a row, one hit a column."""
    frame = pandas().DataFrame({f"rank {h.rank}": flatten(h.to_dict()) for h in result.hits})
    frame.index.name = "field"
    return frame.astype(str)


# What a hit table can show, each read from one hit.
_HIT_FIELDS: Mapping[str, Any] = {
    "rank": lambda h: h.rank,
    "memory_id": lambda h: h.memory_id,
    "query_id": lambda h: h.query_id,
    "user_scope": lambda h: h.scope.user_scope,
    "source_id": lambda h: h.provenance.source_id,
    "captured_at": lambda h: h.provenance.captured_at,
    "matched_terms": lambda h: ", ".join(h.score_breakdown.matched_terms),
    "coverage": lambda h: h.score_breakdown.lexical_coverage,
    "recency": lambda h: h.score_breakdown.recency,
    "lexical_contribution": lambda h: h.score_breakdown.lexical_contribution,
    "recency_contribution": lambda h: h.score_breakdown.recency_contribution,
    "total": lambda h: h.score_breakdown.total,
}
_HIT_COLUMNS = ("rank", "memory_id", "total", "coverage", "recency", "matched_terms", "captured_at")


def hits_frame(result: RecallResult, columns: Sequence[str] = _HIT_COLUMNS) -> pd.DataFrame:
    """The hits of a result, one a row, with the chosen ``columns`` (see ``_HIT_FIELDS``)."""
    unknown = [c for c in columns if c not in _HIT_FIELDS]
    if unknown:
        raise ValueError(f"no hit column {unknown[0]!r}; choose from {', '.join(_HIT_FIELDS)}")
    rows = [{c: _HIT_FIELDS[c](h) for c in columns} for h in result.hits]
    return pandas().DataFrame(rows, columns=list(columns))


def payload_outline(payload: str) -> pd.DataFrame:
    """The top level of a ``to_json()`` payload: each key, its JSON type and a preview."""
    data = json.loads(payload)
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    rows = []
    for key, value in data.items():
        if isinstance(value, dict):
            preview = "{" + ", ".join(value) + "}"
        elif isinstance(value, list):
            preview = tr(f"{len(value)} item(s)", f"{len(value)} 项")
        else:
            preview = json.dumps(value, ensure_ascii=False)
        rows.append({"key": key, "json_type": names.get(type(value), "number"), "value": preview})
    return pandas().DataFrame(rows)


def result_counts_frame(results: Mapping[str, RecallResult]) -> pd.DataFrame:
    """What each result says about itself: hit and record counts, empty_reason."""
    rows = [
        {
            "case": label,
            "query": r.query.text,
            "limit": r.query.limit,
            "hits": len(r.hits),
            "searched_records": r.searched_records,
            "candidate_records": r.candidate_records,
            "retracted_records": r.retracted_records,
            "empty_reason": r.empty_reason or "null",
        }
        for label, r in results.items()
    ]
    return pandas().DataFrame(rows)


def xml_elements_frame(text: str) -> pd.DataFrame:
    """Parse a rendered block with ElementTree; one row per element, in document order."""
    root = ET.fromstring(text)
    rows = []

    def walk(element: ET.Element, depth: int, path: str) -> None:
        here = f"{path}/{element.tag}" if path else element.tag
        body = (element.text or "").strip()
        rows.append({"depth": depth, "path": here, "attributes": len(element.attrib), "text": body})
        for child in element:
            walk(child, depth + 1, here)

    walk(root, 0, "")
    return pandas().DataFrame(rows)


def file_lines_frame(path: str | os.PathLike[str]) -> pd.DataFrame:
    """The raw lines of a JSONL file: complete or torn, bytes, and the id if it parses."""
    parts = Path(path).read_bytes().split(b"\n")
    rows = []
    for number, raw in enumerate(parts, start=1):
        last = number == len(parts)
        if last and not raw:
            break  # the file ends with "\n": nothing after it
        try:
            memory_id = json.loads(raw)["memory_id"]
        except (ValueError, KeyError, TypeError):
            memory_id = tr("(not a JSON record)", "（不是 JSON 记录）")
        rows.append((number, not last, len(raw), memory_id))
    return pandas().DataFrame(rows, columns=["line", "ends_with_newline", "bytes", "memory_id"])


def file_state(path: str | os.PathLike[str], *, user_id: str = SAMPLE_USER_ID) -> dict[str, int]:
    """Complete lines on disk, bytes of an unfinished last line, and what a reader sees."""
    data = Path(path).read_bytes()
    return {
        "complete_lines": data.count(b"\n"),
        "unfinished_tail_bytes": len(data) - (data.rfind(b"\n") + 1),
        "records_a_reader_sees": len(RemoteMemoryStore(path, user_id=user_id).read_all()),
    }
