"""What every workload shares: the outcome of an error, settings, client threads, final reads.

Guarantees:
- `outcome(exc)` is the one place a workload turns an exception into a
  history type: "fail" exactly when it is a KafkaError that the errors table
  (eoslab.common.errors.DEFINITE) calls definite and no earlier attempt of the same
  request went unanswered (`maybe_applied`, set by the coordinator client
  when it retried after a lost connection: an answer to the retry says
  nothing about the attempt that got none); "info" for everything else
  (timeouts, lost connections, unknown errors).
- Workload settings (`workload.*` in `eoslab run --set`) and consumer settings
  (`isolation.level`) are checked when the workload is built: an unknown name
  or a bad value is a ValueError with one readable line.
- `final_read` reads partitions from their beginning up to their end offsets
  at the given isolation level and records every fetch as an ok poll with
  `"final": true`; at read_committed it first waits (bounded) until no
  transaction is open on them (last stable offset == high watermark), so
  every committed record lies below the end it reads to. It reports the
  partitions that never became stable.
- A thread started with `spawn` that dies with an exception (anything its
  own code did not handle) leaves a note in the history (`History.note`,
  f "lab-error", kind "thread": its name, the exception and its traceback)
  and is listed in `crashed`: the run ends as a lab error, never as a
  verdict about Kafka. An op it had open stays open (indeterminate, as
  Jepsen reads an invoke without completion).
"""
from __future__ import annotations

import itertools
import threading
import time
import traceback

from clients.consumer import KafkaConsumer
from eoslab.common.errors import KafkaError

ISOLATIONS = ("read_committed", "read_uncommitted")


def outcome(exc: BaseException) -> tuple[str, str]:
    """("fail" | "info", error name) for an exception an operation ended with."""
    if isinstance(exc, KafkaError):
        definite = exc.definite and not getattr(exc, "maybe_applied", False)
        return ("fail" if definite else "info"), exc.name
    return "info", type(exc).__name__


def cause(producer, exc: BaseException) -> str:
    """The error name to record: for a transaction made abort-only by a failed send, that send's error."""
    name = outcome(exc)[1]
    inner = producer.transaction_manager.abortable_error if name == "TRANSACTION_ABORTABLE" else None
    return f"{name}:{outcome(inner)[1]}" if inner is not None else name


def producer_field(pid: int, epoch: int, session: str, transactional_id: str | None) -> dict:
    return {"pid": pid, "epoch": epoch, "session": session, "transactional_id": transactional_id}


def parse_options(name: str, spec: dict, given: dict | None) -> dict:
    """Workload options: spec is {option: (type, default)}; given comes from `--set workload.X=V`."""
    out = {k: d for k, (_, d) in spec.items()}
    for k, raw in (given or {}).items():
        if k not in spec:
            known = ", ".join(sorted(spec)) or "none"
            raise ValueError(f"unknown setting workload.{k} for the {name} workload (known: {known})")
        typ, _ = spec[k]
        if isinstance(typ, tuple):
            if raw not in typ:
                raise ValueError(f"workload.{k} must be one of {', '.join(typ)}, got {raw!r}")
            out[k] = raw
            continue
        try:
            out[k] = typ(raw)
        except (TypeError, ValueError):
            raise ValueError(f"workload.{k}: expected {typ.__name__}, got {raw!r}") from None
        if typ in (int, float) and out[k] < 0:
            raise ValueError(f"workload.{k} must not be negative")
    return out


def parse_consumer(props: dict | None) -> dict:
    out = {"isolation.level": "read_committed"}
    for k, v in (props or {}).items():
        if k != "isolation.level":
            raise ValueError(f"unknown consumer setting {k!r} (known: isolation.level)")
        if v not in ISOLATIONS:
            raise ValueError(f"isolation.level must be read_committed or read_uncommitted, got {v!r}")
        out[k] = v
    return out


class Workload:
    """Common state and the thread plumbing; subclasses write the ops."""

    name = ""
    transactional = False          # the cluster needs transaction coordinators
    strict_unseen = False          # the checker counts unseen records as anomalies
    controller_args: tuple = ()    # extra controller flags the workload needs (local runtime)
    OPTIONS: dict = {}

    def __init__(self, bootstrap: str, history, seed: int, topic: str = "wl", partitions: int = 3,
                 concurrency: int = 4, producer_props: dict | None = None, topic_configs: dict | None = None,
                 replication_factor: int = 0, op_timeout: float = 10.0, consumer_props: dict | None = None,
                 options: dict | None = None, runtime=None):
        self.bootstrap = bootstrap
        self.history = history
        self.seed = seed
        self.topic = topic
        self.partitions = partitions
        self.concurrency = concurrency
        self.producer_props = dict(producer_props or {})
        self.topic_configs = dict(topic_configs or {})
        self.replication_factor = replication_factor
        self.op_timeout = op_timeout
        self.consumer = parse_consumer(consumer_props)
        self.isolation = self.consumer["isolation.level"]
        self.options = self.check_options(parse_options(self.name, self.OPTIONS, options))
        self.runtime = runtime
        self.values = itertools.count(1)
        self.values_lock = threading.Lock()
        self.stop = threading.Event()
        self.threads: list[threading.Thread] = []
        self.unstable: list[str] = []          # partitions with an open transaction at the final read
        self._procs = itertools.count(concurrency)
        self._procs_lock = threading.Lock()
        self.crashed: list[dict] = []          # threads that died with an exception (lab errors)

    @classmethod
    def check_options(cls, options: dict) -> dict:
        """Rules across a workload's settings (ValueError with one line); returns them."""
        return options

    # -- helpers for subclasses -------------------------------------------------------------
    def next_value(self) -> int:
        with self.values_lock:
            return next(self.values)

    def new_process(self) -> int:
        """A fresh process number (Jepsen retires a process after an indefinite op)."""
        with self._procs_lock:
            return next(self._procs)

    def spawn(self, target, *args, name: str = "client") -> threading.Thread:
        def guarded():
            try:
                target(*args)
            except BaseException as e:  # noqa: BLE001 - a dead client thread is the lab's failure: record it
                self.thread_died(name, e)

        t = threading.Thread(target=guarded, name=name, daemon=True)
        t.start()
        self.threads.append(t)
        return t

    def thread_died(self, name: str, exc: BaseException) -> dict:
        """Record that thread `name` died with `exc`: a note in the history, an entry in `crashed`."""
        lines = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip("\n").splitlines()
        err = {"kind": "thread", "thread": name, "message": f"{type(exc).__name__}: {exc}"[:500],
               "log": lines[-60:]}
        self.crashed.append(err)
        self.history.note("lab-error", err)
        return err

    def transactional_ids(self) -> list[str]:
        return []

    def client_props(self, **defaults) -> dict:
        """Producer settings: the lab's client defaults, then the workload's, then the user's (--set)."""
        props = {"linger.ms": "0", "request.timeout.ms": "3000",
                 "delivery.timeout.ms": str(int(self.op_timeout * 1000))}
        props.update({k.replace("_", "."): v for k, v in defaults.items()})
        props.update(self.producer_props)
        return props

    def halt(self, timeout: float = 60.0) -> None:
        self.stop.set()
        deadline = time.monotonic() + timeout
        for t in list(self.threads):
            t.join(max(0.1, deadline - time.monotonic()))

    def notes(self) -> dict:
        """What run.json should record about this run beyond the history."""
        return {"unstable_at_final_read": self.unstable} if self.unstable else {}


def by_key(records, key_of=lambda r: r.partition, value_of=int) -> dict:
    out: dict = {}
    for r in records:
        out.setdefault(key_of(r), []).append([r.offset, value_of(r.value)])
    return out


def wait_stable(bootstrap: str, tps: list[tuple[str, int]], timeout: float) -> list[tuple[str, int]]:
    """Wait until every partition's last stable offset equals its high watermark; the ones that did not."""
    rc = KafkaConsumer(bootstrap, isolation_level="read_committed")
    ru = KafkaConsumer(bootstrap)
    deadline = time.monotonic() + timeout
    left = list(tps)
    try:
        while left:
            try:
                a, b = rc.end_offsets(left), ru.end_offsets(left)
                left = [tp for tp in left if a[tp] < b[tp]]
            except KafkaError:
                pass
            if not left or time.monotonic() > deadline:
                break
            time.sleep(0.2)
    finally:
        rc.close()
        ru.close()
    return left


def final_read(bootstrap: str, history, keys: dict, isolation: str = "read_uncommitted",
               timeout: float = 60.0, process="final", stable_timeout: float = 30.0,
               value_of=int) -> tuple[int, list[str]]:
    """Read every partition in keys ({(topic, partition): history key}) from the beginning to its
    end offset, recorded as ok polls (each value as `value_of` makes it); returns (records read,
    partitions never stable)."""
    tps = list(keys)
    unstable = []
    if isolation == "read_committed":
        unstable = [f"{t}-{p}" for t, p in wait_stable(bootstrap, tps, stable_timeout)]
    consumer = KafkaConsumer(bootstrap, isolation_level=isolation)
    n = 0
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                consumer.assign(tps)
                consumer.seek_to_beginning(tps)
                ends = consumer.end_offsets(tps)
                break
            except KafkaError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        while any(consumer.positions[tp] < ends[tp] for tp in tps):
            if time.monotonic() > deadline:
                raise KafkaError(7, "final reads did not reach the end offsets in time")
            history.invoke(process, "poll", [["poll"]])
            records = consumer.poll(timeout_ms=500)
            history.complete(process, "ok", "poll",
                             [["poll", by_key(records, lambda r: keys[(r.topic, r.partition)], value_of)]],
                             final=True, isolation=isolation)
            n += len(records)
    finally:
        consumer.close()
    return n, unstable
