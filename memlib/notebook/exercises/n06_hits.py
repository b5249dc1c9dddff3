"""Exercises of ``06_hits_and_tool_result.ipynb``."""

from __future__ import annotations

import functools
import json
import tempfile
from collections.abc import Mapping
from typing import Any

from ...sample import SAMPLE_AS_OF, SAMPLE_QUERY, open_sample_store
from ..language import tr
from ..views import recall
from . import Verdict, exercise, right, wrong
from ._common import as_function, sample_store, shape_error

FIELD_QUERY_ID = "nb-06-fields"
QUESTIONS = ("whose", "when", "recency added", "which recall")
LABELS = ("hits", "no match", "empty corpus")
_MISSING = object()


def _hit() -> tuple[dict[str, Any], dict[str, Any]]:
    """The top hit of the notebook's query, as JSON has it, and what each question asks for."""
    result = recall(sample_store(), SAMPLE_QUERY, SAMPLE_AS_OF, 1, query_id=FIELD_QUERY_ID)
    hit = result.hits[0]
    wanted = {
        "whose": sample_store().user_scope,
        "when": hit.provenance.captured_at,
        "recency added": hit.score_breakdown.recency_contribution,
        "which recall": result.query.query_id,
    }
    return result.to_dict()["hits"][0], wanted


def _resolve(data: Mapping[str, Any], path: str) -> Any:
    node: Any = data
    for part in path.split("."):
        if not isinstance(node, Mapping) or part not in node:
            return _MISSING
        node = node[part]
    return node


def _field(question: str, path: str, hit: Mapping[str, Any], wanted: Any) -> str | None:
    """Why ``path`` does not answer ``question`` (None when it does)."""
    if path.startswith("query."):
        return tr(
            "{path} is in the payload's query object, not in the hit: each hit carries "
            "its own fields",
            path=path,
        )
    value = _resolve(hit, path)
    if value is _MISSING:
        if "stored_at" in path:
            return tr(
                "a hit carries no stored_at: when the event happened is its captured_at, "
                "in the provenance"
            )
        return tr(
            "{path!r} is not a field of a hit: use the dotted names of the field table "
            "above (e.g. provenance.title)",
            path=path,
        )
    if value == wanted and path.startswith("source."):
        return tr(
            "source.* is the compatibility copy kept for older callers: the field to read "
            "is in provenance"
        )
    if value == wanted:
        return None
    if path == "score_breakdown.recency":
        return tr(
            "that is recency itself, a factor between 0 and 1 before its weight: what it "
            "added to the total is its contribution"
        )
    if path == "score_breakdown.weights.recency":
        return tr("that is recency's weight (0.15), the same for every hit: what did it add here?")
    return tr(
        "{path} holds {value!r}: that does not answer “{question}”",
        path=path,
        value=value,
        question=question,
    )


# 06.1's answer, of which each wrong answer below changes one field.
_FIELDS = {
    "whose": "scope.user_scope",
    "when": "provenance.captured_at",
    "recency added": "score_breakdown.contributions.recency",
    "which recall": "query_id",
}


@exercise(
    "06.1",
    "which field of a hit answers which question",
    hints=(
        "The field table above lists every field of a hit by its dotted name, in groups: "
        "query_id, scope.*, provenance.*, source.*, score_breakdown.*.",
        "source.* and score are compatibility copies; answer with the fields they copy.",
        "recency is a number between 0 and 1; what it added to the total is weighted.",
    ),
    solution=(
        "# Exercise 06.1 — solution\nanswer = {\n"
        '    "whose": "scope.user_scope",\n'
        '    "when": "provenance.captured_at",\n'
        '    "recency added": "score_breakdown.contributions.recency",\n'
        '    "which recall": "query_id",\n'
        "}"
    ),
    wrong_answers=(
        ({**_FIELDS, "when": "source.captured_at"}, "compatibility copy"),
        ({**_FIELDS, "recency added": "score_breakdown.recency"}, "before its weight"),
        ({**_FIELDS, "whose": "query.user_scope"}, "not in the hit"),
        ({**_FIELDS, "which recall": "memory_id"}, "does not answer"),
        ({"whose": "scope.user_scope", "when": "stored_at"}, "needs the keys"),
        ("provenance.captured_at", "should be a dict"),
    ),
)
def _which_field(answer: Any) -> Verdict:
    if not isinstance(answer, Mapping):
        raise shape_error("the answer should be a dict from each question to a dotted field name")
    missing = [q for q in QUESTIONS if q not in answer]
    if missing:
        return wrong(
            "the answer needs the keys {keys}; missing: {missing}",
            keys=", ".join(map(repr, QUESTIONS)),
            missing=", ".join(map(repr, missing)),
        )
    hit, wanted = _hit()
    for question in QUESTIONS:
        path = answer[question]
        if not isinstance(path, str):
            return wrong(
                "“{question}”: give the field's dotted name as a string", question=question
            )
        for prefix in ("hits[0].", "hits.0.", "hit."):
            path = path.removeprefix(prefix)
        problem = _field(question, path.strip(), hit, wanted[question])
        if problem is not None:
            return wrong("“{question}”: {problem}", question=question, problem=problem)
    return right(
        "scope says whose, provenance when and from where, the breakdown why, and "
        "query_id which recall the hit belongs to"
    )


@functools.cache
def _payloads() -> dict[str, str]:
    """One tool result of each kind, from the library: hits, no shared term, an empty corpus."""
    with tempfile.TemporaryDirectory(prefix="memlib-grader-") as root:
        empty = recall(open_sample_store(root, load=False), SAMPLE_QUERY, SAMPLE_AS_OF, 5)
    queries = {
        "“layered memory”": SAMPLE_QUERY,
        "“kubernetes autoscaling”": "kubernetes autoscaling",
        "“backend engineer” (profile words)": "backend engineer",
    }
    results = {name: recall(sample_store(), q, SAMPLE_AS_OF, 5) for name, q in queries.items()}
    return {name: result.to_json() for name, result in {**results, "empty-store": empty}.items()}


def _expected(payload: str) -> str:
    data = json.loads(payload)
    if data["hits"]:
        return "hits"
    return "empty corpus" if data["searched_records"] == 0 else "no match"


@exercise(
    "06.2",
    "tell hits, a query that matched nothing and an empty corpus apart",
    hints=(
        "The function gets the JSON text: json.loads(payload) gives the dict of the outline "
        "above (query, hits, searched_records, candidate_records, retracted_records, "
        "empty_reason).",
        "With no hits, empty_reason is “no_matching_terms” in both empty cases, and "
        "candidate_records is 0 in both: which count differs?",
        "searched_records = 0: there was nothing to search.",
    ),
    solution=(
        "# Exercise 06.2 — solution\n"
        "def kind_of_result(payload):\n"
        "    data = json.loads(payload)\n"
        '    if data["hits"]:\n'
        '        return "hits"\n'
        '    return "empty corpus" if data["searched_records"] == 0 else "no match"\n'
        "\n\n"
        "answer = kind_of_result"
    ),
    wrong_answers=(
        (lambda p: "hits" if json.loads(p)["hits"] else "no match", "searched_records tells"),
        (
            lambda p: "empty corpus" if json.loads(p)["candidate_records"] == 0 else "hits",
            "there was a corpus",
        ),
        (lambda p: json.loads(p)["empty_reason"], "return one of"),
        (lambda p: p["hits"], "json.loads"),
        ("no match", "should be a function"),
    ),
)
def _classify(answer: Any) -> Verdict:
    classify = as_function(answer, "takes the JSON payload (a str)")
    for name, payload in _payloads().items():
        try:
            got = classify(payload)
        except (TypeError, KeyError, IndexError, AttributeError, ValueError) as exc:
            reason = tr("{kind}: {exc}", kind=type(exc).__name__, exc=exc)
            if isinstance(exc, (TypeError, AttributeError)) and "str" in str(exc):
                reason += tr(" — the payload is JSON text: json.loads(payload) gives the dict")
            return wrong(
                "on the {name} payload your function raised {reason}", name=tr(name), reason=reason
            )
        want = _expected(payload)
        if got not in LABELS:
            return wrong(
                "on the {name} payload your function returned {got!r}: return one of {labels}",
                name=tr(name),
                got=got,
                labels=", ".join(map(repr, LABELS)),
            )
        if got == want:
            continue
        if want == "hits":
            return wrong("the {name} payload has hits: it is not empty at all", name=tr(name))
        if want == "empty corpus":
            return wrong(
                "the {name} payload says {got!r}, but nothing was searched: "
                "empty_reason and candidate_records are the same as for a query that "
                "matched nothing — searched_records tells them apart",
                name=tr(name),
                got=got,
            )
        return wrong(
            "the {name} payload searched records and found no shared term: {got!r} is "
            "wrong — searched_records > 0 means there was a corpus",
            name=tr(name),
            got=got,
        )
    return right(
        "hits first; with none, searched_records = 0 means an empty corpus and > 0 a "
        "query that matched nothing"
    )
