"""Jepsen log lines: `INFO  jepsen.util - 2	:invoke	:write	4`.

Guarantees: reads line by line and yields one Op per op line, in file order;
every other line (other log output, stack traces) is skipped. An op line is
`PROCESS TYPE F [VALUE [ERROR]]` anywhere in the line, fields separated by
tabs or spaces, where PROCESS is an integer or a keyword (`:nemesis` →
"nemesis"), TYPE is one of `:invoke :ok :fail :info` and VALUE / ERROR are
EDN. A `:fail` or `:info` line whose value is a keyword the invoke did not
carry (`:fail :read :timed-out`, `:info :write :timed-out`) has no value:
the keyword goes to `Op.error` and the value becomes the invocation's value
(so a timed-out read's value is nil: its result is unknown). As with EDN, an
`ok` line whose value is or contains nil is marked `NIL_READS_UNKNOWN`.
A client op line whose value is not EDN raises `HistoryError` naming the
line; a non-empty file without a single op line raises too.
"""
from __future__ import annotations

import re
from typing import Any, Iterator, TextIO

import edn_format

from checker.formats.edn import has_nil, to_plain
from checker.history import NIL_READS_UNKNOWN, HistoryError, Op

_OP_LINE = re.compile(
    r"(?:^|\s)(?P<process>-?\d+|:[A-Za-z*+!?_][\w.*+!?/-]*)[ \t]+"
    r":(?P<type>invoke|ok|fail|info)[ \t]+"
    r"(?P<f>:?[^\s]+)"
    r"(?:[ \t]+(?P<rest>.*?))?\s*$")
_INT = re.compile(r"-?\d+$")
_KEYWORD = re.compile(r":[A-Za-z*+!?_][\w.*+!?/-]*$")
_INT_VECTOR = re.compile(r"\[\s*-?\d+(?:[\s,]+-?\d+)*\s*\]$")


class _Keyword(str):
    """A value that was a bare EDN keyword in the log (candidate error)."""


def _forms(text: str) -> list[Any]:
    """The EDN forms of a value field, fast paths for the common shapes."""
    if text == "nil":
        return [None]
    if _INT.match(text):
        return [int(text)]
    if _KEYWORD.match(text):
        return [_Keyword(text[1:])]
    if _INT_VECTOR.match(text):
        return [[int(x) for x in re.findall(r"-?\d+", text)]]
    forms = edn_format.loads_all(text)
    return [_Keyword(f.name) if isinstance(f, edn_format.Keyword) else to_plain(f) for f in forms]


def read_jepsen_log(stream: TextIO) -> Iterator[Op]:
    """Yield the ops found in a Jepsen log, one at a time."""
    position = 0
    invoked: dict[Any, Any] = {}          # process -> value of its last invoke
    saw_text = False
    for lineno, raw in enumerate(stream, 1):
        if not saw_text and raw.strip():
            saw_text = True
        m = _OP_LINE.search(raw)
        if m is None:
            continue
        p = m.group("process")
        process: Any = int(p) if p[0] != ":" else p[1:]
        typ = m.group("type")
        f = m.group("f")
        f = f[1:] if f.startswith(":") else f
        rest = (m.group("rest") or "").strip()
        error = None
        if not rest:
            forms: list[Any] = []
        else:
            try:
                forms = _forms(rest)
            except Exception as e:
                if not isinstance(process, int):
                    forms = [rest]                   # nemesis messages are free text
                else:
                    raise HistoryError(f"line {lineno}: cannot read the value {rest[:80]!r} "
                                       f"as EDN ({str(e).strip()[:120]})") from None
        if len(forms) > 2:
            if isinstance(process, int):
                raise HistoryError(f"line {lineno}: expected VALUE [ERROR] after the f, got {rest[:80]!r}")
            forms = [rest]
        value = forms[0] if forms else None
        if len(forms) == 2:
            error = forms[1]
        if typ == "invoke":
            invoked[process] = value
        elif typ in ("fail", "info") and error is None and isinstance(value, _Keyword) \
                and invoked.get(process) != value:
            error, value = value, invoked.get(process)
        if isinstance(value, _Keyword):
            value = str(value)
        if isinstance(error, _Keyword):
            error = str(error)
        op = Op(index=position, process=process, type=typ, f=f, value=value, error=error, line=lineno)
        if typ == "ok" and has_nil(value):
            op.extra[NIL_READS_UNKNOWN] = True
        yield op
        position += 1
    if position == 0 and saw_text:
        raise HistoryError("no Jepsen op lines found (expected lines like "
                           "'INFO  jepsen.util - 2\t:invoke\t:write\t4')")
