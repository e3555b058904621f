"""Incremental splitter of an EDN text into top-level forms.

Guarantees: reads the stream in bounded chunks (about 64 KiB, extended to the
next whitespace so no token or escape is ever cut in two) and yields the text
of each top-level form together with the line it starts on; if the first
form of the text (or any later top-level form) is a vector or list, its
*elements* are yielded instead, so `[{...} {...}]` and `{...} {...}` give the
same forms. Strings (with escapes), character literals (`\\(`), `;` comments,
`#{` sets, `#_` discards and `#tag` prefixes are tracked, so brackets inside
them never confuse the depth count. Memory use is bounded by the largest
single form, never by the file. An unterminated form, an unmatched closing
bracket or a mismatched bracket pair raises `HistoryError` naming the line.
The forms themselves are not parsed here (see checker.formats.edn).
"""
from __future__ import annotations

import re
from typing import Iterator, TextIO

from checker.history import HistoryError

CHUNK = 1 << 16

_OPEN = {"[": "]", "(": ")", "{": "}"}
_CLOSE = {"]", ")", "}"}

_NONSPACE = re.compile(r"[^\s,]")
_ATOM_END = re.compile(r"[\s,\[\](){}\";]")
_IN_FORM = re.compile(r"[\[\](){}\"\\;]")
_IN_STRING = re.compile(r"[\"\\]")

# modes
_BETWEEN, _FORM, _STRING, _COMMENT_BETWEEN, _COMMENT_FORM = range(5)


def read_chunks(stream: TextIO, size: int = CHUNK) -> Iterator[str]:
    """Chunks of about `size` characters, each ending on whitespace (or EOF)."""
    while True:
        chunk = stream.read(size)
        if not chunk:
            return
        while not chunk[-1].isspace():
            more = stream.readline(size)
            if not more:
                break
            chunk += more
        yield chunk


class FormSplitter:
    """Feed chunks, get back `(form_text, start_line)` pairs."""

    def __init__(self) -> None:
        self.mode = _BETWEEN
        self.line = 1            # line number at position self._lpos of the current chunk
        self._lpos = 0
        self.stack: list[str] = []       # open brackets of the current form
        self.parts: list[str] = []       # text of the current form from earlier chunks
        self.form_line = 0
        self.container: str | None = None    # closing bracket of the top-level vector/list we are inside
        self.container_line = 0
        self.prefix = ""                 # pending `#tag ` text for the next form
        self.discard = 0                 # pending `#_` count

    # -- helpers -------------------------------------------------------------
    def _line_at(self, chunk: str, pos: int) -> int:
        self.line += chunk.count("\n", self._lpos, pos)
        self._lpos = pos
        return self.line

    def _emit(self, out: list, text: str) -> None:
        if self.discard:
            self.discard -= 1
            return
        if self.prefix:
            text = self.prefix + text
            self.prefix = ""
        out.append((text, self.form_line))

    # -- the scanner ---------------------------------------------------------
    def feed(self, chunk: str) -> list[tuple[str, int]]:
        out: list[tuple[str, int]] = []
        i, n = 0, len(chunk)
        start = 0                         # where the current form's text starts in this chunk
        while i < n:
            mode = self.mode
            if mode == _BETWEEN:
                m = _NONSPACE.search(chunk, i)
                if m is None:
                    break
                j = m.start()
                c = chunk[j]
                if c == ";":
                    self.mode = _COMMENT_BETWEEN
                    i = j + 1
                elif c in "[(" and self.container is None and not self.prefix and not self.discard:
                    self.container = _OPEN[c]
                    self.container_line = self._line_at(chunk, j)
                    i = j + 1
                elif c in _CLOSE:
                    line = self._line_at(chunk, j)
                    if self.container == c and not self.prefix and not self.discard:
                        self.container = None
                        i = j + 1
                    else:
                        raise HistoryError(f"line {line}: unmatched {c!r}")
                elif c == "#" and j + 1 >= n:
                    raise HistoryError(f"line {self._line_at(chunk, j)}: lone '#' at end of file")
                elif c == "#" and chunk[j + 1] == "_":
                    self.discard += 1
                    i = j + 2
                elif c == "#" and chunk[j + 1] != "{":
                    e = _ATOM_END.search(chunk, j + 1)
                    end = e.start() if e else n
                    self.prefix += chunk[j:end] + " "
                    i = end
                else:
                    self.form_line = self._line_at(chunk, j)
                    start = j
                    if c in "{[(" or c == "#":          # `#{` set
                        k = j + 1 if c != "#" else j + 2
                        self.stack = [_OPEN[chunk[k - 1]]]
                        self.mode = _FORM
                        i = k
                    elif c == '"':
                        self.stack = []
                        self.mode = _STRING
                        i = j + 1
                    else:                                # a bare atom: a form of its own
                        e = _ATOM_END.search(chunk, j + 1)
                        end = e.start() if e else n
                        self._emit(out, chunk[j:end])
                        i = end
            elif mode == _FORM:
                m = _IN_FORM.search(chunk, i)
                if m is None:
                    break
                j = m.start()
                c = chunk[j]
                if c == '"':
                    self.mode = _STRING
                    i = j + 1
                elif c == "\\":
                    i = j + 2
                elif c == ";":
                    self.mode = _COMMENT_FORM
                    i = j + 1
                elif c in _OPEN:
                    self.stack.append(_OPEN[c])
                    i = j + 1
                else:                                    # a closing bracket
                    want = self.stack.pop()
                    if c != want:
                        line = self._line_at(chunk, j)
                        raise HistoryError(f"line {line}: expected {want!r} to close the form "
                                           f"from line {self.form_line}, got {c!r}")
                    i = j + 1
                    if not self.stack:
                        self._finish(out, chunk, start, i)
            elif mode == _STRING:
                m = _IN_STRING.search(chunk, i)
                if m is None:
                    break
                j = m.start()
                if chunk[j] == "\\":
                    i = j + 2
                else:
                    i = j + 1
                    if self.stack:
                        self.mode = _FORM
                    else:
                        self._finish(out, chunk, start, i)
            else:                                        # a comment, to the end of the line
                j = chunk.find("\n", i)
                if j < 0:
                    break
                self.mode = _BETWEEN if mode == _COMMENT_BETWEEN else _FORM
                i = j + 1
        if self.mode in (_FORM, _STRING, _COMMENT_FORM):
            self.parts.append(chunk[start:])
        self.line += chunk.count("\n", self._lpos)
        self._lpos = 0
        return out

    def _finish(self, out: list, chunk: str, start: int, end: int) -> None:
        if self.parts:
            self.parts.append(chunk[start:end])
            text = "".join(self.parts)
            self.parts = []
        else:
            text = chunk[start:end]
        self.mode = _BETWEEN
        self._emit(out, text)

    def close(self) -> None:
        """Call at EOF: raises if a form or the top-level vector is still open."""
        if self.mode in (_FORM, _STRING, _COMMENT_FORM):
            raise HistoryError(f"line {self.form_line}: form never closed (end of file reached)")
        if self.container is not None:
            raise HistoryError(f"line {self.container_line}: top-level vector never closed "
                               f"(end of file reached, expected {self.container!r})")
        if self.prefix or self.discard:
            raise HistoryError(f"line {self.line}: tag or #_ with no form after it at end of file")


def split_forms(stream: TextIO, chunk_size: int = CHUNK) -> Iterator[tuple[str, int]]:
    """Yield `(text, line)` for each top-level form (or element of a top-level vector)."""
    splitter = FormSplitter()
    for chunk in read_chunks(stream, chunk_size):
        yield from splitter.feed(chunk)
    splitter.close()
