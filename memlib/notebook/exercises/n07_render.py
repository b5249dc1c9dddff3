"""Exercises of ``07_render.ipynb``."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from typing import Any

from ...render import escape_xml
from ...sample import SAMPLE_AS_OF
from ..views import limit_sweep
from . import Exercise, Verdict, right, wrong
from ._common import as_int, as_text, sample_store

TITLE = 'Bob\'s <draft> & "final" notes'
BUDGET_QUERY = "memory recall"
BUDGET = 2_500
# The notebook's own budget example, whose answer a learner may copy by mistake.
SHOWN_QUERY, SHOWN_BUDGET = "the memory", 4_000
_BARE_AMPERSAND = re.compile(r"&(?!(?:amp|lt|gt|quot|apos|#\d+|#x[0-9a-fA-F]+);)")


def _escaped_title(answer: Any) -> Verdict:
    text = as_text(answer, "the attribute value", zh="属性值")
    expected = escape_xml(TITLE)
    if text == expected:
        return right(
            "all five special characters escaped: the title cannot end the attribute "
            "or open a tag, and a parser gets it back unchanged",
            zh="五个特殊字符都已转义：标题既不会提前结束属性，也不会开启标签，"
            "解析器读回的正是原样的标题",
        )
    try:
        parsed = ET.fromstring(f'<provenance title="{text}"/>').get("title")
    except ET.ParseError:
        if '"' in text:
            return wrong(
                'a bare " ends the attribute value early — the rest of the title would '
                "be read as markup",
                zh='裸露的 " 会提前结束属性值——标题的其余部分会被当作标记读取',
            )
        if "<" in text:
            return wrong(
                "a bare < cannot stand inside an attribute: it would start a tag",
                zh="属性里不能出现裸露的 <：它会开启一个标签",
            )
        if _BARE_AMPERSAND.search(text):
            return wrong(
                "a bare & starts a character reference: it must be escaped itself",
                zh="裸露的 & 会开始一个字符引用：它本身也必须转义",
            )
        return wrong(
            "this is not well-formed inside an attribute: check each & … ; reference",
            zh="放在属性里，这不是良构的 XML：逐个检查每个 & … ; 引用",
        )
    if parsed != TITLE:
        if "&amp;amp;" in text or "&amp;lt;" in text or "&amp;quot;" in text:
            return wrong(
                "escaped twice: a parser gets back references such as &lt;, not the "
                "characters of the stored title",
                zh="转义了两次：解析器读回的是 &lt; 这样的引用，而不是所存标题中的字符",
            )
        return wrong(
            f"a parser gets back {parsed!r}, not the stored title {TITLE!r}",
            zh=f"解析器读回的是 {parsed!r}，而不是所存的标题 {TITLE!r}",
        )
    if "&#x27;" in text or "&#39;" in text:
        return wrong(
            "a parser reads this back correctly, but the block spells ' as a named "
            "reference, as in the hostile title above (html.escape spells it "
            "differently)",
            zh="解析器能正确读回，但渲染块把 ' 写成命名引用，就像上面那个敌意标题"
            "（html.escape 的写法不同）",
        )
    raw = [c for c in "'>" if c in text]
    return wrong(
        f"a parser reads this back correctly, but the block escapes every special "
        f"character, {' and '.join(raw) or 'each of them'} included — one rule for "
        "attributes and text alike",
        zh=f"解析器能正确读回，但渲染块会转义每一个特殊字符，"
        f"包括 {' 和 '.join(raw) or '其中每一个'} 在内——属性和文本适用同一条规则",
    )


def _largest_fitting(query: str, budget: int) -> tuple[int, dict[int, int]]:
    frame = limit_sweep(sample_store(), query, SAMPLE_AS_OF)
    sizes = {
        int(limit): int(chars)
        for limit, chars in zip(frame["limit"], frame["rendered_chars"], strict=True)
    }
    return max((limit for limit, chars in sizes.items() if chars <= budget), default=0), sizes


def _largest_limit(answer: Any) -> Verdict:
    as_int(answer, shape="a whole number (a limit)", shape_zh="整数（一个 limit）")
    expected, sizes = _largest_fitting(BUDGET_QUERY, BUDGET)
    if answer == expected:
        bigger = sizes.get(answer + 1)
        after = "" if bigger is None else f"; limit {answer + 1} would render {bigger:,}"
        after_zh = "" if bigger is None else f"；limit {answer + 1} 会渲染出 {bigger:,} 个字符"
        return right(
            f"limit {answer} renders {sizes[answer]:,} characters{after}",
            zh=f"limit {answer} 渲染出 {sizes[answer]:,} 个字符{after_zh}",
        )
    if answer not in sizes:
        return wrong("a limit is between 1 and 10", zh="limit 介于 1 和 10 之间")
    shown, _ = _largest_fitting(SHOWN_QUERY, SHOWN_BUDGET)
    copied = (
        f" ({shown} is the answer for “{SHOWN_QUERY}” at {SHOWN_BUDGET:,} characters, "
        "the table above)"
        if answer == shown
        else ""
    )
    copied_zh = (
        f"（{shown} 是“{SHOWN_QUERY}”在 {SHOWN_BUDGET:,} 个字符下的答案，见上面的表格）"
        if answer == shown
        else ""
    )
    if sizes[answer] > BUDGET:
        return wrong(
            f"limit {answer} renders {sizes[answer]:,} characters, more than {BUDGET:,}{copied}",
            zh=f"limit {answer} 渲染出 {sizes[answer]:,} 个字符，超过了 {BUDGET:,}{copied_zh}",
        )
    return wrong(
        f"limit {answer} fits ({sizes[answer]:,} characters), and so does "
        f"limit {answer + 1} ({sizes[answer + 1]:,}): go higher",
        zh=f"limit {answer} 放得下（{sizes[answer]:,} 个字符），limit {answer + 1} "
        f"也放得下（{sizes[answer + 1]:,}）：再往上试",
    )


Exercise(
    id="07.1",
    title="a title attribute as the block renders it",
    grade=_escaped_title,
    hints=(
        'Look at how the hostile title Tom\'s "notes" & <tags> is written in the block above.',
        "Five characters are escaped, each as a named reference: & < > \" and '.",
        "Escape & first, or you would escape the & of your own references again.",
    ),
    hints_zh=(
        '看看上面的渲染块里，敌意标题 Tom\'s "notes" & <tags> 是怎么写的。',
        "有五个字符要转义，每个都写成命名引用：& < > \" 和 '。",
        "先转义 &，否则你会把自己写出的引用里的 & 再转义一次。",
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
).register()

Exercise(
    id="07.2",
    title=f"the largest limit for “{BUDGET_QUERY}” within {BUDGET:,} characters",
    grade=_largest_limit,
    hints=(
        "Measure, do not estimate: len(views.render_view(store, query, SAMPLE_AS_OF, "
        "limit).text) "
        "for a few limits.",
        "views.limit_sweep gives the size for every limit at once (its rendered_chars column).",
    ),
    hints_zh=(
        "要测量，不要估计：对几个 limit 计算 "
        "len(views.render_view(store, query, SAMPLE_AS_OF, limit).text)。",
        "views.limit_sweep 一次给出每个 limit 的大小（它的 rendered_chars 列）。",
    ),
    solution="# Exercise 07.2 — solution\nanswer = 4",
    wrong_answers=(
        (7, "the table above"),
        (5, "more than"),
        (3, "go higher"),
        (0, "between 1 and 10"),
        (4.0, "whole number"),
    ),
).register()
