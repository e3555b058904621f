"""A child for tests/cluster/test_remote.py: `python -m tests.cluster.remote_child MODE`.

ok: invoke send, complete ok; then a checkpoint; then invoke poll and exit with it open.
stop: invoke until the parent says stop (counts how many it got to run).
"""
import sys

from cluster.workloads.remote import ChildRecorder


def main() -> None:
    rec = ChildRecorder()
    if sys.argv[1] == "ok":
        if rec.invoke("send", [["send", 0, 1]]):
            rec.complete("ok", "send", [["send", 0, [0, 1]]], seq=[0])
        rec.checkpoint("middle")
        if rec.invoke("poll", [["poll"]]):
            sys.exit(3)                       # dies with the poll open
    else:
        n = 0
        while rec.invoke("send", [["send", 0, 100 + n]]):
            rec.complete("info", "send", [["send", 0, [None, 100 + n]]])
            n += 1


if __name__ == "__main__":
    main()
