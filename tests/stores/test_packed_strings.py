"""The index file's packed ids and terms (memlib/_retrieval/strings.py) against plain lists
and dicts, collisions of the CRC-32 look-up included."""

from __future__ import annotations

from contextlib import ExitStack
from unittest import mock

from hypothesis import given, settings
from hypothesis import strategies as st

from memlib._retrieval.strings import PackedStrings, SortedPositions, hashed_order, pack_strings

_TEXT = st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=6)


@settings(max_examples=150, deadline=None, database=None)
@given(
    st.lists(_TEXT, unique=True, max_size=30),
    st.lists(_TEXT, max_size=10),
    st.lists(_TEXT, max_size=8),
    st.booleans(),
)
def test_packed_strings_and_their_positions_act_as_list_and_dict(
    strings: list[str], added: list[str], probes: list[str], collide: bool
) -> None:
    with ExitStack() as stack:
        if collide:  # every string shares one hash: the look-up must compare the strings
            stack.enter_context(mock.patch("memlib._retrieval.strings.crc32_of", lambda t: 7))
        _check(strings, added, probes)


def _check(strings: list[str], added: list[str], probes: list[str]) -> None:
    packed = PackedStrings(*pack_strings(strings))
    positions = SortedPositions(packed, *hashed_order(strings))
    plain = {text: n for n, text in enumerate(strings)}
    for text in added:
        if text not in plain:
            plain[text] = len(packed)
            positions[text] = plain[text]
            packed.append(text)
    every = strings + [t for t in added if t not in strings]
    assert list(packed) == [packed[i] for i in range(len(packed))]
    assert list(dict.fromkeys(packed)) == list(dict.fromkeys(every))
    for text in [*strings, *added, *probes]:
        assert positions.get(text) == plain.get(text)
        assert (text in positions) == (text in plain)
    assert sorted(positions) == sorted(plain)


@given(st.lists(_TEXT, unique=True, max_size=40), st.lists(_TEXT, max_size=8))
def test_sorted_strings_are_found_by_bisection(strings: list[str], probes: list[str]) -> None:
    ordered = sorted(strings)
    positions = SortedPositions(PackedStrings(*pack_strings(ordered)))
    for text in [*ordered, *probes]:
        assert positions.get(text) == (ordered.index(text) if text in ordered else None)
