"""`eoslab transactions list|describe|describe-producers|find-hanging|abort`: Kafka's kafka-transactions.sh
(KIP-664) against the lab, over Kafka's protocol.

Guarantees: the arguments, columns, find-hanging rule and abort spec are
those of Kafka's tools/.../TransactionsCommand.java: the table is Kafka's
ToolsUtils.prettyPrintTable (each cell padded to its column's width and
followed by a tab); find-hanging takes the open transactions (DescribeProducers)
whose producer last wrote more than --max-transaction-timeout minutes ago and
keeps those whose producer id has no transactional id (ListTransactions), whose
id is unknown to its coordinator (DescribeTransactions), or whose coordinator
does not list the partition in the transaction; abort by --start-offset takes
the producer whose open transaction starts there (coordinator epoch -1 read
as 0), abort by --producer-id needs --producer-epoch and --coordinator-epoch
(negative read as 0). Every request goes to the brokers' and coordinators'
Kafka listeners through kafka-python's KafkaAdminClient. A bad argument or a
cluster that does not answer is one line on stderr and exit status 1 (2 for
what argparse refuses), as kafka-transactions.sh.
"""
from __future__ import annotations

import logging
import os
import re
import time

from eoslab.cli import CliError

DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN = 15


def register(sub) -> None:
    p = sub.add_parser("transactions", help="analyze and fix transactional state (Kafka's kafka-transactions.sh)",
                       description="This tool is used to analyze the transactional state of producers in the "
                                   "cluster. It can be used to detect and recover from hanging transactions.")
    p.add_argument("--command-config", metavar="FILE", default=None,
                   help="property file containing configs to be passed to admin client (Kafka's names: "
                        "client.id, request.timeout.ms, ...)")
    p.add_argument("--bootstrap-server", required=True, metavar="host:port",
                   help="a Kafka listener of the cluster (kafka_bootstrap), host:port[,host:port...]")
    tsub = p.add_subparsers(dest="transactions_command", required=True, metavar="COMMAND",
                            parser_class=type(p))
    ls = tsub.add_parser("list", help="list transactions")
    ls.add_argument("--duration-filter", type=int, default=None,
                    help="Duration (in millis) to filter by: if < 0, all transactions will be returned; "
                         "otherwise, only transactions running longer than this duration will be returned")
    ds = tsub.add_parser("describe", help="describe the state of an active transactional-id")
    ds.add_argument("--transactional-id", required=True)
    dp = tsub.add_parser("describe-producers", help="describe the states of active producers for a topic partition")
    dp.add_argument("--broker-id", type=int, default=None,
                    help="optional broker id to describe the producer state on a specific replica")
    dp.add_argument("--topic", required=True)
    dp.add_argument("--partition", type=int, required=True)
    ab = tsub.add_parser("abort", help="abort a hanging transaction (requires administrative privileges)")
    ab.add_argument("--topic", required=True)
    ab.add_argument("--partition", type=int, required=True)
    ab.add_argument("--start-offset", type=int, default=None, help="start offset of the transaction to abort")
    ab.add_argument("--producer-id", type=int, default=None)
    ab.add_argument("--producer-epoch", type=int, default=None)
    ab.add_argument("--coordinator-epoch", type=int, default=None)
    fh = tsub.add_parser("find-hanging", help="find hanging transactions")
    fh.add_argument("--broker-id", type=int, default=None, help="broker id to search for hanging transactions")
    fh.add_argument("--max-transaction-timeout", type=int, default=DEFAULT_MAX_TRANSACTION_TIMEOUT_MIN,
                    help="maximum transaction timeout in minutes to limit the scope of the search "
                         "(15 minutes by default)")
    fh.add_argument("--topic", default=None, help="topic name to limit search to (required if --partition is "
                                                  "specified)")
    fh.add_argument("--partition", type=int, default=None)
    p.set_defaults(func=cmd_transactions)


def pretty_table(headers: list[str], rows: list[list[str]]) -> str:
    """Kafka's ToolsUtils.prettyPrintTable: every cell padded to its column's width, then a tab."""
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]
    return "".join("".join(c.ljust(w) + "\t" for c, w in zip(row, widths)) + "\n" for row in [headers] + rows)


def fail(message: str, cause: Exception | None = None):
    if cause is not None:
        message = f"{message}: {str(cause).splitlines()[0] if str(cause) else type(cause).__name__}"
    raise CliError(message, code=1)


def load_properties(path: str) -> dict[str, str]:
    """A Java properties file's lines: the key ends at the first '=', ':' or blank; # and ! start
    comments."""
    out = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                line = line.strip()
                if not line or line[0] in "#!":
                    continue
                m = re.match(r"([^=:\s]+)\s*[=:\s]?\s*(.*)$", line)
                out[m.group(1)] = m.group(2)
    except OSError as e:
        fail("Failed to load admin client properties", e)
    return out


def admin_client(bootstrap: str, command_config: str | None = None):
    from kafka import KafkaAdminClient
    if not os.environ.get("EOSLAB_DEBUG"):
        logging.getLogger("kafka").setLevel(logging.CRITICAL)   # its warnings are not the user's one line
    config = {"client_id": "eoslab-transactions", "request_timeout_ms": 30000, "bootstrap_timeout_ms": 15000}
    for k, v in (load_properties(command_config) if command_config else {}).items():
        config[k.replace(".", "_")] = int(v) if v.lstrip("-").isdigit() else v    # kafka-python's names
    config["bootstrap_servers"] = bootstrap.split(",")
    try:
        return KafkaAdminClient(**config)
    except Exception as e:  # noqa: BLE001 - kafka-python raises several kinds for a cluster that is not there
        fail(f"cannot reach the cluster at {bootstrap}", e)


def cmd_transactions(args) -> int:
    command = {"list": list_transactions, "describe": describe, "describe-producers": describe_producers,
               "abort": abort, "find-hanging": find_hanging}[args.transactions_command]
    check = {"abort": check_abort, "find-hanging": check_find_hanging}.get(args.transactions_command)
    if check is not None:
        check(args)                         # before connecting, as Kafka's tool refuses its input
    admin = admin_client(args.bootstrap_server, args.command_config)
    try:
        out = command(admin, args)
    finally:
        admin.close()
    if out:
        print(out, end="")
    return 0


def now_ms() -> int:
    return int(time.time() * 1000)


def tp_name(tp) -> str:
    return f"{tp.topic}-{tp.partition}"


# -- list, describe, describe-producers ---------------------------------------------------------------
def list_transactions(admin, args) -> str:
    try:
        by_node = admin.list_transactions(duration_filter_ms=args.duration_filter)
    except Exception as e:  # noqa: BLE001
        fail("Failed to list transactions", e)
    rows = [[t.transactional_id, str(node), str(t.producer_id), t.state.value]
            for node, listings in sorted(by_node.items()) for t in listings]
    return pretty_table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows)


def describe(admin, args) -> str:
    tid = args.transactional_id
    try:
        d = admin.describe_transactions([tid])[tid]
    except Exception as e:  # noqa: BLE001
        fail(f"Failed to describe transaction state of transactional-id `{tid}`", e)
    started = d.transaction_start_time_ms >= 0
    row = [str(d.coordinator_id), tid, str(d.producer_id), str(d.producer_epoch), d.state.value,
           str(d.transaction_timeout_ms), str(d.transaction_start_time_ms) if started else "None",
           str(now_ms() - d.transaction_start_time_ms) if started else "None",
           ",".join(tp_name(tp) for tp in sorted(d.topic_partitions))]
    return pretty_table(["CoordinatorId", "TransactionalId", "ProducerId", "ProducerEpoch", "TransactionState",
                         "TransactionTimeoutMs", "CurrentTransactionStartTimeMs", "TransactionDurationMs",
                         "TopicPartitions"], [row])


def producer_states(admin, tps: list, broker_id: int | None, what: str) -> dict:
    try:
        return admin.describe_producers(tps, broker_id=broker_id)
    except Exception as e:  # noqa: BLE001
        fail(what, e)


def describe_producers(admin, args) -> str:
    from kafka.structs import TopicPartition
    tp = TopicPartition(args.topic, args.partition)
    where = f"broker {args.broker_id}" if args.broker_id is not None else "leader"
    state = producer_states(admin, [tp], args.broker_id,
                            f"Failed to describe producers for partition {tp_name(tp)} on {where}")[tp]
    rows = [[str(s.producer_id), str(s.producer_epoch), str(s.coordinator_epoch if s.coordinator_epoch >= 0 else -1),
             str(s.last_sequence), str(s.last_timestamp),
             str(s.current_transaction_start_offset) if s.current_transaction_start_offset >= 0 else "None"]
            for s in state.active_producers]
    return pretty_table(["ProducerId", "ProducerEpoch", "LatestCoordinatorEpoch", "LastSequence", "LastTimestamp",
                         "CurrentTransactionStartOffset"], rows)


# -- abort ---------------------------------------------------------------------------------------------
def check_abort(args) -> None:
    if args.start_offset is None and args.producer_id is None:
        fail("The transaction to abort must be identified either with --start-offset (for brokers on 3.0 or "
             "above) or with --producer-id, --producer-epoch, and --coordinator-epoch (for older brokers)")
    if args.start_offset is None:
        if args.producer_epoch is None:
            fail("Missing required argument --producer-epoch")
        if args.coordinator_epoch is None:
            fail("Missing required argument --coordinator-epoch")


def abort(admin, args) -> str:
    from kafka.admin._transactions import AbortTransactionSpec
    from kafka.structs import TopicPartition
    tp = TopicPartition(args.topic, args.partition)
    if args.start_offset is None:
        # a transaction begun by a new producer id that hung before its first marker shows coordinator
        # epoch -1 in DescribeProducers: 0 is at most any real one (Kafka's tool does the same)
        spec = AbortTransactionSpec(tp, args.producer_id, args.producer_epoch, max(0, args.coordinator_epoch))
    else:
        state = producer_states(admin, [tp], None, f"Failed to validate producer state for partition {tp_name(tp)}")
        found = [s for s in state[tp].active_producers if s.current_transaction_start_offset == args.start_offset]
        if not found:
            fail(f"Could not find any open transactions starting at offset {args.start_offset} on partition "
                 f"{tp_name(tp)}")
        s = found[0]
        spec = AbortTransactionSpec(tp, s.producer_id, s.producer_epoch, max(0, s.coordinator_epoch))
    try:
        admin.abort_transaction(spec)
    except Exception as e:  # noqa: BLE001
        fail(f"Failed to abort transaction {spec_text(spec)}", e)
    return ""


def spec_text(spec) -> str:
    return (f"AbortTransactionSpec(topicPartition={tp_name(spec.topic_partition)}, producerId={spec.producer_id}, "
            f"producerEpoch={spec.producer_epoch}, coordinatorEpoch={spec.coordinator_epoch})")


# -- find-hanging ----------------------------------------------------------------------------------------
def check_find_hanging(args) -> None:
    if args.topic is None and args.broker_id is None:
        fail("The `find-hanging` command requires either --topic or --broker-id to limit the scope of the search")
    if args.partition is not None and args.topic is None:
        fail("The --partition argument requires --topic to be provided")


def partitions_to_search(admin, args) -> list:
    from kafka.structs import TopicPartition
    if args.topic is not None and args.partition is not None:
        return [TopicPartition(args.topic, args.partition)]
    try:
        topics = [args.topic] if args.topic is not None else admin.list_topics()
        described = admin.describe_topics(topics)
    except Exception as e:  # noqa: BLE001
        fail("Failed to describe topics", e)
    out = []
    for t in described:
        if t.get("error_code", 0):
            fail(f"Failed to describe topic {t['name']}: error code {t['error_code']}")
        for p in t["partitions"]:
            if args.broker_id is None or args.broker_id in p["replica_nodes"]:
                out.append(TopicPartition(t["name"], p["partition_index"]))
    return sorted(out)


def find_hanging(admin, args) -> str:
    headers = ["Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
               "LastTimestamp", "Duration(min)"]
    max_timeout_ms = args.max_transaction_timeout * 60000
    tps = partitions_to_search(admin, args)
    candidates = []
    now = now_ms()
    for i in range(0, len(tps), 500):                   # Kafka's MAX_BATCH_SIZE
        states = producer_states(admin, tps[i:i + 500], args.broker_id,
                                 f"Failed to describe producers for {len(tps[i:i + 500])} partitions on broker "
                                 f"{args.broker_id if args.broker_id is not None else 'Optional.empty'}")
        for tp, st in states.items():
            for s in st.active_producers:
                if s.current_transaction_start_offset >= 0 and now - s.last_timestamp > max_timeout_ms:
                    candidates.append((tp, s))
    hanging = []
    if candidates:
        pids = sorted({s.producer_id for _, s in candidates})
        try:
            listed = admin.list_transactions(producer_id_filters=pids)
        except Exception as e:  # noqa: BLE001
            fail(f"Failed to list transactions for {len(pids)} producers", e)
        tids = {t.producer_id: t.transactional_id for ls in listed.values() for t in ls if t.producer_id in pids}
        descriptions = {tid: describe_or_none(admin, tid) for tid in set(tids.values())}
        for tp, s in candidates:
            tid = tids.get(s.producer_id)
            d = descriptions.get(tid) if tid is not None else None
            if d is None or tp not in d.topic_partitions:
                hanging.append((tp, s))
    now = now_ms()
    rows = [[tp.topic, str(tp.partition), str(s.producer_id), str(s.producer_epoch),
             str(s.coordinator_epoch if s.coordinator_epoch >= 0 else -1), str(s.current_transaction_start_offset),
             str(s.last_timestamp), str((now - s.last_timestamp) // 60000)] for tp, s in hanging]
    return pretty_table(headers, rows)


def describe_or_none(admin, tid: str):
    """The id's description, or None when its coordinator does not know it (TRANSACTIONAL_ID_NOT_FOUND)."""
    from kafka import errors
    try:
        return admin.describe_transactions([tid])[tid]
    except errors.TransactionalIdNotFoundError:
        return None
    except Exception as e:  # noqa: BLE001
        fail("Failed to describe 1 transactions", e)
