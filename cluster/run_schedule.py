"""`eoslab run --schedule FILE`: play exactly the given faults instead of drawing them from the seed.

Guarantees: `load(path, time_limit)` reads a JSON list of {"at", "package",
"duration"} (the shape of run.json's "schedule"; a whole run.json is accepted
too, its "schedule" is taken) and returns the events in order, or raises
ValueError with one readable line: a file that is not there or not JSON, an
entry that is not an object with a known package (the lab's own, or the
`known` packages a caller plays, such as `eoslab app run`'s app faults), a finite "at" >= 0 before
the time limit and a finite "duration" > 0, or "at" going backwards. An
empty list is a run without faults. `events(cfg)` is the schedule a run
plays: the file's when cfg.schedule_file is set, else the one drawn from
the seed (cluster.nemesis.schedule).
"""
from __future__ import annotations

import json
import math

from cluster import nemesis as nem


def load(path: str, time_limit: float | None = None, known=None) -> list[nem.Event]:
    known = nem.PACKAGES if known is None else known
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        raise ValueError(f"--schedule {path}: {e.strerror or e}") from None
    except ValueError as e:
        raise ValueError(f"--schedule {path}: not JSON ({e})") from None
    if isinstance(data, dict) and isinstance(data.get("schedule"), list):
        data = data["schedule"]             # a run.json: its schedule
    if not isinstance(data, list):
        raise ValueError(f"--schedule {path}: expected a JSON list of {{\"at\", \"package\", \"duration\"}} "  # noqa: TRY004
                         f"(as run.json's \"schedule\"), got {type(data).__name__}")
    out: list[nem.Event] = []
    for i, e in enumerate(data):
        where = f"--schedule {path}: event {i}"
        if not isinstance(e, dict) or not {"at", "package", "duration"} <= set(e):
            raise ValueError(f"{where}: expected an object with \"at\", \"package\" and \"duration\", got {e!r}"[:300])
        extra = set(e) - {"at", "package", "duration"}
        if extra:
            raise ValueError(f"{where}: unknown key(s) {', '.join(sorted(map(str, extra)))}")
        pkg, at, d = e["package"], e["at"], e["duration"]
        if not isinstance(pkg, str) or pkg not in known:
            raise ValueError(f"{where}: unknown fault package {pkg!r} (known: {', '.join(sorted(known))})")
        for k, v in (("at", at), ("duration", d)):
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v):
                raise ValueError(f"{where}: \"{k}\" must be a finite number of seconds, got {v!r}")
        if at < 0 or d <= 0:
            raise ValueError(f"{where}: needs \"at\" >= 0 and \"duration\" > 0 (got at={at}, duration={d})")
        if out and at < out[-1].at:
            raise ValueError(f"{where}: \"at\" {at} is before the previous event's {out[-1].at}: "
                             "list the events in the order they start")
        if time_limit is not None and at >= time_limit:
            raise ValueError(f"{where}: starts at {at} s, not before the time limit ({time_limit:g} s)")
        out.append(nem.Event(float(at), pkg, float(d)))
    return out


def packages(events: list[nem.Event]) -> list[str]:
    """The fault packages a schedule uses, in the order they first appear."""
    return list(dict.fromkeys(e.package for e in events))


def played_packages(cfg) -> list[str]:
    """Every fault package a run may play: its --nemesis names and its schedule file's."""
    names = list(cfg.nemesis)
    if getattr(cfg, "schedule_file", None):
        names += packages(load(cfg.schedule_file, cfg.time_limit))
    return names


def events(cfg) -> list[nem.Event]:
    """The schedule the run plays: the file's, else the one drawn from the seed."""
    if getattr(cfg, "schedule_file", None):
        return load(cfg.schedule_file, cfg.time_limit)
    return nem.schedule([n for n in cfg.nemesis if n != "none"], cfg.time_limit, cfg.seed)
