"""Exercises of ``03_candidates.ipynb``.

Both are graded on the edition's sample corpus (``edition_store``): the zh edition asks
them of the Chinese corpus, which its notebook opens as ``zh_store``.
"""

from __future__ import annotations

from typing import Any

from ...errors import RemoteMemoryError
from ...sample import SAMPLE_AS_OF
from ..language import tr
from ..views import candidates_view, recall
from . import Verdict, exercise, right, wrong
from ._common import as_text, shape_error, terms_of
from .n02_normalize import edition_store

TARGET = "conversation-009"
# The query of 03.2 in each edition: a term only a profile and one conversation share,
# and a term a few conversations share.
COUNTED_QUERY = "Berlin memory"
COUNTED_QUERY_ZH = "柏林 远程"


def _title() -> str:
    """The target's title in the edition's corpus (“Retention policy”, “保留策略”)."""
    return next(r.source.title for r in edition_store().read_all() if r.memory_id == TARGET)


@exercise(
    "03.1",
    "a two-term query whose only candidate is conversation-009",
    hints=(
        "conversation-009 is titled “Retention policy”. Which of its fields are searched?",
        "Read its summary and content in the records table of 01 (or with the explorer) and "
        "pick two words no other conversation uses.",
    ),
    solution=(
        "# Exercise 03.1 — solution\n"
        "from memlib.notebook.language import tr\n\n"
        "# graded on this edition's corpus: the English one, or the Chinese one (zh_store)\n"
        'answer = tr("retained year", "复查 快照")'
    ),
    wrong_answers=(
        ("retention policy", "titles are not searched"),
        ("conversation memory", "also share"),
        ("retained", "use exactly two"),
        ("osaka hotel", "shares none of"),
        (7, "should be a string"),
    ),
)
def _only_candidate(answer: Any) -> Verdict:
    text = as_text(answer, "the query")
    try:
        terms = terms_of(text)
    except RemoteMemoryError as exc:
        return wrong("normalize refuses it: {exc}", exc=exc)
    view = candidates_view(edition_store(), text, SAMPLE_AS_OF, 10)
    chosen = set(view.loc[view["decision"] == "candidate", "memory_id"])
    if len(terms) != 2:
        return wrong(
            "{text!r} has {n_terms} term(s) ({terms}): use exactly two",
            text=text,
            n_terms=len(terms),
            terms=tr(", ", "、").join(terms),
        )
    if chosen == {TARGET}:
        return right(
            "{terms}: {target} is the only candidate — found by its text, not its title",
            terms=tr(", ", "、").join(terms),
            target=TARGET,
        )
    title = _title()
    if TARGET not in chosen and set(terms) & set(terms_of(title)):
        return wrong(
            "{target}'s title is “{title}”, but titles are not searched: only summary "
            "+ content, and those say something else",
            target=TARGET,
            title=title,
        )
    if TARGET not in chosen:
        return wrong(
            "{target} shares none of {terms}: read its summary and content",
            target=TARGET,
            terms=tr(", ", "、").join(terms),
        )
    others = sorted(chosen - {TARGET})
    return wrong(
        "{others} also share(s) a term: choose words only {target} has",
        others=tr(", ", "、").join(others),
        target=TARGET,
    )


@exercise(
    "03.2",
    "searched_records and candidate_records of “Berlin memory”",
    hints=(
        "searched_records counts what candidate building examined; which kinds does it examine?",
        "Look for each of the two terms in every conversation record; profile-002 says Berlin.",
    ),
    solution="# Exercise 03.2 — solution\nanswer = (13, 3)",
    wrong_answers=(
        ((15, 4), "never searched"),
        ((13, 4), "never a candidate"),
        ((13, 1), "only ONE shared term"),
        ("13, 3", "two whole numbers"),
    ),
)
def _counts(answer: Any) -> Verdict:
    if (
        not isinstance(answer, (tuple, list))
        or len(answer) != 2
        or not all(isinstance(n, int) and not isinstance(n, bool) for n in answer)
    ):
        raise shape_error("the answer should be two whole numbers: (searched, candidates)")
    query = tr(COUNTED_QUERY, COUNTED_QUERY_ZH)
    result = recall(edition_store(), query, SAMPLE_AS_OF, 10)
    expected = (result.searched_records, result.candidate_records)
    searched, candidates = answer
    if tuple(answer) == expected:
        return right(
            "searched {searched}, candidates {candidates}: profiles are never searched, "
            "and one shared term is enough",
            searched=expected[0],
            candidates=expected[1],
        )
    if searched != expected[0]:
        return wrong(
            "searched_records counts the conversation records of the scope only — "
            "profiles are never searched"
        )
    if candidates > expected[1]:
        return wrong("a profile mentions Berlin, but a profile is never a candidate")
    terms = terms_of(query)
    return wrong(
        "a candidate needs only ONE shared term with the query: count every record "
        "that says {terms}",
        terms=tr(" or ", " 或 ").join(terms),
    )
