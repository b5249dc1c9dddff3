"""What the model reads is visible text (docs/contract.md, "What the model reads").

``visible`` writes every character a reviewer cannot see but a model reads (tag characters,
bidi controls, zero-width and other default-ignorables, controls: ``ESCAPED_RANGES``) as an
escape its format's parser reads back: ``xml`` ``&#x200B;``, ``json`` ``\\u200b``, ``text``
``\\U000e0041``. Only the selectors and joiners emoji and scripts need are kept (``_kept``)."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Literal

from ._tokens import char_class

Form = Literal["xml", "json", "text"]

# Unicode 15.1 (DerivedCoreProperties.txt, UnicodeData.txt). A test checks that every
# Cc/Cf character of the running Python's Unicode database is covered.
ESCAPED_RANGES: tuple[tuple[int, int], ...] = (
    (0x0000, 0x0008),
    (0x000B, 0x000C),
    (0x000E, 0x001F),  # C0 controls but tab, LF, CR
    (0x007F, 0x009F),  # DEL and C1 controls (U+009B is a terminal's CSI)
    (0x00AD, 0x00AD),  # soft hyphen
    (0x034F, 0x034F),  # combining grapheme joiner
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),  # Arabic/Syriac format characters, U+061C ALM
    (0x115F, 0x1160),
    (0x3164, 0x3164),
    (0xFFA0, 0xFFA0),  # Hangul fillers (blank)
    (0x17B4, 0x17B5),  # Khmer inherent vowels (not shown)
    (0x180B, 0x180F),  # Mongolian variation selectors and vowel separator
    (0x200B, 0x200F),  # ZWSP, ZWNJ, ZWJ, LRM, RLM
    (0x202A, 0x202E),  # bidi embeddings and overrides
    (0x2060, 0x206F),  # word joiner, invisible operators, bidi isolates, deprecated
    (0xFE00, 0xFE0F),  # variation selectors 1-16
    (0xFEFF, 0xFEFF),  # zero-width no-break space (BOM)
    (0xFFF0, 0xFFFB),  # reserved ignorables, interlinear annotation (hides its text)
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),  # Kaithi number signs
    (0x13430, 0x1343F),  # Egyptian hieroglyph format controls
    (0x1BCA0, 0x1BCA3),  # shorthand format controls
    (0x1D173, 0x1D17A),  # musical symbol format controls
    (0xE0000, 0xE0FFF),  # tag characters, variation selectors 17-256, reserved
)


_ESCAPED = re.compile(f"[{char_class(ESCAPED_RANGES)}]")
# The scan: the set below U+10000 plus one span over its astral members (a table lookup,
# not a range test per character); an astral match outside the set is handed back as is.
_ASTRAL = tuple(r for r in ESCAPED_RANGES if r[0] > 0xFFFF)
_SCAN = re.compile(
    f"[{char_class(tuple(r for r in ESCAPED_RANGES if r[1] <= 0xFFFF))}"
    f"{char_class(((_ASTRAL[0][0], _ASTRAL[-1][1]),))}]"
)
# The only escaped characters plain ASCII can hold; checking a str's ASCII flag is O(1).
_ASCII_ESCAPED = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")

_PRESENTATION = frozenset("\ufe0e\ufe0f")
_JOINERS = frozenset("\u200c\u200d")
_KEYCAPS = frozenset("#*0123456789")


def _shown(char: str, keycaps: bool = False) -> bool:
    """Visible and not ASCII (a keycap, #️⃣, too with ``keycaps``)."""
    wide = not char.isascii() or (keycaps and char in _KEYCAPS)
    return wide and not char.isspace() and _ESCAPED.match(char) is None


def _kept(text: str, at: int) -> bool:
    """The one exception, for emoji and scripts: U+FE0E/U+FE0F after a visible non-ASCII
    character or a keycap, U+200C/U+200D between two visible non-ASCII characters (U+200D
    also after a kept U+FE0F: 🏳 U+FE0F U+200D 🌈). At most one presence-or-absence per
    visible character stays hidden."""
    char = text[at]
    before = text[at - 1] if at > 0 else ""
    if char in _PRESENTATION:
        return before != "" and _shown(before, keycaps=True)
    if char not in _JOINERS or at + 1 == len(text) or not _shown(text[at + 1]) or not before:
        return False
    if _shown(before):
        return True
    return char == "\u200d" and before in _PRESENTATION and _kept(text, at - 1)


def _json(code: int) -> str:
    if code < 0x10000:
        return f"\\u{code:04x}"
    code -= 0x10000
    return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"


_FORMS: dict[str, Callable[[int], str]] = {
    "xml": lambda code: f"&#x{code:04X};",
    "json": _json,
    "text": lambda code: f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}",
}


def visible(text: str, form: Form) -> str:
    """``text`` with every invisible or direction-changing character written as an escape
    of ``form`` (the module docstring), but for ``_kept``'s exception."""
    if text.isascii():
        if _ASCII_ESCAPED.search(text) is None:
            return text
    elif _SCAN.search(text) is None:
        return text
    escape = _FORMS[form]

    def replace(match: re.Match[str]) -> str:
        char = match.group()
        if (char > "\uffff" and _ESCAPED.match(char) is None) or _kept(text, match.start()):
            return char
        return escape(ord(char))

    return _SCAN.sub(replace, text)


def first_hidden(text: str) -> str | None:
    """The first character of ``text`` in ``ESCAPED_RANGES``, else None (no exception for
    joiners or selectors: an identifier must be one visible token)."""
    found = (_ASCII_ESCAPED if text.isascii() else _ESCAPED).search(text)
    return None if found is None else found.group()


# Characters that would make a bare name read as several names or as the end of one.
_NAME_BREAKERS = re.compile("[\\s,'\"\\\\]")


def shown_name(name: str) -> str:
    """``name`` for a one-line error message: as it is when it is one visible word,
    else quoted with every line break, control and invisible character escaped."""
    plain = name.isprintable() and _NAME_BREAKERS.search(name) is None
    if name and plain and first_hidden(name) is None:
        return name
    # repr escapes every character str.isprintable refuses (each line break among them);
    # visible() then escapes the default-ignorables repr leaves as they are.
    return visible(repr(name), "text")
