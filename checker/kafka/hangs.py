"""Hanging transactions, from the offsets a run sampled beside its ops.

A run's offsets monitor records, about twice a second, each partition's
last stable offset (LSO) and high watermark (HW) as a lone info op:
    {"process": "monitor", "type": "info", "f": "offsets",
     "value": [[key, lso, hw], ...], "time": ns}
(keys spelt as the sends spell them; a sample that could not be taken is
left out of the value). read_committed consumers read nothing at or past
the LSO, so an LSO that stands below the high watermark holds every record
behind it from them: a transaction that never ends "hangs" the partition
(KAFKA-12671, KIP-664's find-hanging).

Guarantees: `OffsetSamples` keeps, per key, the samples in history order
(a few ints each). `hanging_transactions(samples, keys, threshold_s)`
reports one `hanging-transaction` finding for each stretch in which a key's
LSO stood at one offset below its high watermark for at least
`threshold_s` seconds of the history's clock with no fault in force: the
longest part of the stretch outside every fault (a nemesis `start-X` op to
its `stop-X`; a fault never stopped lasts to the end) counts, since a fault
can hold markers back while it lasts but Kafka must end the transaction
once the faults are gone). It gives the key, the offset it stood
at (the first offset of the oldest open transaction), when the stretch
began, how long it lasted (all of it, and after the faults), the high
watermark at its start and end,
whether it was still standing at the last sample, and the op that wrote
the record at that offset when the history has it (a witness). A run sets
the threshold above its transaction timeout plus the coordinator's abort
interval, the longest Kafka lets a live transaction hold the LSO.
`stalls_at_end(samples)` lists every key whose LSO was below its high
watermark at its last sample however briefly, with how long it had stood,
so a run whose consumers were stalled at the end says so even when no
stretch passed the threshold.
"""
from __future__ import annotations

from typing import Any, Callable

from checker.kafka.codes import CODE_BITS
from checker.kafka.witness import Finding, ref
from checker.report_series import _fault_action as fault_action

HANGING = "hanging-transaction"
MONITOR_F = "offsets"
DEFAULT_THRESHOLD_S = 900.0     # Kafka's transaction.max.timeout.ms (15 min): find-hanging's default bound


class OffsetSamples:
    """Per key: [(time ns, lso, hw), ...] in history order; and the faults' time intervals."""

    __slots__ = ("by_key", "_open", "_closed", "faults")

    def __init__(self) -> None:
        self.by_key: dict[Any, list[tuple[int, int, int]]] = {}
        self._open: dict[str, int] = {}                # fault name -> time its start-* op began
        self._closed: dict[str, int] = {}              # fault name -> its last interval in `faults`
        self.faults: list[tuple[int, float]] = []      # (start, end) ns; a fault never stopped ends at inf

    def add(self, value: Any, tm: int | None, key: Callable[[Any], Any]) -> None:
        if tm is None or type(value) is not list:
            return
        for item in value:
            if type(item) is list and len(item) == 3 and type(item[1]) is int and type(item[2]) is int:
                self.by_key.setdefault(key(item[0]), []).append((tm, item[1], item[2]))

    def nemesis(self, f: str, tm: int | None) -> None:
        """A nemesis op: `start-X` opens fault X (the first op of its pair), `stop-X` closes it at
        the last op of its pair; any other (heal, a leader change seen) is an instant, not a fault in
        force."""
        action = fault_action(f) if tm is not None else None
        if action is None:
            return
        what, name = action
        if what == "open":
            self._open.setdefault(name, tm)
        else:
            start = self._open.pop(name, None)
            if start is not None:
                self._closed[name] = len(self.faults)
                self.faults.append((start, tm))
            elif name in self._closed:                 # the pair's second op: the fault ends there
                i = self._closed[name]
                self.faults[i] = (self.faults[i][0], max(self.faults[i][1], tm))

    def fault_intervals(self) -> list[tuple[int, float]]:
        """Every fault's interval; a stop-X op's pair ends at its second op (later ones extend it)."""
        return sorted(self.faults + [(t, float("inf")) for t in self._open.values()])

    def quiet(self, ta: int, tb: int) -> float:
        """The longest stretch of [ta, tb] with no fault in force, in seconds."""
        best, cur = 0.0, ta
        for s, e in self.fault_intervals():
            if e <= cur:
                continue
            if s >= tb:
                break
            if s > cur:
                best = max(best, s - cur)
            cur = max(cur, e)
            if cur >= tb:
                break
        if cur < tb:
            best = max(best, tb - cur)
        return best / 1e9

    def __bool__(self) -> bool:
        return bool(self.by_key)


def _stretches(samples: list[tuple[int, int, int]]):
    """(first index, last index) of each maximal run of samples with one LSO below the HW."""
    start = None
    for i, (_, lso, hw) in enumerate(samples):
        if start is not None and (lso != samples[start][1] or lso >= hw):
            yield start, i - 1
            start = None
        if start is None and lso < hw:
            start = i
    if start is not None:
        yield start, len(samples) - 1


def hanging_transactions(samples: OffsetSamples, keys: dict, threshold_s: float,
                         t_first: int | None = None) -> list[Finding]:
    out = []
    t0 = t_first if t_first is not None else min((s[0][0] for s in samples.by_key.values() if s), default=0)
    for k, ss in samples.by_key.items():
        for a, b in _stretches(ss):
            (ta, lso, hw_a), (tb, _, hw_b) = ss[a], ss[b]
            quiet = samples.quiet(ta, tb)
            if quiet < threshold_s:
                continue
            data = {"key": k, "offset": lso, "since_s": round((ta - t0) / 1e9, 3),
                    "stood_s": round((tb - ta) / 1e9, 3), "stood_after_faults_s": round(quiet, 3),
                    "high_watermark": [hw_a, hw_b], "standing_at_end": b == len(ss) - 1,
                    "threshold_s": threshold_s}
            refs = []
            ks = keys.get(k)
            v = ks.off2val.get(lso) if ks is not None else None
            w = ks.writer.get(v) if v is not None else None
            if w is not None:
                data["writer"] = w >> CODE_BITS
                refs.append(ref(w >> CODE_BITS, k, lso))
            out.append(Finding(HANGING, data, refs))
    return out


def stalls_at_end(samples: OffsetSamples) -> list[dict]:
    out = []
    for k, ss in samples.by_key.items():
        if not ss or ss[-1][1] >= ss[-1][2]:
            continue
        a = max(i for i, _ in _stretches(ss))
        out.append({"key": k, "lso": ss[-1][1], "high_watermark": ss[-1][2],
                    "stood_s": round((ss[-1][0] - ss[a][0]) / 1e9, 3)})
    return out
