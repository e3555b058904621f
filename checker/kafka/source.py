"""Where the Kafka analysis gets its ops from: a history file or ops in memory.

Guarantees: `HistorySource.dicts()` yields each op as a plain dict in the
history's shape (`index`, `time`, `process`, `type`, `f`, `value` and any
extra field at top level), in file order, one at a time, with `index` always
set (the op's position among non-blank lines when the file has none) — the
same ops, fields and errors `checker.history.read_jsonl` gives, without
building `Op` objects. JSONL files take a fast path (orjson when installed,
else the standard json module); EDN and Jepsen logs go through
`checker.formats.open_history` when it is available. A malformed line raises
`HistoryError` naming the file and line. A source can be read more than once
(the analysis reads it again, only when it has anomalies to show, to pick up
the ops its witnesses name); a one-shot iterator of ops is rejected.
"""
from __future__ import annotations

import gzip
import os
from typing import Any, Callable, Iterable, Iterator

from checker.history import TYPES, HistoryError, Op

try:  # optional: 5x faster than json on the 1M-op histories the lab records
    import orjson as _orjson

    _loads: Callable[[Any], Any] = _orjson.loads
    _DecodeError: type[Exception] = _orjson.JSONDecodeError
except ImportError:  # pragma: no cover - depends on the environment
    import json as _json

    _loads = _json.loads
    _DecodeError = _json.JSONDecodeError

FORMATS = ("auto", "jsonl", "edn", "jepsen-log")
_TYPES = frozenset(TYPES)


def _is_jsonl(path: str) -> bool:
    """Sniff like checker.formats: `{"` (or `{}`) first means JSONL."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as fh:
        head = fh.read(4096)
    s = head.lstrip(b" \t\r\n,")
    if not s:
        return True
    if s[:1] != b"{":
        return False
    rest = s[1:].lstrip()
    return rest[:1] in (b'"', b"}")


def _check(d: Any, lineno: int) -> None:
    if type(d) is not dict:
        raise HistoryError(f"line {lineno}: expected a JSON object, got {type(d).__name__}")
    t = d.get("type")
    if t not in _TYPES:
        raise HistoryError(f"line {lineno}: type must be one of {', '.join(TYPES)}, got {t!r}")
    if "process" not in d:
        raise HistoryError(f"line {lineno}: missing 'process'")
    if "f" not in d:
        raise HistoryError(f"line {lineno}: missing 'f'")


def iter_jsonl_dicts(path: str) -> Iterator[dict]:
    """The ops of a JSONL history as dicts, validated like read_jsonl."""
    opener = gzip.open if path.endswith(".gz") else open
    loads, types, DecodeError = _loads, _TYPES, _DecodeError
    position = 0
    last = -1 << 62
    try:
        with opener(path, "rb") as fh:
            for lineno, raw in enumerate(fh, 1):
                try:
                    d = loads(raw)
                except DecodeError as e:
                    if not raw.strip():
                        continue
                    msg = getattr(e, "msg", None) or str(e).split(":")[0]
                    raise HistoryError(f"{path}: line {lineno}: not valid JSON ({msg})") from None
                if type(d) is not dict or d.get("type") not in types or "process" not in d or "f" not in d:
                    try:
                        _check(d, lineno)
                    except HistoryError as e:
                        raise HistoryError(f"{path}: {e}") from None
                idx = d.get("index", position)
                if idx is position:
                    d["index"] = position
                elif type(idx) is not int:
                    raise HistoryError(f"{path}: line {lineno}: index must be an integer, got {idx!r}")
                if idx <= last:
                    raise HistoryError(f"{path}: line {lineno}: {_order_problem(idx, last)}")
                last = idx
                position += 1
                yield d
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise HistoryError(f"{path}: cannot read ({e})") from None


def _order_problem(idx: int, last: int) -> str:
    if idx == last:
        return f"duplicate index {idx} (the op before has it too)"
    return f"index {idx} is lower than the op before's ({last}); indices must increase"


def ordered(ops: Iterable[Any], where: Callable[[Any, int], str]) -> Iterator[Any]:
    """Ops (dicts or Ops) as they come, raising HistoryError at the first whose index is
    not greater than the one before (a duplicate or out of order); `where(op, position)`
    names the op in the message."""
    last = -1 << 62
    for position, op in enumerate(ops):
        idx = op["index"] if type(op) is dict else op.index
        if type(idx) is not int:
            raise HistoryError(f"{where(op, position)}: index must be an integer, got {idx!r}")
        if idx <= last:
            raise HistoryError(f"{where(op, position)}: {_order_problem(idx, last)}")
        last = idx
        yield op


def op_dict(op: Op | dict, position: int) -> dict:
    """A plain dict for an Op (or a dict, given its index if it has none)."""
    if isinstance(op, Op):
        return op.to_dict()
    if isinstance(op, dict):
        if op.get("index") is None:
            op = dict(op, index=position)
        return op
    raise HistoryError(f"op {position}: expected an op, got {type(op).__name__}")


class HistorySource:
    """A re-readable history: a file path (with a format) or a list of ops."""

    def __init__(self, path: str | os.PathLike | None = None, fmt: str = "auto",
                 ops: Iterable[Op | dict] | None = None):
        if (path is None) == (ops is None):
            raise ValueError("give exactly one of path and ops")
        if fmt not in FORMATS:
            raise HistoryError(f"unknown history format {fmt!r}; expected one of {', '.join(FORMATS)}")
        self.fmt = fmt
        self.path = os.fspath(path) if path is not None else None
        if ops is not None:
            if iter(ops) is ops:
                raise ValueError("ops must be a list (or another re-iterable), not a one-shot iterator")
            self.ops = ops
        else:
            self.ops = None
            if not os.path.exists(self.path):
                raise HistoryError(f"{self.path}: no such file")
            if os.path.isdir(self.path):
                raise HistoryError(f"{self.path}: is a directory, not a history file")
            if fmt == "auto":
                try:
                    self.fmt = "jsonl" if _is_jsonl(self.path) else "auto"
                except OSError as e:
                    raise HistoryError(f"{self.path}: cannot read ({e})") from None

    @property
    def name(self) -> str:
        return self.path if self.path is not None else "<memory>"

    def dicts(self) -> Iterator[dict]:
        if self.ops is not None:
            return ordered((op_dict(op, i) for i, op in enumerate(self.ops)),
                           lambda op, i: f"op {i} (index {op.get('index')})")
        if self.fmt == "jsonl":
            return iter_jsonl_dicts(self.path)
        return (op.to_dict() for op in ordered(self._open_other(),
                                               lambda op, i: f"{self.path}: line {op.line}"))

    def where(self, index: Any) -> str:
        """Where the op with this index sits: "PATH: line N", or "op N" for ops in memory."""
        if self.ops is not None:
            for i, op in enumerate(self.ops):
                if op_dict(op, i).get("index") == index:
                    return f"op {i} (index {index})"
            return f"op with index {index}"
        if self.fmt == "jsonl":
            opener = gzip.open if self.path.endswith(".gz") else open
            position = 0
            with opener(self.path, "rb") as fh:
                for lineno, raw in enumerate(fh, 1):
                    if not raw.strip():
                        continue
                    try:
                        d = _loads(raw)
                    except _DecodeError:
                        break
                    if type(d) is dict and d.get("index", position) == index:
                        return f"{self.path}: line {lineno}"
                    position += 1
            return f"{self.path}: op with index {index}"
        for op in self._open_other():
            if op.index == index:
                return f"{self.path}: line {op.line}"
        return f"{self.path}: op with index {index}"

    def _open_other(self) -> Iterator[Op]:
        try:
            from checker.formats import open_history
        except ImportError:  # pragma: no cover - the readers are another engineer's part
            raise HistoryError(f"{self.path}: only JSONL histories can be read "
                               f"(checker.formats is not available)") from None
        return open_history(self.path, self.fmt)
