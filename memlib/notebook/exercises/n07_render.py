"""Exercises of ``07_render.ipynb``."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from ...render import escape_xml
from ...sample import SAMPLE_AS_OF
from ..language import tr
from ..views import limit_sweep
from . import Verdict, exercise, right, wrong
from ._common import as_int, as_text, sample_store

TITLE = 'Bob\'s <draft> & "final" notes'
BUDGET_QUERY = "memory recall"
BUDGET = 2_500
# The notebook's own budget example, whose answer a learner may copy by mistake.
SHOWN_QUERY, SHOWN_BUDGET = "the memory", 4_000
_BARE_AMPERSAND = re.compile(r"&(?!(?:amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);)")


@exercise(
    "07.1",
    "a title attribute as the block renders it",
    hints=(
        'Look at how the hostile title Tom\'s "notes" & <tags> is written in the block above.',
        "Five characters are escaped, each as a named reference: & < > \" and '.",
        "Escape & first, or you would escape the & of your own references again.",
    ),
    solution=(
        "# Exercise 07.1 — solution\n"
        'answer = "Bob&apos;s &lt;draft&gt; &amp; &quot;final&quot; notes"'
    ),
    wrong_answers=(
        (TITLE, 'bare "'),
        ("Bob's <draft> &amp; &quot;final&quot; notes", "bare <"),
        ("Bob's &lt;draft&gt; & &quot;final&quot; notes", "bare &"),
        (
            "Bob&amp;apos;s &amp;lt;draft&amp;gt; &amp;amp; &amp;quot;final&amp;quot; notes",
            "escaped twice",
        ),
        ("Bob&#x27;s &lt;draft&gt; &amp; &quot;final&quot; notes", "html.escape"),
        ("Bob's &lt;draft> &amp; &quot;final&quot; notes", "every special character"),
        (42, "should be a string"),
    ),
)
def _escaped_title(answer: Any) -> Verdict:
    text = as_text(answer, "the attribute value")
    expected = escape_xml(TITLE)
    if text == expected:
        return right(
            "all five special characters escaped: the title cannot end the attribute "
            "or open a tag, and a parser gets it back unchanged"
        )
    try:
        parsed = ET.fromstring(f'<provenance title="{text}"/>').get("title")
    except ET.ParseError:
        if '"' in text:
            return wrong(
                'a bare " ends the attribute value early — the rest of the title '
                "would be read as markup"
            )
        if "<" in text:
            return wrong("a bare < cannot stand inside an attribute: it would start a tag")
        if _BARE_AMPERSAND.search(text):
            return wrong("a bare & starts a character reference: it must be escaped itself")
        return wrong("this is not well-formed inside an attribute: check each & … ; reference")
    if parsed != TITLE:
        if "&amp;amp;" in text or "&amp;lt;" in text or "&amp;quot;" in text:
            return wrong(
                "escaped twice: a parser gets back references such as &lt;, not the "
                "characters of the stored title"
            )
        return wrong(
            "a parser gets back {parsed!r}, not the stored title {title!r}",
            parsed=parsed,
            title=TITLE,
        )
    if "&#x27;" in text or "&#39;" in text:
        return wrong(
            "a parser reads this back correctly, but the block spells ' as a named "
            "reference, as in the hostile title above (html.escape spells it "
            "differently)"
        )
    raw = [c for c in "'>" if c in text]
    return wrong(
        "a parser reads this back correctly, but the block escapes every special "
        "character, {raw} included — one rule for attributes and text alike",
        raw=tr(" and ").join(raw) or tr("each of them"),
    )


def _largest_fitting(query: str, budget: int) -> tuple[int, dict[int, int]]:
    frame = limit_sweep(sample_store(), query, SAMPLE_AS_OF)
    sizes = {
        int(limit): int(chars)
        for limit, chars in zip(frame["limit"], frame["rendered_chars"], strict=True)
    }
    return max((limit for limit, chars in sizes.items() if chars <= budget), default=0), sizes


@exercise(
    "07.2",
    f"the largest limit for “{BUDGET_QUERY}” within {BUDGET:,} characters",
    hints=(
        "Measure, do not estimate: len(views.render_view(store, query, SAMPLE_AS_OF, "
        "limit).text) "
        "for a few limits.",
        "views.limit_sweep gives the size for every limit at once (its rendered_chars column).",
    ),
    solution="# Exercise 07.2 — solution\nanswer = 4",
    wrong_answers=(
        (7, "the table above"),
        (5, "more than"),
        (3, "go higher"),
        (0, "between 1 and 10"),
        (4.0, "whole number"),
    ),
)
def _largest_limit(answer: Any) -> Verdict:
    as_int(answer, shape="a whole number (a limit)")
    expected, sizes = _largest_fitting(BUDGET_QUERY, BUDGET)
    if answer == expected:
        bigger = sizes.get(answer + 1)
        after = "; limit {limit} would render {chars:,}" if bigger is not None else ""
        return right(
            "limit {answer} renders {chars:,} characters{after}",
            answer=answer,
            chars=sizes[answer],
            after=tr(after, limit=answer + 1, chars=bigger),
        )
    if answer not in sizes:
        return wrong("a limit is between 1 and 10")
    shown, _ = _largest_fitting(SHOWN_QUERY, SHOWN_BUDGET)
    copied = (
        " ({shown} is the answer for “{query}” at {budget:,} characters, the table above)"
        if answer == shown
        else ""
    )
    if sizes[answer] > BUDGET:
        return wrong(
            "limit {answer} renders {chars:,} characters, more than {budget:,}{copied}",
            answer=answer,
            chars=sizes[answer],
            budget=BUDGET,
            copied=tr(copied, shown=shown, query=SHOWN_QUERY, budget=SHOWN_BUDGET),
        )
    return wrong(
        "limit {answer} fits ({chars:,} characters), and so does limit {next} ({next_chars:,}): "
        "go higher",
        answer=answer,
        chars=sizes[answer],
        next=answer + 1,
        next_chars=sizes[answer + 1],
    )
