"""A class-data-sharing archive for the driver's JVM: Spark's classes mapped from a file, not loaded.

Guarantees: `driver_options()` returns extra JVM options for a local driver:
- `-XX:SharedArchiveFile=A` when the archive A made for this Java, this
  PySpark and these JVM options exists (Spark's start then costs about half
  the JVM's CPU);
- otherwise, with `write` (the caller will call `finish`),
  `-XX:ArchiveClassesAtExit=A.<pid>.tmp`, and `finish(proc)` —
  called with the JVM's process once the session has stopped — ends the JVM
  (its stdin closed, as when Python exits), waits for it to write the
  archive, and renames the file to A only when the JVM exited with status 0;
  else removes it. A truncated archive would crash the next JVM that maps
  it, so an archive is never used before its writer has finished.
Archives live in EOSLAB_SPARK_CDS_DIR (default ~/.cache/eoslab/spark-cds);
EOSLAB_SPARK_CDS=0 turns the whole thing off. The JVM ignores an archive
from another Java or class path (CDS's own checks; its log lines are off).
Any OS error means no options: the JVM then starts as it would without.
"""
from __future__ import annotations

import glob
import hashlib
import os
import shutil
import subprocess
import time

QUIET = "-Xlog:cds=off,cds+dynamic=off"


def _java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    return os.path.realpath(java) if java and os.path.exists(java) else None


def archive_path(jvm_options: str) -> str | None:
    """Where this Java + PySpark + JVM options keep their archive (None: no Java found)."""
    try:
        import pyspark
    except ImportError:
        return None
    java = _java()
    if java is None:
        return None
    st = os.stat(java)
    key = hashlib.sha1("\0".join([pyspark.__version__, os.path.dirname(pyspark.__file__), java,
                                  str(st.st_mtime_ns), jvm_options]).encode()).hexdigest()[:16]
    base = os.environ.get("EOSLAB_SPARK_CDS_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "eoslab",
                                                                    "spark-cds")
    return os.path.join(base, f"spark-{pyspark.__version__}-{key}.jsa")


_pending: list[tuple[str, str]] = []         # (tmp, final) this process's JVM is to write


def driver_options(jvm_options: str, write: bool = True) -> str:
    if os.environ.get("EOSLAB_SPARK_CDS", "1") == "0":
        return ""
    try:
        final = archive_path(jvm_options)
        if final is None:
            return ""
        if os.path.exists(final):
            return f"-XX:SharedArchiveFile={final} {QUIET}"
        if not write:
            return ""
        os.makedirs(os.path.dirname(final), exist_ok=True)
        for old in glob.glob(final + ".*.tmp"):     # left by a start that never finished
            if time.time() - os.path.getmtime(old) > 3600:
                os.unlink(old)
        tmp = f"{final}.{os.getpid()}.tmp"
        _pending.append((tmp, final))
        return f"-XX:ArchiveClassesAtExit={tmp} {QUIET}"
    except OSError:
        return ""


def finish(proc, timeout: float = 120.0) -> bool:
    """End the stopped session's JVM and keep the archive it writes; True when one was kept."""
    if not _pending:
        return False
    tmp, final = _pending.pop()
    try:
        if proc is not None:
            if proc.stdin is not None:
                proc.stdin.close()
            code = proc.wait(timeout)
            if code == 0 and os.path.getsize(tmp) > 0:
                os.replace(tmp, final)
                return True
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        os.unlink(tmp)
    except OSError:
        pass
    return False
