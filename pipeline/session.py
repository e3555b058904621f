"""The Spark session (or bare context) for `eoslab analyze`, and a progress line for its jobs.

Guarantees: `start(master, conf)` returns a SparkSession on `local[N]` or a
standalone master (`spark://HOST:PORT`) — with `sql=False` its bare
SparkContext, the same settings, without Spark SQL's session state (the JVM
then starts with about a CPU-second less) — with the Spark UI off, Spark's own
console progress bar off, the JVM's log level at ERROR once it runs,
partition values kept as strings, and executors running this interpreter
(PYSPARK_PYTHON, unless already set — on a cluster, the same path must exist
on the workers: the docker/spark image puts both at /opt/eoslab/bin/python).
In local mode the driver binds to 127.0.0.1 only; on a cluster it advertises
its address on the route to the master (executors connect back to it; a
container's hostname may not resolve for them). `conf` (KEY=VALUE pairs)
overrides any of these. Failure to start (no Java, bad master) raises
`SparkStartError` with one line. With `jvm_log`, the JVM's own stderr (its
start-up banner, executor and Python worker output) goes to that file, not
to the terminal. The driver's and executors' JVMs run with JVM_OPTIONS
(C1 only, serial GC) unless `conf` sets their extraJavaOptions; a local
driver also maps Spark's classes from a class-data-sharing archive
(pipeline.jvm_cds) when one exists; `write_class_archive=True` makes the
JVM write one when there is none, and then the caller must end the session
with `stop`. A local session's Python workers start from
pipeline.spark_daemon (PySpark's own daemon, its modules imported from the
installed files rather than recompiled from PySpark's zip archives, and the
analysis's modules imported once before the workers fork); a standalone
master's from PySpark's own. `context(s)` is the SparkContext of a session or
of a context. `Progress` (given either) prints, while a phase runs, one
line per update on stderr: phase, tasks done/total over the active stages
(and, given `units`, a finer count such as runs done, read at most every
2 s), elapsed seconds — rewritten in place on a terminal, otherwise once soon
after the start and then every 10 s (`period`), asking Spark only then —
and a final line when the phase ends.
"""
from __future__ import annotations

import os
import re
import socket
import sys
import threading
import time
import warnings
from typing import Callable

# The JVMs only schedule tasks and pass bytes to Python workers: the quick JIT alone (C1) and
# the serial collector do that with about half the CPU of a JVM's start-up with C2 and G1
# (docs/analysis.md has the figures)
JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
MASTER_RE = re.compile(r"^(local(\[(\*|\d+)\])?|spark://[\w.\-]+:\d+(,[\w.\-]+:\d+)*)$")


class SparkStartError(RuntimeError):
    """Spark could not start: one line for the user."""


def check_master(master: str) -> str:
    if not MASTER_RE.match(master):
        raise SparkStartError(f"--master {master!r}: expected local, local[N], local[*] or spark://HOST:PORT")
    return master


def start(master: str = "local[*]", conf: dict[str, str] | None = None, app: str = "eoslab analyze",
          jvm_log: str | None = None, write_class_archive: bool = False, sql: bool = True):
    check_master(master)
    warnings.filterwarnings("ignore", category=FutureWarning, module="pyspark")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    try:
        from pyspark import SparkConf, SparkContext
        from pyspark.sql import SparkSession
    except ImportError:
        raise SparkStartError("PySpark is not installed (pip install 'eoslab[spark]', or `make venv`)") from None
    local = master.startswith("local")
    opts = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
        "spark.sql.session.timeZone": "UTC",
        "spark.executorEnv.PYTHONWARNINGS": "ignore::FutureWarning",
        "spark.driver.extraJavaOptions": JVM_OPTIONS,
        "spark.executor.extraJavaOptions": JVM_OPTIONS,
    }
    if local:
        opts.update({"spark.driver.host": "127.0.0.1", "spark.driver.bindAddress": "127.0.0.1",
                     "spark.python.daemon.module": "pipeline.spark_daemon"})
        if "spark.driver.extraJavaOptions" not in (conf or {}):
            from pipeline.jvm_cds import driver_options
            cds = driver_options(JVM_OPTIONS, write_class_archive)
            opts["spark.driver.extraJavaOptions"] = f"{JVM_OPTIONS} {cds}".strip()
    elif "spark.driver.host" not in (conf or {}):
        host = _address_towards(master)
        if host:
            opts["spark.driver.host"] = host
    opts.update(conf or {})
    b = SparkSession.builder.master(master).appName(app)
    for k, v in opts.items():
        b = b.config(k, v)
    if not sql:
        sconf = SparkConf().setMaster(master).setAppName(app).setAll(list(opts.items()))
    prev = os.environ.get("PYTHONWARNINGS")
    os.environ["PYTHONWARNINGS"] = "ignore::FutureWarning"   # local executors inherit the driver's env
    saved = None
    if jvm_log:             # the JVM (and the Python workers it starts) keep this stderr for good
        sys.stderr.flush()
        saved = os.dup(2)
        fd = os.open(jvm_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(fd, 2)
        os.close(fd)
    try:
        spark = b.getOrCreate() if sql else SparkContext.getOrCreate(sconf)
    except Exception as e:  # noqa: BLE001 - Java missing, port taken, master unreachable
        raise SparkStartError(f"cannot start Spark on {master}: {_first_line(e)}"
                              + (f" (JVM log: {jvm_log})" if jvm_log else "")) from None
    finally:
        if saved is not None:
            os.dup2(saved, 2)
            os.close(saved)
        if prev is None:
            os.environ.pop("PYTHONWARNINGS", None)
        else:
            os.environ["PYTHONWARNINGS"] = prev
    context(spark).setLogLevel("ERROR")
    return spark


def context(spark):
    """The SparkContext of a session, or the context itself."""
    return getattr(spark, "sparkContext", spark)


def stop(spark) -> None:
    """Stop a session `start` made; a local driver's JVM is then ended and waited for, so that the
    class-data-sharing archive it writes at exit is whole before anything uses it
    (pipeline.jvm_cds)."""
    from pyspark import SparkContext

    from pipeline import jvm_cds
    gateway = SparkContext._gateway
    spark.stop()
    if jvm_cds._pending:
        jvm_cds.finish(getattr(gateway, "proc", None))
        SparkContext._gateway = None            # a later start launches a new JVM
        SparkContext._jvm = None


def _address_towards(master: str) -> str | None:
    """This machine's address on the route to the (first) master: what executors can call back.
    A UDP connect only picks the route; nothing is sent."""
    hostport = master[len("spark://"):].split(",")[0]
    host, _, port = hostport.rpartition(":")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((host, int(port)))
            return s.getsockname()[0]
    except (OSError, ValueError):
        return None


def _first_line(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Traceback", "File ", "at ", "JVM stacktrace")):
            return line[:300]
    return type(e).__name__


def spark_error(e: BaseException) -> str:
    """One line for an exception out of a Spark job (Py4J / captured errors carry pages)."""
    text = str(e)
    m = re.search(r"(\w+(Error|Exception)): (.+)", text)
    if m and m.group(1) not in ("Py4JJavaError", "PythonException"):
        return f"{m.group(1)}: {m.group(3).strip()[:300]}"
    return _first_line(e)


class Progress:
    """`with Progress(spark, "check", out=sys.stderr):` prints the phase's task progress."""

    def __init__(self, spark, phase: str, out=sys.stderr, enabled: bool = True, interval: float = 0.5,
                 units: tuple[str, int, Callable[[], int]] | None = None, period: float = 10.0):
        self.sc = context(spark)
        self.phase = phase
        self.out = out
        self.enabled = enabled
        self.interval = interval
        self.period = period                # not a terminal: a line (and a poll of Spark) this often
        self.tty = hasattr(out, "isatty") and out.isatty()
        self._stop = threading.Event()
        self._thread = None
        self.t0 = 0.0
        self.done = self.total = 0
        self.units = units                  # (name, total, count()): finer than tasks, e.g. runs written
        self.units_done = 0
        self._last_count = 0.0

    def __enter__(self):
        self.t0 = time.monotonic()
        self.sc.setJobDescription(self.phase)
        if self.enabled:
            self._thread = threading.Thread(target=self._loop, daemon=True, name=f"progress-{self.phase}")
            self._thread.start()
        return self

    def __exit__(self, exc_type, exc, tb):
        self._stop.set()
        if self._thread is not None:
            self._thread.join(2)
        self.sc.setJobDescription(None)
        if self.enabled:
            status = "done" if exc_type is None else "failed"
            end = f"[{self.phase}] {status} in {time.monotonic() - self.t0:.1f} s"
            print(("\r" + end.ljust(72)) if self.tty else end, file=self.out, flush=True)
        return False

    def _poll(self) -> None:
        st = self.sc.statusTracker()
        done = total = 0
        for sid in st.getActiveStageIds():
            info = st.getStageInfo(sid)
            if info is not None:
                done += info.numCompletedTasks
                total += info.numTasks
        self.done, self.total = done, total
        now = time.monotonic()
        if self.units and now - self._last_count >= 2:
            self._last_count = now
            self.units_done = min(self.units[2](), self.units[1])

    def line(self) -> str:
        width = 24
        if self.units and self.units[1]:
            frac = self.units_done / self.units[1]
        else:
            frac = self.done / self.total if self.total else 0.0
        bar = "#" * int(frac * width)
        tasks = f"{self.done}/{self.total} tasks" if self.total else "starting"
        if self.units:
            tasks = f"{self.units_done}/{self.units[1]} {self.units[0]}, {tasks}"
        return f"[{self.phase}] [{bar:<{width}}] {tasks}  {time.monotonic() - self.t0:6.1f} s"

    def _loop(self) -> None:
        wait = self.interval
        while not self._stop.wait(wait):
            try:
                self._poll()
            except Exception:  # noqa: BLE001 - the context may be stopping
                return
            if self.tty:
                print("\r" + self.line(), end="", file=self.out, flush=True)
            else:                           # each poll is Py4J calls into the JVM: only when a line is due
                print(self.line(), file=self.out, flush=True)
                wait = self.period
