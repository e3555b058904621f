"""Time series for the report, gathered while a checker streams the history.

Guarantees: `SeriesCollector.feed(op)` (a dict or an `Op`) keeps, per
completed client op, five numbers in typed arrays (start, end, process row,
type, f), so a 1,000,000-op history costs tens of MiB, never op objects.
Times are the history's `time` (ns) shown in seconds from the first op; a
history without times uses op positions instead (`time_unit` says which).

Fault intervals come from nemesis ops (process "nemesis"); an action counts
when its completion (info/ok) arrives:
- `start-X` opens fault X and `stop-X` closes it (`start_X` / `stop_X` too);
- the pairs partition/heal, pause/resume, kill/restart, kill/start (a
  `start` closes an open `kill`), start/stop (Jepsen's generic nemesis);
- any other nemesis op is a fault lasting from its invoke to its completion.
A fault still open at the end lasts to the end of the history.
The offsets monitor's samples (process "monitor", f "offsets": each
partition's last stable offset and high watermark) are kept per partition.
"""
from __future__ import annotations

from array import array
from bisect import bisect_left
from typing import Any, Iterable, Iterator

from checker.history import Op

NEMESIS = "nemesis"
MONITOR = "monitor"          # the run's offsets monitor: LSO and high watermark samples
TYPE_CODE = {"ok": 0, "fail": 1, "info": 2}
CLOSES = {"heal": ("partition",), "resume": ("pause",), "restart": ("kill",),
          "start": ("kill",), "stop": ("start",), "recover": ("crash",)}
OPENS = {"partition", "pause", "kill", "start", "crash"}


def _fault_action(f: str) -> tuple[str, str] | None:
    """('open'|'close', fault name) for a start-X / stop-X style f, else None."""
    for prefix, what in (("start-", "open"), ("start_", "open"), ("stop-", "close"), ("stop_", "close")):
        if f.startswith(prefix) and len(f) > len(prefix):
            return what, f[len(prefix):]
    return None


class SeriesCollector:
    def __init__(self) -> None:
        self.start = array("q")      # invoke time of each completed client op
        self.end = array("q")        # completion time
        self.row = array("l")        # process row
        self.kind = array("b")       # 0 ok, 1 fail, 2 info
        self.fcode = array("b")      # f row (index into self.fs)
        self.cidx = array("q")       # completion op index
        self.iidx = array("q")       # invoke op index
        self.procs: dict[Any, int] = {}
        self.fs: dict[str, int] = {}
        self.pending: dict[Any, tuple[int, int]] = {}
        self.faults: list[tuple[int, int, str, bool]] = []   # (start, end, name, open-ended)
        self._open: dict[str, list[int]] = {}
        self._nem_pending: dict[str, int] = {}
        self.t_first: int | None = None     # earliest time seen (times need not be monotonic)
        self.t_last: int | None = None      # latest time seen
        self.time_unit = "s"
        self._no_time = False
        self.unseen_t = array("d")
        self.unseen_n = array("q")
        self.offsets: dict[str, list[tuple[int, int, int]]] = {}   # key -> [(time, lso, hw)] (monitor)
        self.n = 0

    # ------------------------------------------------------------------ input
    def feed(self, d: dict | Op) -> None:
        if isinstance(d, Op):
            p, t, f, idx, tm = d.process, d.type, d.f, d.index, d.time
        else:
            p, t, f, idx, tm = d["process"], d["type"], d["f"], d["index"], d.get("time")
        if type(p) is not int and type(p) is not str:
            p = repr(p)
        if type(f) is not str:
            f = str(f)
        if tm is not None and type(tm) is not int:
            tm = int(tm) if isinstance(tm, float) else None
        self.n += 1
        if self.n == 1 and tm is None:
            self._no_time = True
            self.time_unit = "op"
        if self._no_time:
            tm = idx
        elif tm is None:
            tm = self.t_last if self.t_last is not None else 0
        if self.t_first is None or tm < self.t_first:
            self.t_first = tm
        if self.t_last is None or tm > self.t_last:
            self.t_last = tm
        if p == NEMESIS:
            self._nemesis(t, str(f), tm)
            return
        if p == MONITOR and f == "offsets":
            self._offsets(d.value if isinstance(d, Op) else d.get("value"), tm)
            return
        if t == "invoke":
            self.pending[p] = (tm, idx)
            return
        inv = self.pending.pop(p, None)
        if inv is None:
            return
        row = self.procs.get(p)
        if row is None:
            row = self.procs[p] = len(self.procs)
        fc = self.fs.get(f)
        if fc is None:
            fc = self.fs[f] = len(self.fs) if len(self.fs) < 127 else 126
        self.start.append(inv[0])
        self.end.append(tm)
        self.row.append(row)
        self.kind.append(TYPE_CODE.get(t, 2))
        self.fcode.append(fc)
        self.cidx.append(idx)
        self.iidx.append(inv[1])

    def _offsets(self, value: Any, tm: int) -> None:
        """A sample of the run's offsets monitor: [[key, lso, hw], ...]."""
        if type(value) is not list:
            return
        for item in value:
            if type(item) is list and len(item) == 3 and type(item[1]) is int and type(item[2]) is int:
                self.offsets.setdefault(str(item[0]), []).append((tm, item[1], item[2]))

    def tee(self, ops: Iterable[Any]) -> Iterator[Any]:
        """Pass ops through, feeding each to the collector."""
        for op in ops:
            self.feed(op)
            yield op

    def _nemesis(self, t: str, f: str, tm: int) -> None:
        if t == "invoke":
            self._nem_pending[f] = tm
            return
        t_inv = self._nem_pending.pop(f, tm)
        act = _fault_action(f)
        if act is not None:
            what, name = act
            if what == "open":
                self._open.setdefault(name, []).append(tm)
            else:
                self._close((name,), tm, f)
            return
        if f in CLOSES and self._close(CLOSES[f], tm, f):
            return
        if f in OPENS:
            self._open.setdefault(f, []).append(tm)
            return
        self.faults.append((t_inv, tm, f, False))

    def _close(self, names: tuple, tm: int, f: str) -> bool:
        for name in names:
            stack = self._open.get(name)
            if stack:
                self.faults.append((stack.pop(), tm, name, False))
                return True
        return False

    def set_unseen(self, times_s: array, counts: array) -> None:
        self.unseen_t, self.unseen_n = times_s, counts

    # ------------------------------------------------------------------ output
    def all_faults(self) -> list[tuple[int, int, str, bool]]:
        out = list(self.faults)
        end = self.t_last if self.t_last is not None else 0
        for name, stack in self._open.items():
            out += [(s, end, name, True) for s in stack]
        return sorted(out)

    def seconds(self, tm: float) -> float:
        base = self.t_first or 0
        return (tm - base) / 1e9 if self.time_unit == "s" else float(tm - base)

    def unseen_points(self) -> list[tuple[float, int]]:
        """(time in report units, unseen records) samples from the Kafka analysis."""
        base = self.t_first or 0
        if self.time_unit == "s":
            return [(t - base / 1e9, n) for t, n in zip(self.unseen_t, self.unseen_n)]
        return [(t - base, n) for t, n in zip(self.unseen_t, self.unseen_n)]

    def time_of_index(self, idx: int) -> float | None:
        """Time (report units) of the op with this index, completion or invoke."""
        j = bisect_left(self.cidx, idx)
        if j < len(self.cidx) and self.cidx[j] == idx:
            return self.seconds(self.end[j])
        for j in range(len(self.iidx)):
            if self.iidx[j] == idx:
                return self.seconds(self.start[j])
        return None
