"""A fast reader for the plain-data subset of EDN that Jepsen op maps almost always use.

Guarantees: `fast_plain(text)` returns exactly what
`checker.formats.edn.to_plain(edn_format.loads(text))` returns, or raises
`Unsupported` — never a different value (it also reads strings with
astral-plane characters, which edn_format's lexer rejects). It accepts only: canonical integers
(`0`, `-12`), decimal floats (`1.5`, `-2.0e3`, `1e5`), strings whose only
escapes are backslash-quote, backslash-backslash, \\n, \\t and \\r, keywords made
of ASCII word characters and `*+!?<>=.-` with at most one inner `/` (`:invoke`,
`:a.b/c`), `nil`, `true`,
`false`, and vectors, lists and maps of these with map keys that are
scalars. Anything else — other escapes, chars, symbols, sets,
tags, comments, `N`/`M` suffixes, a map with an odd number of forms, a
bracket mismatch — raises `Unsupported`, and the caller hands the form to
the real EDN reader (edn_format), which also produces the error messages.
Equivalence with edn_format is property-tested in tests/checker/test_formats.py.
"""
from __future__ import annotations

import re
from typing import Any

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\](){}]|[^\s,\[\](){}"]+|"', re.S | re.ASCII)
_ESCAPE = re.compile(r"\\(.)", re.S)
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r"}
_INT = re.compile(r"-?(?:0|[1-9]\d*)\Z", re.ASCII)
_FLOAT = re.compile(r"-?\d+(?:\.\d+(?:[eE][-+]?\d+)?|[eE][-+]?\d+)\Z", re.ASCII)
_KEYWORD = re.compile(r":[A-Za-z_*+!?<>=-][\w*+!?<>=.\-]*(?:/[\w*+!?<>=.\-]+)?\Z", re.ASCII)
_CONST = {"nil": None, "true": True, "false": False}
_CLOSE = {"[": "]", "(": ")", "{": "}"}


class Unsupported(Exception):
    """The form uses EDN beyond the fast subset (or is malformed): use edn_format."""


def _atom(tok: str) -> Any:
    c = tok[0]
    if c == ":":
        if _KEYWORD.match(tok):
            return tok[1:]
    elif c == '"':
        if len(tok) > 1 and tok[-1] == '"':
            body = tok[1:-1]
            return _ESCAPE.sub(_unescape, body) if "\\" in body else body
    elif tok in _CONST:
        return _CONST[tok]
    elif _INT.match(tok):
        return int(tok)
    elif _FLOAT.match(tok):
        return float(tok)
    raise Unsupported(tok)


def _unescape(m: re.Match) -> str:
    try:
        return _ESCAPES[m.group(1)]
    except KeyError:
        raise Unsupported(m.group(0)) from None


def fast_plain(text: str) -> Any:
    """One EDN form as plain Python data (see the module docstring)."""
    stack: list[tuple[list, str]] = []
    cur: list = []
    for tok in _TOKEN.findall(text):
        c = tok[0]
        if c in "[({":
            stack.append((cur, c))
            cur = []
        elif c in "])}":
            if not stack:
                raise Unsupported(tok)
            outer, opener = stack.pop()
            if _CLOSE[opener] != c:
                raise Unsupported(tok)
            if opener == "{":
                if len(cur) % 2:
                    raise Unsupported("odd map")
                d = {}
                for i in range(0, len(cur), 2):
                    k = cur[i]
                    if isinstance(k, (list, dict)):
                        raise Unsupported("collection key")
                    d[k] = cur[i + 1]
                value: Any = d
            else:
                value = cur
            outer.append(value)
            cur = outer
        else:
            cur.append(_atom(tok))
    if stack or len(cur) != 1:
        raise Unsupported("not exactly one form")
    return cur[0]
