"""The Kafka analysis's op type codes, and how a writer packs one with an op index.

Guarantees: an op that completed is coded OK (0), INFO (1) or FAIL (2), so a
smaller code is the stronger claim (`type_code`: "ok" -> OK, "info" -> INFO,
any other type -> FAIL, as the streaming pass has always coded them). A
record's writer is one int, `(op index << CODE_BITS) + code`:
`w & CODE_MASK` is the code and `w >> CODE_BITS` the op index, for every
integer index (negative ones too). Nothing here allocates or raises.
"""
from __future__ import annotations

from typing import Any

OK, INFO, FAIL = 0, 1, 2
CODE_BITS = 2
CODE_MASK = (1 << CODE_BITS) - 1


def type_code(t: Any) -> int:
    """The code of a completed op of type t (anything but ok and info is FAIL)."""
    return OK if t == "ok" else (INFO if t == "info" else FAIL)
