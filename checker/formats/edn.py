"""Jepsen EDN histories: one vector of op maps, or op maps one after another.

Guarantees: streams — the text is cut into top-level forms by
checker.formats.edn_split (bounded memory); each form is read by the fast
plain-data reader of checker.formats.edn_fast when it can, else by the
`edn_format` parser, in small batches (identical results either way); ops are yielded one at a time in
file order. Values become plain Python data: keywords → strings without the
colon (`:invoke` → "invoke", `:a/b` → "a/b"), symbols → strings, vectors and
lists → lists, sets → lists (sorted when the elements allow), maps → dicts,
nil → None, chars → one-character strings, #inst → ISO-8601 strings, #uuid →
strings, exact decimals → floats. A `:key` field goes to `Op.key`; Jepsen
independent tuples (`:value [k v]`) are left as they are. A record literal
such as `#jepsen.history.Op{...}` is read as its map. An `ok` completion
whose value is or contains nil gets `Op.extra[NIL_READS_UNKNOWN] = True`
(knossos: a read returning nil constrains nothing). Bad EDN, a top-level
element that is not a map, or a map that is not an op raises `HistoryError`
naming the line the form starts on.
"""
from __future__ import annotations

import datetime
import decimal
import json
import re
import uuid
from typing import Any, Iterator, TextIO

import edn_format

from checker.formats.edn_fast import Unsupported, fast_plain
from checker.formats.edn_split import split_forms
from checker.history import NIL_READS_UNKNOWN, HistoryError, Op, op_from_dict

BATCH_FORMS = 512
BATCH_CHARS = 1 << 20

_RECORD_TAG = re.compile(r"#[^\s{\[(\"#]+\s*(?=\{)")


def to_plain(v: Any) -> Any:
    """An edn_format value as plain JSON-like Python data."""
    if v is None or isinstance(v, (bool, int, float)):
        return v
    if isinstance(v, str):
        return str(v)                      # also edn_format.Char
    if isinstance(v, (edn_format.Keyword, edn_format.Symbol)):
        return v.name
    if isinstance(v, (list, tuple, edn_format.ImmutableList)):
        return [to_plain(x) for x in v]
    if isinstance(v, (dict, edn_format.ImmutableDict)):
        out = {}
        for k, x in v.items():
            k = to_plain(k)
            if isinstance(k, list):
                k = _hashable(k)
            elif isinstance(k, dict):
                k = str(k)
            out[k] = to_plain(x)
        return out
    if isinstance(v, (set, frozenset)):
        items = [to_plain(x) for x in v]
        try:
            return sorted(items)
        except TypeError:
            return sorted(items, key=repr)
    if isinstance(v, decimal.Decimal):
        return int(v) if v == v.to_integral_value() else float(v)
    if isinstance(v, (datetime.datetime, datetime.date)):
        return v.isoformat()
    if isinstance(v, uuid.UUID):
        return str(v)
    return str(v)


def _hashable(v: Any) -> Any:
    if isinstance(v, list):
        return tuple(_hashable(x) for x in v)
    return v


def has_nil(v: Any) -> bool:
    if v is None:
        return True
    if isinstance(v, list):
        return any(has_nil(x) for x in v)
    if isinstance(v, dict):
        return any(has_nil(x) for x in v.values())
    return False


def _parse_one(text: str, line: int) -> Any:
    try:
        return to_plain(edn_format.loads(text))
    except Exception as e:              # edn_format raises several types (EDNDecodeError, NotImplementedError, ...)
        msg = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise HistoryError(f"line {line}: bad EDN ({msg[:200]})") from None


def _strip_record(text: str) -> str:
    if text.startswith("#") and not text.startswith("#{"):
        m = _RECORD_TAG.match(text)
        if m:
            return text[m.end():]
    return text


def _parse_batch(batch: list[tuple[str, int]]) -> list[tuple[Any, int]]:
    """Plain values of a batch of forms: the fast subset reader first, edn_format for the rest
    (all of the rest in one call, as edn_format's per-call cost is high)."""
    out: list[Any] = []
    slow: list[int] = []
    for k, (text, _) in enumerate(batch):
        text = _strip_record(text)
        try:
            out.append(fast_plain(text))
        except Unsupported:
            out.append(text)
            slow.append(k)
    if slow:
        texts = [out[k] for k in slow]
        try:
            values = edn_format.loads("[" + "\n".join(texts) + "\n]")
        except Exception:
            values = None
        if values is not None and len(values) == len(slow):
            values = [to_plain(v) for v in values]
        else:
            values = [_parse_one(out[k], batch[k][1]) for k in slow]
        for k, v in zip(slow, values):
            out[k] = v
    return [(v, line) for v, (_, line) in zip(out, batch)]


def iter_edn_values(stream: TextIO) -> Iterator[tuple[Any, int]]:
    """Yield `(plain value, start line)` for each top-level form / top-level vector element."""
    batch: list[tuple[str, int]] = []
    size = 0
    for text, line in split_forms(stream):
        batch.append((text, line))
        size += len(text)
        if len(batch) >= BATCH_FORMS or size >= BATCH_CHARS:
            yield from _parse_batch(batch)
            batch, size = [], 0
    if batch:
        yield from _parse_batch(batch)


def op_from_edn(value: Any, position: int, line: int) -> Op:
    """One EDN form (as plain data) as an Op."""
    if not isinstance(value, dict):
        raise HistoryError(f"line {line}: expected an op map like {{:process 0, :type :invoke, ...}}, "
                           f"got {_show(value)}")
    op = op_from_dict(value, position, line)
    if op.type == "ok" and has_nil(op.value):
        op.extra[NIL_READS_UNKNOWN] = True
    return op


def _show(v: Any) -> str:
    try:
        s = json.dumps(v)
    except (TypeError, ValueError):
        s = repr(v)
    return s if len(s) <= 80 else s[:77] + "..."


def read_edn(stream: TextIO) -> Iterator[Op]:
    """Yield the ops of a Jepsen EDN history, one at a time, in file order."""
    position = 0
    for value, line in iter_edn_values(stream):
        yield op_from_edn(value, position, line)
        position += 1
