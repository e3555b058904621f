"""The pipeline's Spark plumbing without a Spark job: the progress line, the daemon path's archives and
preloads, the class archive's writer."""
from __future__ import annotations

import os

import pytest

from tests.pipeline.test_units import _fresh_python

pytestmark = pytest.mark.fast


class _Tracker:
    def __init__(self, done, total):
        self.done, self.total = done, total

    def getActiveStageIds(self):
        return [7]

    def getStageInfo(self, _sid):
        return type("Info", (), {"numCompletedTasks": self.done, "numTasks": self.total})()


def test_progress_counts_runs_finer_than_tasks():
    """A stage of few large tasks still moves: the line counts runs written, the bar follows them."""
    import io

    from pipeline.session import Progress
    sc = type("SC", (), {"statusTracker": lambda self: _Tracker(1, 4), "setJobDescription": lambda self, d: None})()
    counts = iter([120, 600, 5000])
    p = Progress(type("S", (), {"sparkContext": sc})(), "check", io.StringIO(),
                 units=("runs", 1000, lambda: next(counts)))
    p._poll()
    assert "120/1000 runs, 1/4 tasks" in p.line() and "[##   " in p.line()
    p._last_count = 0
    p._poll()
    assert "600/1000 runs" in p.line() and "#" * 14 in p.line()
    p._last_count = 0
    p._poll()
    assert "1000/1000 runs" in p.line()                 # never above the total
    plain = Progress(type("S", (), {"sparkContext": sc})(), "aggregate", io.StringIO())
    plain._poll()
    assert "1/4 tasks" in plain.line() and "runs" not in plain.line()


def test_progress_off_a_terminal_asks_spark_only_when_a_line_is_due():
    """Off a terminal a line is printed soon after the start and then once per period: the
    tracker (Py4J calls into the JVM) is asked only for those lines, not every interval."""
    import io
    import time

    from pipeline.session import Progress
    asked = []
    sc = type("SC", (), {"statusTracker": lambda self: asked.append(1) or _Tracker(1, 4),
                         "setJobDescription": lambda self, d: None})()
    out = io.StringIO()
    with Progress(type("S", (), {"sparkContext": sc})(), "check", out, interval=0.01, period=3600):
        deadline = time.monotonic() + 10
        while not asked and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.3)                                   # 30 intervals: no further poll is due
    assert len(asked) == 1
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and "1/4 tasks" in lines[0] and lines[1].startswith("[check] done in")


def test_daemon_path_drops_only_archives_the_installed_pyspark_ships(tmp_path):
    """pipeline.spark_daemon: pyspark.zip (and py4j's zip, when py4j is installed too) go when
    they lie inside the installed pyspark package; an archive from another SPARK_HOME, other
    entries and the order stay; with no installed pyspark the path is left as it is."""
    from pipeline.spark_daemon import files_first
    site = tmp_path / "site"
    lib = site / "pyspark" / "python" / "lib"
    lib.mkdir(parents=True)
    (site / "pyspark" / "__init__.py").write_text("")
    home = tmp_path / "spark-3" / "python" / "lib"
    home.mkdir(parents=True)
    for z in (lib / "pyspark.zip", lib / "py4j-0.10.9.9-src.zip", home / "pyspark.zip"):
        z.write_bytes(b"")
    mine, py4j, other = str(lib / "pyspark.zip"), str(lib / "py4j-0.10.9.9-src.zip"), str(home / "pyspark.zip")
    assert files_first([mine, py4j, "/nowhere", str(site)]) == [py4j, "/nowhere", str(site)]
    (site / "py4j").mkdir()
    (site / "py4j" / "__init__.py").write_text("")
    assert files_first([mine, py4j, "/nowhere", str(site)]) == ["/nowhere", str(site)]
    assert files_first([other, mine, str(site)]) == [other, str(site)]
    assert files_first([mine, py4j, "/nowhere"]) == [mine, py4j, "/nowhere"]


def test_daemon_preloads_the_executor_modules_without_pandas(tmp_path):
    """pipeline.spark_daemon.preload imports every PRELOAD module before any worker is forked,
    and neither pandas nor pyarrow's pandas probe: a worker forked after it still runs the
    executors' function without pandas (arrow_without_pandas) and writes its Parquet."""
    r = _fresh_python(tmp_path, lambda p: (
        "import os, sys\n"
        "from pipeline.spark_daemon import PRELOAD, preload\n"
        "assert preload() == list(PRELOAD) and all(m in sys.modules for m in PRELOAD)\n"
        "assert 'pandas' not in sys.modules\n"
        "pid = os.fork()\n"
        "if pid == 0:\n"
        "    from pipeline.executors import analyze_run, arrow_without_pandas\n"
        "    ok = arrow_without_pandas() is True\n"
        f"    row = analyze_run({{'run': 'r', 'history': {str(p)!r}}}, {str(tmp_path / 'a')!r})\n"
        "    ok = ok and row['problem'] is None and row['ops'] == 200 and 'pandas' not in sys.modules\n"
        "    os._exit(0 if ok else 3)\n"
        "_, status = os.waitpid(pid, 0)\n"
        "print(os.waitstatus_to_exitcode(status))\n"))
    assert r.returncode == 0 and r.stdout.split() == ["0"], r.stderr
    assert (tmp_path / "a" / "run=r" / "part-00000.parquet").is_file()


def test_class_archive_is_used_only_once_its_writer_has_finished(tmp_path, monkeypatch):
    import subprocess

    from pipeline import jvm_cds
    monkeypatch.setenv("EOSLAB_SPARK_CDS_DIR", str(tmp_path))
    if jvm_cds.archive_path("-X") is None:
        pytest.skip("no PySpark or no Java here")
    opts = jvm_cds.driver_options("-X")
    tmp = opts.split()[0].split("=", 1)[1]
    assert opts.startswith("-XX:ArchiveClassesAtExit=") and tmp.endswith(f".{os.getpid()}.tmp")
    # a writer that dies (status 1) leaves nothing behind and nothing is used
    proc = subprocess.Popen(["sh", "-c", f"cat >/dev/null; printf half > '{tmp}'; exit 1"], stdin=subprocess.PIPE)
    assert jvm_cds.finish(proc) is False and not os.listdir(tmp_path)
    assert jvm_cds.driver_options("-X").startswith("-XX:ArchiveClassesAtExit=")
    # a writer that ends well (stdin closed, status 0): its archive is kept and used from then on
    proc = subprocess.Popen(["sh", "-c", f"cat >/dev/null; printf whole > '{tmp}'"], stdin=subprocess.PIPE)
    assert jvm_cds.finish(proc) is True
    final = jvm_cds.archive_path("-X")
    assert os.listdir(tmp_path) == [os.path.basename(final)]
    assert jvm_cds.driver_options("-X").startswith(f"-XX:SharedArchiveFile={final} ")
    assert jvm_cds.archive_path("-Y") != final                       # other JVM options, other archive
    monkeypatch.setenv("EOSLAB_SPARK_CDS", "0")
    assert jvm_cds.driver_options("-X") == ""
