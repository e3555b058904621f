"""Command line of the lazy filesystem.

Guarantees: `mount BACKING MOUNTPOINT --control SOCKET` runs the filesystem in the foreground
until it is unmounted (printing `ready` once live; exit 0), or exits 2 with one line on
stderr when FUSE is unavailable here; `ctl SOCKET OP [...]` sends one control request and
prints its JSON result (exit 1 with the error otherwise); `cleanup ROOT` unmounts every
lazyfs mount under ROOT and prints each one.
"""
from __future__ import annotations

import argparse
import json
import sys

from cluster.lazyfs.control import LazyFs, LazyFsError, cleanup_stale, request


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m cluster.lazyfs", description=__doc__.splitlines()[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("mount", help="mount BACKING at MOUNTPOINT (foreground)")
    m.add_argument("backing")
    m.add_argument("mountpoint")
    m.add_argument("--control", required=True, help="path of the control Unix socket")
    c = sub.add_parser("ctl", help="send a control request")
    c.add_argument("socket")
    c.add_argument("op", choices=["status", "sync-all", "lose-unsynced", "torn-write", "corrupt", "ping"])
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--ordered", action="store_true", help="torn-write: keep earlier unsynced writes")
    c.add_argument("--path")
    c.add_argument("--offset", type=int)
    c.add_argument("--length", type=int)
    k = sub.add_parser("cleanup", help="unmount every lazyfs mount under ROOT")
    k.add_argument("root")
    a = p.parse_args(argv)

    if a.cmd == "mount":
        reason = LazyFs.available()
        if reason:
            print(reason, file=sys.stderr)
            return 2
        from cluster.lazyfs.fs import run
        return run(a.backing, a.mountpoint, a.control)
    if a.cmd == "ctl":
        req: dict = {"op": a.op}
        if a.op == "torn-write":
            req.update(seed=a.seed, ordered=a.ordered)
        elif a.op == "corrupt":
            if a.path is None or a.offset is None or a.length is None:
                p.error("corrupt needs --path, --offset and --length (and --seed)")
            req.update(path=a.path, offset=a.offset, length=a.length, seed=a.seed)
        try:
            print(json.dumps(request(a.socket, req), indent=1, sort_keys=True))
        except LazyFsError as e:
            print(e, file=sys.stderr)
            return 1
        return 0
    for mp in cleanup_stale(a.root):
        print(f"unmounted {mp}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
