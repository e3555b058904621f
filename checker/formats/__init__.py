"""History readers: `open_history(path, fmt)` for JSONL, Jepsen EDN and Jepsen logs.

Guarantees: `open_history` checks the path and the format before returning
(a missing file, a directory, an unknown format or undecodable text raise
`HistoryError` at once); the iterator it returns reads the file lazily and
yields `Op`s one at a time in file order, closing the file when exhausted.
`fmt="auto"` looks at the first non-blank characters that are not a `;`
comment: `{"` (or `{}`) is JSONL, `[`, `(` or any other `{` is EDN, anything
else is a Jepsen log. Files ending in `.gz` are decompressed on the fly.
Pairing of invocations and completions lives in checker.formats.pairs.
"""
from __future__ import annotations

import gzip
import os
import re
from typing import Iterator, TextIO

from checker.formats.edn import read_edn
from checker.formats.jepsen_log import read_jepsen_log
from checker.formats.pairs import Call, pair, pair_calls, resolved_value
from checker.history import HistoryError, Op, read_jsonl

FORMATS = ("auto", "jsonl", "edn", "jepsen-log")
_READERS = {"jsonl": read_jsonl, "edn": read_edn, "jepsen-log": read_jepsen_log}
SNIFF_CHARS = 1 << 16

__all__ = ["FORMATS", "open_history", "sniff_format", "Call", "pair", "pair_calls", "resolved_value"]


def _open(path: str) -> TextIO:
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return open(path, "r", encoding="utf-8", newline="")


def sniff_format(head: str) -> str:
    """The format of a history whose text starts with `head`."""
    i, n = 0, len(head)
    while i < n:
        m = re.compile(r"[^\s,]").search(head, i)
        if m is None:
            break
        i = m.start()
        if head[i] == ";":                       # an EDN comment line
            j = head.find("\n", i)
            if j < 0:
                break
            i = j + 1
            continue
        c = head[i]
        if c == "{":
            nxt = re.compile(r"\S").search(head, i + 1)
            if nxt is not None and head[nxt.start()] in '"}':
                return "jsonl"
            return "edn"
        if c in "[(":
            return "edn"
        return "jepsen-log"
    return "jsonl"                               # empty: any reader yields nothing


def open_history(path: str | os.PathLike, fmt: str = "auto") -> Iterator[Op]:
    """Ops of the history at `path`, read lazily. fmt: auto | jsonl | edn | jepsen-log."""
    path = os.fspath(path)
    if fmt not in FORMATS:
        raise HistoryError(f"unknown history format {fmt!r}; expected one of {', '.join(FORMATS)}")
    if not os.path.exists(path):
        raise HistoryError(f"{path}: no such file")
    if os.path.isdir(path):
        raise HistoryError(f"{path}: is a directory, not a history file")
    try:
        with _open(path) as stream:
            head = stream.read(SNIFF_CHARS)
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise HistoryError(f"{path}: cannot read ({e})") from None
    if fmt == "auto":
        fmt = sniff_format(head)
    return _read(path, _READERS[fmt])


def _read(path: str, reader) -> Iterator[Op]:
    try:
        with _open(path) as stream:
            yield from reader(stream)
    except HistoryError as e:
        raise HistoryError(f"{path}: {e}") from None
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise HistoryError(f"{path}: cannot read ({e})") from None
