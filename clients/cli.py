"""`eoslab produce` and `eoslab consume`: the clients on the command line.

Guarantees: `produce` creates the topic when needed, sends N records and
prints one JSON summary with `acked` and `errors`; `consume --json` prints
every record of every partition from the start, one JSON object per line.
An unreachable cluster or a bad argument is one line on stderr, exit 2.
"""
from __future__ import annotations

import json
import sys
import time

from eoslab.cli import CliError
from eoslab import argtypes


def register(sub) -> None:
    p = sub.add_parser("produce", help="send N records to a topic")
    p.add_argument("--bootstrap", required=True, help="HOST:PORT of a broker")
    p.add_argument("--topic", required=True)
    p.add_argument("--count", type=argtypes.nonnegative_int, required=True)
    p.add_argument("--partitions", type=argtypes.int_range(1, 10000), default=1,
                   help="partitions when the topic is created")
    p.add_argument("--acks", choices=["all", "1", "0", "-1"], default="all")
    p.add_argument("--idempotent", action="store_true", help="enable.idempotence=true")
    p.add_argument("--size", type=argtypes.int_range(0, 64 << 20), default=100, help="bytes per record value")
    p.add_argument("--connect-timeout", type=argtypes.float_range(0, 86400, low_open=True), default=10.0,
                   help="seconds to keep trying when no bootstrap address answers yet")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="producer setting by Kafka name, e.g. max.in.flight.requests.per.connection=1")
    p.set_defaults(func=cmd_produce)
    c = sub.add_parser("consume", help="print every record of a topic from the start")
    c.add_argument("--bootstrap", required=True)
    c.add_argument("--topic", required=True)
    c.add_argument("--json", action="store_true", help="one JSON object per record")
    c.add_argument("--timeout", type=argtypes.float_range(0, 86400, low_open=True), default=30.0)
    c.add_argument("--connect-timeout", type=argtypes.float_range(0, 86400, low_open=True), default=10.0,
                   help="seconds to keep trying when no bootstrap address answers yet")
    c.set_defaults(func=cmd_consume)


def _props(items: list[str]) -> dict[str, str]:
    out = {}
    for it in items:
        if "=" not in it:
            raise CliError(f"--set expects KEY=VALUE, got {it!r}")
        k, v = it.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def cmd_produce(args) -> int:
    from clients.admin import create_topic
    from eoslab.common.errors import KafkaError
    from clients.metadata import ClusterMetadata
    from clients.producer import KafkaProducer, ProducerConfig
    if args.count < 0:
        raise CliError("--count must not be negative")
    if args.partitions < 1:
        raise CliError("--partitions must be at least 1")
    props = {"acks": args.acks, "enable.idempotence": "true" if args.idempotent else "false"}
    props.update(_props(args.set))
    try:
        config = ProducerConfig.from_props(props)
        md = ClusterMetadata(args.bootstrap)
    except ValueError as e:
        raise CliError(str(e)) from None
    try:
        md.wait_for_cluster(args.connect_timeout)
        create_topic(md, args.topic, args.partitions)
    except KafkaError as e:
        raise CliError(f"cannot create topic {args.topic!r}: {e}") from None
    finally:
        md.close()
    t0 = time.monotonic()
    errors: dict[str, int] = {}
    acked = 0
    producer = KafkaProducer(args.bootstrap, config)
    try:
        futures = []
        for i in range(args.count):
            value = (b"%d:" % i).ljust(args.size, b"x")[:max(args.size, len(b"%d:" % i))]
            futures.append(producer.send(args.topic, value))
        producer.flush()
        for f in futures:
            exc = f.exception()
            if exc is None:
                acked += 1
            else:
                key = getattr(exc, "name", type(exc).__name__)
                errors[key] = errors.get(key, 0) + 1
    except KafkaError as e:
        raise CliError(str(e)) from None
    finally:
        producer.close()
    elapsed = time.monotonic() - t0
    print(json.dumps({"topic": args.topic, "sent": args.count, "acked": acked, "errors": errors,
                      "seconds": round(elapsed, 3), "producer": producer.metrics()}))
    return 0 if not errors else 1


def cmd_consume(args) -> int:
    from clients.consumer import KafkaConsumer
    from eoslab.common.errors import KafkaError
    try:
        consumer = KafkaConsumer(args.bootstrap)
    except ValueError as e:
        raise CliError(str(e)) from None
    try:
        consumer.metadata.wait_for_cluster(args.connect_timeout, [args.topic])
        n = consumer.metadata.partitions_for(args.topic)
        if n is None:
            raise CliError(f"topic {args.topic!r} does not exist")
        records = consumer.read_all([(args.topic, p) for p in range(n)], timeout=args.timeout)
    except KafkaError as e:
        raise CliError(str(e)) from None
    finally:
        consumer.close()
    out = sys.stdout
    for r in records:
        value = r.value.decode("utf-8", "backslashreplace") if r.value is not None else None
        if args.json:
            out.write(json.dumps({"partition": r.partition, "offset": r.offset, "value": value}) + "\n")
        else:
            out.write(f"{r.partition}\t{r.offset}\t{value}\n")
    return 0
