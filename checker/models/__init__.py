"""Sequential specifications for the linearizability checker, by name.

Guarantees: `MODELS` maps every model name to a factory taking no argument
and returning a fresh model object (see checker.models.base for the
interface); `get_model(name)` raises `ValueError` listing the known names
for an unknown one. Models: register, cas-register, multi-register, kv, set,
queue, log.

Reads and null: a read's value is compared with the state exactly, and a
read of null matches only a null state — with two exceptions where the read
carries no information and so constrains nothing: a read whose result is
unknown (info, or an invoke that never completed; the nil it carries is the
invoke's), and, for the register family only (register, cas-register,
multi-register), an `ok` read of nil in a history read from Jepsen EDN or a
Jepsen log — knossos' own rule, which its corpus depends on (see
checker.models.register for the evidence).
"""
from __future__ import annotations

from typing import Callable

from checker.models.base import FrozenMap, Model, freeze, thaw
from checker.models.fifo import Queue
from checker.models.kv import KV
from checker.models.multi_register import MultiRegister
from checker.models.partition_log import PartitionLog
from checker.models.register import CasRegister, Register
from checker.models.sets import SetModel

MODELS: dict[str, Callable[[], Model]] = {
    "register": Register,
    "cas-register": CasRegister,
    "multi-register": MultiRegister,
    "kv": KV,
    "set": SetModel,
    "queue": Queue,
    "log": PartitionLog,
}


def get_model(name: str | Model) -> Model:
    """A model object by name (a Model instance is returned as is)."""
    if isinstance(name, Model):
        return name
    try:
        return MODELS[name]()
    except KeyError:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(MODELS)}") from None


__all__ = ["MODELS", "Model", "FrozenMap", "freeze", "thaw", "get_model"]
