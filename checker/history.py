"""History operations and the lab's own JSONL reader.

Guarantees: every reader yields `Op`s in file order, one at a time (a history
larger than memory is never loaded whole by the reader); an op's `type` is
one of invoke / ok / fail / info; a malformed line raises `HistoryError`
naming the line. Semantics follow Jepsen: `fail` did not happen, `info` and an
invoke that never completes may have happened at any time after the invoke.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, TextIO

TYPES = ("invoke", "ok", "fail", "info")
NEMESIS = "nemesis"

# Key in `Op.extra` set by the Jepsen readers (EDN, Jepsen log) on `ok` completions
# whose value is or contains nil. Knossos reads its own format so that a read
# returning nil constrains nothing; the register models honour this mark, so
# Jepsen histories get knossos' verdicts while the lab's JSONL histories (which
# never carry the mark) keep strict reads: there a null read matches only a null
# register. See checker.models.
NIL_READS_UNKNOWN = "nil_reads_unknown"


class _Unknown:
    """The result of an op that may or may not have happened (info, no completion)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __reduce__(self):
        return "UNKNOWN"


UNKNOWN = _Unknown()


class HistoryError(ValueError):
    """Bad input: the message names the line (or op index) at fault."""


@dataclass(slots=True)
class Op:
    """One history event, Jepsen style.

    process: an int for clients, a string such as "nemesis" otherwise.
    index:   position in the history (assigned in file order when absent).
    time:    nanoseconds, monotonic; None when the format has none.
    key:     the key for key-value models when the format gives it apart
             from the value (`:key` in Jepsen EDN); None otherwise.
    line:    line number in the source file, for error messages.
    extra:   every other field of the source object, kept as plain data.
    """

    index: int
    process: Any
    type: str
    f: Any
    value: Any = None
    time: int | None = None
    key: Any = None
    error: Any = None
    line: int | None = None
    extra: dict = field(default_factory=dict)

    @property
    def is_client(self) -> bool:
        return isinstance(self.process, int)

    def to_dict(self) -> dict:
        d = {"index": self.index, "time": self.time, "process": self.process,
             "type": self.type, "f": self.f, "value": self.value}
        if self.key is not None:
            d["key"] = self.key
        if self.error is not None:
            d["error"] = self.error
        d.update(self.extra)
        return d


_KNOWN = {"index", "time", "process", "type", "f", "value", "key", "error"}


def op_from_dict(d: dict, position: int, line: int | None = None) -> Op:
    """Build an Op from a decoded JSON object; `position` is the fallback index."""
    if not isinstance(d, dict):
        raise HistoryError(f"line {line}: expected a JSON object, got {type(d).__name__}")
    t = d.get("type")
    if t not in TYPES:
        raise HistoryError(f"line {line}: type must be one of {', '.join(TYPES)}, got {t!r}")
    if "process" not in d:
        raise HistoryError(f"line {line}: missing 'process'")
    if "f" not in d:
        raise HistoryError(f"line {line}: missing 'f'")
    index = d.get("index", position)
    if not isinstance(index, int):
        raise HistoryError(f"line {line}: index must be an integer, got {index!r}")
    extra = {k: v for k, v in d.items() if k not in _KNOWN}
    return Op(index=index, process=d["process"], type=t, f=d["f"], value=d.get("value"),
              time=d.get("time"), key=d.get("key"), error=d.get("error"), line=line, extra=extra)


def read_jsonl(stream: TextIO) -> Iterator[Op]:
    """Yield the ops of a JSONL history, one JSON object per non-blank line."""
    position = 0
    for lineno, raw in enumerate(stream, 1):
        raw = raw.strip()
        if not raw:
            continue
        try:
            d = json.loads(raw)
        except json.JSONDecodeError as e:
            raise HistoryError(f"line {lineno}: not valid JSON ({e.msg})") from None
        yield op_from_dict(d, position, lineno)
        position += 1


def write_jsonl(ops: Iterable[Op | dict], stream: TextIO) -> None:
    for op in ops:
        d = op.to_dict() if isinstance(op, Op) else op
        stream.write(json.dumps(d, separators=(",", ":")) + "\n")
