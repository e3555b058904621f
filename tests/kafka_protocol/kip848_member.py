"""A child process for the consumer-group-protocol tests: one librdkafka consumer with
`group.protocol=consumer` subscribes to a topic and prints its assignment as a JSON line each time it
changes, until it is killed (the test's crashed member: no leave is sent)."""
import json
import sys

from confluent_kafka import Consumer


def main(boot: str, topic: str, group: str) -> None:
    c = Consumer({"bootstrap.servers": boot, "group.id": group, "group.protocol": "consumer",
                  "client.id": "crasher", "auto.offset.reset": "earliest"})
    c.subscribe([topic])
    last = None
    while True:
        c.poll(0.1)
        now = sorted(p.partition for p in c.assignment())
        if now != last:
            print(json.dumps(now), flush=True)
            last = now


if __name__ == "__main__":
    main(*sys.argv[1:4])
