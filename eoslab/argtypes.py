"""argparse types for numeric options: each refuses what the option cannot mean.

Guarantees: a value that is not a number, is not finite (inf, nan), or lies
outside the option's range is refused by argparse itself, so the command
prints one line (`eoslab: argument --time-limit: ...`) and exits 2 before
doing anything. Integers are whole decimal numbers (no 1e3, no 1.5).
"""
from __future__ import annotations

import argparse
import math

INT64_MAX = 2 ** 63 - 1


def _number(text: str, kind):
    try:
        v = kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected {'a whole number' if kind is int else 'a number'}, "
                                         f"got {text!r}") from None
    if kind is float and not math.isfinite(v):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return v


def int_range(low: int, high: int = INT64_MAX):
    def parse(text: str) -> int:
        v = _number(text, int)
        if not low <= v <= high:
            raise argparse.ArgumentTypeError(f"must be between {low} and {high}, got {v}"
                                             if high != INT64_MAX else f"must be at least {low}, got {v}")
        return v
    parse.__name__ = f"int in [{low}, {high}]"
    return parse


def float_range(low: float, high: float = math.inf, low_open: bool = False):
    def parse(text: str) -> float:
        v = _number(text, float)
        if v < low or (low_open and v == low) or v > high:
            bound = f"greater than {low:g}" if low_open else f"at least {low:g}"
            raise argparse.ArgumentTypeError(f"must be {bound}" + (f" and at most {high:g}" if high != math.inf
                                                                  else "") + f", got {text}")
        return v
    parse.__name__ = "number"
    return parse


positive_int = int_range(1)
nonnegative_int = int_range(0)
positive_float = float_range(0.0, low_open=True)
nonnegative_float = float_range(0.0)
