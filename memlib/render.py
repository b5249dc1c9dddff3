"""Stage 5 — render: the selected hits as a prompt block (docs/reference.md#render).

Everything from a store is escaped, so a record can never close the wrapper or open a
tag; invisible characters become references (``&#x202E;``) the model sees and an XML
parser reads back (``_visible``; docs/contract.md, "What the model reads")."""

from __future__ import annotations

import re
from collections.abc import Mapping

from ._visible import visible
from .records import StoredMemory
from .result import RecallResult

_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&apos;"})
# Characters XML 1.0 does not allow even as references; a prompt block that a parser
# rejects is no block at all, so they become U+FFFD.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def escape_xml(value: object) -> str:
    return _NOT_XML.sub("\ufffd", str(value)).translate(_ESCAPES)


# A parser turns a literal tab, newline or CR inside an attribute into a space; as
# character references they come back as written (only query_id can hold them).
_ATTR_WHITESPACE = str.maketrans({"\t": "&#9;", "\n": "&#10;", "\r": "&#13;"})


_SCORE_FIELDS = (
    "total",
    "lexical_coverage",
    "recency",
    "lexical_contribution",
    "recency_contribution",
)


def _attrs(pairs: Mapping[str, object]) -> str:
    return " ".join(
        f'{name}="{escape_xml(value).translate(_ATTR_WHITESPACE)}"' for name, value in pairs.items()
    )


def render_recall_context(result: RecallResult) -> str:
    """The ``<recalled_context>`` block, or ``""`` when there is nothing to inject."""
    if not result.hits:
        return ""
    query = result.query
    head = {
        "query_id": query.query_id,
        "query": query.text,
        "normalized_query": query.normalized_text,
        "user_scope": query.user_scope,
        "searched_records": result.searched_records,
        "candidate_records": result.candidate_records,
    }
    lines = [f"<recalled_context {_attrs(head)}>"]
    for hit in result.hits:
        b = hit.score_breakdown
        head = {"rank": hit.rank, "memory_id": hit.memory_id} | hit.scope.to_dict()
        score = {k: f"{getattr(b, k):.6f}" for k in _SCORE_FIELDS}
        lines += [
            f"  <hit {_attrs(head)}>",
            f"    <score {_attrs(score | {'matched_terms': ','.join(b.matched_terms)})}/>",
            f"    <provenance {_attrs(hit.provenance.to_dict())}/>",
            f"    <snippet>{escape_xml(hit.snippet)}</snippet>",
            "  </hit>",
        ]
    lines.append("</recalled_context>")
    # Once over the block: the markup is ASCII, so a joiner at a value's edge sees an
    # ASCII neighbour (a quote, ``>``) as it would see none, and is escaped.
    return visible("\n".join(lines), "xml")


def render_remote_profile(record: StoredMemory | None) -> str:
    """The session-start profile block, or ``""`` when the scope has no profile."""
    if record is None:
        return ""
    head = _attrs(
        {
            "memory_id": record.memory_id,
            "source_id": record.source.source_id,
            "captured_at": record.source.captured_at,
        }
    )
    block = f"<remote_profile {head}>\n{escape_xml(record.content)}\n</remote_profile>"
    return visible(block, "xml")
