"""The Python daemon of a local `eoslab analyze` session: PySpark's own, imported from files.

Spark starts its Python workers' daemon with PySpark's zip archives first on
the path (SPARK_HOME/python/lib/pyspark.zip and py4j-*.zip). Python compiles
every module it imports from a zip anew (no bytecode cache there) and re-reads
the archives' directories whenever a worker invalidates the import caches:
CPU-seconds per job spent before any run is read. A pip-installed PySpark
(SPARK_HOME is then the `pyspark` package itself) ships those archives inside
the very package it installs, so the same release is also on the path as
files, with their bytecode cached.

Guarantees: run as `python -m pipeline.spark_daemon ARGS` (Spark's
`spark.python.daemon.module`, which pipeline.session sets for local masters
only), it removes from sys.path each archive that lies inside the installed
package it duplicates (`pyspark.zip` inside the installed `pyspark`'s
python/lib, `py4j-*.zip` beside it when `py4j` is installed too) and then
runs `pyspark.daemon` as `__main__` with the same ARGS — exactly what Spark
runs otherwise. An archive from anywhere else (a Spark distribution's
SPARK_HOME) stays where it is. Before that, `preload()` imports the modules
every task of `eoslab analyze` imports (PRELOAD: the executor code, pyarrow,
numpy, the checker), so the workers the daemon forks start with them instead
of each importing them again (about 0.4 CPU-s per worker); it imports
nothing that imports pandas and asks pyarrow nothing, so a worker can still
keep pyarrow from pandas (pipeline.executors.arrow_without_pandas). A module
that cannot be imported is left to the worker (which then fails as before).
"""
from __future__ import annotations

import os
import runpy
import sys
from importlib import import_module
from importlib.machinery import PathFinder

PRELOAD = ("pipeline.executors", "pipeline.latency", "pyarrow.compute", "numpy", "checker.kafka",
           "checker.kafka.source", "checker.result", "checker.history")


def _installed(name: str, path: list[str]) -> str | None:
    """The directory of package `name` found on `path` (files only), or None."""
    spec = PathFinder.find_spec(name, path)
    if spec is None or not spec.submodule_search_locations:
        return None
    return os.path.realpath(list(spec.submodule_search_locations)[0])


def files_first(path: list[str]) -> list[str]:
    """`path` without the PySpark archives that duplicate the installed PySpark (see above)."""
    plain = [p for p in path if not p.endswith(".zip")]
    pyspark = _installed("pyspark", plain)
    if pyspark is None:
        return list(path)
    lib = os.path.join(pyspark, "python", "lib")
    has_py4j = _installed("py4j", plain) is not None
    out = []
    for p in path:
        real = os.path.realpath(p) if p.endswith(".zip") else None
        if real and os.path.dirname(real) == lib:
            base = os.path.basename(real)
            if base == "pyspark.zip" or (has_py4j and base.startswith("py4j-")):
                continue
        out.append(p)
    return out


def preload() -> list[str]:
    """Import PRELOAD; the names imported."""
    done = []
    for name in PRELOAD:
        try:
            import_module(name)
            done.append(name)
        except Exception:  # noqa: BLE001 - the worker imports it again and reports what fails
            pass
    return done


if __name__ == "__main__":
    sys.path[:] = files_first(sys.path)
    preload()
    sys.argv[0] = "pyspark.daemon"
    runpy.run_module("pyspark.daemon", run_name="__main__", alter_sys=True)
