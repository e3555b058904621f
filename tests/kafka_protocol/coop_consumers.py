"""A child process for the group tests: librdkafka consumers with `partition.assignment.strategy` from
argv subscribe to a topic one after another, and the process prints, as one JSON line, what each read
and its last assignment. Run apart from pytest because a librdkafka crash (a NULL dereference in its
cooperative assignor when the coordinator rewrites metadata) would take the test process down."""
import json
import sys
import time

from confluent_kafka import Consumer


def main(boot: str, topic: str, group: str, strategy: str, members: int, expect: int) -> None:
    consumers, seen = [], {}
    deadline = time.monotonic() + 90
    for i in range(members):
        consumers.append(Consumer({"bootstrap.servers": boot, "group.id": group, "client.id": f"c{i}",
                                   "partition.assignment.strategy": strategy, "auto.offset.reset": "earliest",
                                   "enable.auto.commit": True, "auto.commit.interval.ms": 200,
                                   "session.timeout.ms": 10000, "heartbeat.interval.ms": 500}))
        consumers[-1].subscribe([topic])
        joined = time.monotonic() + 60
        while time.monotonic() < min(joined, deadline):     # poll everyone until the newcomer has partitions
            for j, c in enumerate(consumers):
                m = c.poll(0.05)
                if m is not None and not m.error():
                    seen.setdefault(m.value().decode(), []).append(j)
            if consumers[-1].assignment() and (i < members - 1 or len(seen) >= expect):
                break
    settle = time.monotonic() + 3
    while time.monotonic() < min(settle, deadline):
        for j, c in enumerate(consumers):
            m = c.poll(0.05)
            if m is not None and not m.error():
                seen.setdefault(m.value().decode(), []).append(j)
    out = {"assignments": [sorted(tp.partition for tp in c.assignment()) for c in consumers],
           "read": len(seen), "by": {str(j): sum(1 for v in seen.values() if j in v) for j in range(members)}}
    for c in consumers:
        c.close()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
