"""The fast EDN reader's subset (checker.formats.edn_fast) reads exactly what edn_format reads, and
declines what it does not cover."""
from __future__ import annotations

import edn_format
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from checker.formats.edn import to_plain
from checker.formats.edn_fast import Unsupported, fast_plain

pytestmark = pytest.mark.fast


# ------------------------------------------------- fast EDN subset == edn_format

_keywords = st.from_regex(r"[A-Za-z][A-Za-z0-9.\-/]{0,8}", fullmatch=True).map(edn_format.Keyword)
_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-10 ** 20, 10 ** 20),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.one_of(st.sampled_from(list('a "\\\t\n\r;[](){},#:')), st.characters()), max_size=12),
    _keywords, st.characters().map(edn_format.Char))
_map_keys = st.one_of(st.integers(-1000, 1000), st.text(max_size=6), _keywords)
_values = st.recursive(_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.lists(inner, max_size=4).map(tuple),
    st.lists(st.tuples(_map_keys, inner), max_size=4).map(dict)),
    max_leaves=12)


def _respace(text: str, seps: list[str]) -> str:
    """Vary the separators outside strings (EDN: whitespace and commas)."""
    out, in_str, k = [], False, 0
    for i, ch in enumerate(text):
        if ch == '"' and (i == 0 or text[i - 1] != "\\"):
            in_str = not in_str
        if ch == " " and not in_str and seps:
            out.append(seps[k % len(seps)])
            k += 1
        else:
            out.append(ch)
    return "".join(out)


@settings(max_examples=300, deadline=None)
@given(v=_values, seps=st.lists(st.sampled_from([" ", ", ", "\n", "\t ,"]), max_size=3))
def test_fast_edn_subset_reads_exactly_what_edn_format_reads(v, seps):
    text = _respace(edn_format.dumps(v), seps)
    try:
        expected = to_plain(edn_format.loads(text))
    except edn_format.EDNDecodeError:
        assume(False)          # edn_format cannot read back e.g. astral-plane characters
    try:
        got = fast_plain(text)
    except Unsupported:
        return
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize("text", ["#{1 2}", "\\a", "sym", "5N", "1.5M", '"\\u0041"', "{:a 1 :b}",
                                  "[1 2)", "{:a 1 ; c\n}", "#inst \"2020-01-01\"", "007", "+5",
                                  ":A/", ":a//b", ":a/b/c", ":/a"])
def test_fast_edn_subset_declines_what_it_does_not_cover(text):
    with pytest.raises(Unsupported):
        fast_plain(text)


@pytest.mark.parametrize("text", [r'"a\tb"', r'"a\nb"', r'"a\rb"', r'"a\"b"', r'"a\\b"', r'"a\\nb"'])
def test_fast_edn_subset_escapes_match_edn_format(text):
    assert fast_plain(text) == edn_format.loads(text)


def test_fast_edn_subset_reads_op_maps():
    assert fast_plain('{:process 3, :type :ok, :f :cas, :value [1 -4] :s "a\\"b" :x 1.5 :t true}') == \
        {"process": 3, "type": "ok", "f": "cas", "value": [1, -4], "s": 'a"b', "x": 1.5, "t": True}
