"""Stand-ins for two of Kafka's Java command-line tools, `kafka-topics.sh` and `kafka-acls.sh`, for the
options librdkafka's test suite passes them (its `test_kafka_topics` / `test_kafka_cmd`). Kafka's
distribution cannot be fetched on the machines the lab runs on, so these speak the same options over
the Kafka protocol through a real client's admin API (confluent-kafka's AdminClient), as Kafka's
TopicCommand and AclCommand do through theirs.

Guarantees:
- `topics`: `--create --topic T [--partitions N] [--replication-factor N] [--config k=v]...` (CreateTopics,
  waited for, as TopicCommand waits), `--alter --topic T --partitions N` (CreatePartitions), `--delete
  --topic T` (DeleteTopics), `--list`;
- `acls`: `--add` / `--remove [--force]` with `--allow-principal` / `--deny-principal`, `--allow-host` /
  `--deny-host` (default `*`, AclCommand's), `--operation` (Kafka's names, repeatable, default All),
  one of `--topic`, `--group`, `--transactional-id`, `--cluster`, and `--resource-pattern-type`
  (literal or prefixed); every principal x host x operation is one binding (CreateAcls), a removal
  deletes exactly those bindings (DeleteAcls);
- `topics` takes `--bootstrap-server` (Kafka 3.0's tools) or `--zookeeper host:port` (before 3.0,
  where librdkafka passes it): the stand-in then reads the brokers' registrations in that ZooKeeper
  (`/brokers/ids/<id>`, whose `endpoints` name each broker's Kafka listener, as Kafka's registrations
  do) and goes on through the admin API, where Kafka's TopicCommand wrote the topic's znodes itself;
  `acls` takes `--bootstrap-server` only. An option outside this set, a ZooKeeper without live
  brokers, or a broker's refusal, is one line on stderr and exit status 1, as a user reads from
  Kafka's tools.

Usage: python tools/kafka_tools.py topics|acls [Kafka's options]. The conformance runner writes
`bin/kafka-topics.sh` and `bin/kafka-acls.sh` calling this under the KAFKA_PATH it gives the tests.
"""
from __future__ import annotations

import argparse
import sys

TIMEOUT_S = 30.0
ZK_TIMEOUT_S = 10.0
OPERATIONS = ("All", "Read", "Write", "Create", "Delete", "Alter", "Describe", "ClusterAction",
              "DescribeConfigs", "AlterConfigs", "IdempotentWrite")


class ToolError(Exception):
    pass


def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient
    # log_level 3: librdkafka's errors only (its informational lines, e.g. at close, are not the tool's output)
    return AdminClient({"bootstrap.servers": bootstrap, "socket.timeout.ms": int(TIMEOUT_S * 1000),
                        "log_level": 3})


def _wait(futures: dict) -> None:
    for key, fut in futures.items():
        try:
            fut.result(TIMEOUT_S)
        except Exception as e:  # noqa: BLE001 - the broker's refusal, reported as one line
            raise ToolError(f"{key}: {e.args[0] if e.args else e}") from None


def brokers_from_zookeeper(connect: str) -> str:
    """host:port,... of the live brokers' Kafka listeners, from their registrations in ZooKeeper."""
    import json
    import logging

    from kazoo.client import KazooClient
    from kazoo.exceptions import NoNodeError
    logging.getLogger("kazoo").addHandler(logging.NullHandler())    # its retries are not the tool's output
    logging.getLogger("kazoo").propagate = False
    zk = KazooClient(hosts=connect, timeout=ZK_TIMEOUT_S)
    try:
        zk.start(timeout=ZK_TIMEOUT_S)
    except Exception as e:  # noqa: BLE001 - kazoo's timeout: one line
        raise ToolError(f"cannot reach ZooKeeper at {connect}: {e}") from None
    try:
        out = []
        for child in sorted(zk.get_children("/brokers/ids")):
            try:
                data, _ = zk.get(f"/brokers/ids/{child}")
            except NoNodeError:                       # a broker that went away meanwhile
                continue
            for ep in json.loads(data.decode() or "{}").get("endpoints") or []:
                proto, _, addr = str(ep).partition("://")
                if proto == "PLAINTEXT" and addr:
                    out.append(addr)
    except NoNodeError:
        out = []
    finally:
        zk.stop()
        zk.close()
    if not out:
        raise ToolError(f"no broker with a Kafka listener is registered in ZooKeeper at {connect}")
    return ",".join(out)


def topics(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="kafka-topics.sh")
    ap.add_argument("--bootstrap-server")
    ap.add_argument("--zookeeper")
    action = ap.add_mutually_exclusive_group(required=True)
    for name in ("--create", "--alter", "--delete", "--list"):
        action.add_argument(name, action="store_true")
    ap.add_argument("--topic")
    ap.add_argument("--partitions", type=int)
    ap.add_argument("--replication-factor", type=int)
    ap.add_argument("--config", action="append", default=[])
    a = ap.parse_args(argv)
    if bool(a.zookeeper) == bool(a.bootstrap_server):
        raise ToolError("exactly one of --bootstrap-server and --zookeeper is required")
    from confluent_kafka.admin import NewPartitions, NewTopic
    admin = _admin(a.bootstrap_server or brokers_from_zookeeper(a.zookeeper))
    if a.list:
        print("\n".join(sorted(admin.list_topics(timeout=TIMEOUT_S).topics)))
        return
    if not a.topic:
        raise ToolError("--topic is required")
    if a.create:
        configs = dict(c.split("=", 1) for c in a.config if "=" in c)
        if len(configs) != len(a.config):
            raise ToolError(f"--config takes key=value, not {a.config}")
        _wait(admin.create_topics([NewTopic(a.topic, a.partitions or -1, a.replication_factor or -1,
                                            config=configs)], operation_timeout=TIMEOUT_S))
        print(f"Created topic {a.topic}.")
    elif a.alter:
        if a.partitions is None:
            raise ToolError("--alter takes --partitions here")
        _wait(admin.create_partitions([NewPartitions(a.topic, a.partitions)], operation_timeout=TIMEOUT_S))
    else:
        _wait(admin.delete_topics([a.topic], operation_timeout=TIMEOUT_S))


def acls(argv: list[str]) -> None:
    ap = argparse.ArgumentParser(prog="kafka-acls.sh")
    ap.add_argument("--bootstrap-server", required=True)
    action = ap.add_mutually_exclusive_group(required=True)
    action.add_argument("--add", action="store_true")
    action.add_argument("--remove", action="store_true")
    ap.add_argument("--force", action="store_true")
    for name in ("--allow-principal", "--deny-principal", "--allow-host", "--deny-host", "--operation"):
        ap.add_argument(name, action="append", default=[])
    resource = ap.add_mutually_exclusive_group(required=True)
    for name in ("--topic", "--group", "--transactional-id"):
        resource.add_argument(name)
    resource.add_argument("--cluster", action="store_true")
    ap.add_argument("--resource-pattern-type", default="literal", choices=("literal", "prefixed"))
    a = ap.parse_args(argv)
    from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                       ResourcePatternType, ResourceType)
    if a.topic is not None:
        rtype, rname = ResourceType.TOPIC, a.topic
    elif a.group is not None:
        rtype, rname = ResourceType.GROUP, a.group
    elif a.transactional_id is not None:
        rtype, rname = ResourceType.TRANSACTIONAL_ID, a.transactional_id
    else:
        rtype, rname = ResourceType.BROKER, "kafka-cluster"
    pattern = ResourcePatternType.LITERAL if a.resource_pattern_type == "literal" else ResourcePatternType.PREFIXED
    ops = []
    for op in a.operation or ["All"]:
        match = [o for o in OPERATIONS if o.lower() == op.lower()]
        if not match:
            raise ToolError(f"unknown operation {op}; one of {', '.join(OPERATIONS)}")
        ops.append(getattr(AclOperation, "".join("_" + c if c.isupper() and i else c
                                                 for i, c in enumerate(match[0])).upper()))
    grants = [(p, h, AclPermissionType.ALLOW) for p in a.allow_principal for h in (a.allow_host or ["*"])] + \
             [(p, h, AclPermissionType.DENY) for p in a.deny_principal for h in (a.deny_host or ["*"])]
    if not grants:
        raise ToolError("--allow-principal or --deny-principal is required")
    admin = _admin(a.bootstrap_server)
    if a.add:
        bindings = [AclBinding(rtype, rname, pattern, p, h, op, perm) for p, h, perm in grants for op in ops]
        _wait(admin.create_acls(bindings, request_timeout=TIMEOUT_S))
    else:
        filters = [AclBindingFilter(rtype, rname, pattern, p, h, op, perm) for p, h, perm in grants for op in ops]
        _wait(admin.delete_acls(filters, request_timeout=TIMEOUT_S))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    tools = {"topics": topics, "acls": acls}
    if not argv or argv[0] not in tools:
        print("usage: kafka_tools.py topics|acls [options]", file=sys.stderr)
        return 2
    try:
        tools[argv[0]](argv[1:])
    except ToolError as e:
        print(f"Error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
