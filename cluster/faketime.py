"""The wall clock of a local cluster's services, moved by libfaketime (the clock faults' mechanism).

Guarantees: a local cluster's services (controllers, brokers, transaction
coordinators; never ZooKeeper) run with libfaketime preloaded only when the
cluster was started for it: `enable(rt)` before `up()` (a run whose schedule
holds a clock fault does this), or $EOSLAB_FAKETIME=1 in the environment of
the process that starts it (`EOSLAB_FAKETIME=1 eoslab cluster up`); the
choice is kept in the cluster's state, so a node restarted later by another
process gets the same preload. Every other cluster's environment is
untouched.

A preloaded service reads its offset from its own control file
(CLUSTER/faketime/NODE.rc, libfaketime's FAKETIME_TIMESTAMP_FILE, "+0" when
it starts for the first time; a restarted node keeps the offset its file
holds), re-read at most once a second (FAKETIME_CACHE_DURATION=1): an offset
written with `set_offset` is in force in that service within about a second.
Only the wall clock moves (FAKETIME_DONT_FAKE_MONOTONIC=1): the monotonic
clock, which every interval rule reads, is the real one. Debian's libfaketime
0.9.10 turns an absolute sleep on the monotonic clock into an invalid one in
that mode (Python 3.11's time.sleep fails with EINVAL), so a tiny library
compiled once per eoslab home (HOME/faketime/, with the system C compiler)
is preloaded before it and sends every clock_nanosleep that is not on the
wall clock straight to the kernel; and its "forced monotonic fix" (on by
default with glibc >= 2.30) turns a timed wait on a monotonic condition
variable into one that has already expired (the GIL's 5 ms waits spin:
startup costs ten times the CPU), so it is turned off
(FAKETIME_FORCE_MONOTONIC_FIX=0). File timestamps are not faked
(NO_FAKE_STAT=1): the kernel's are reported as they are.

`check()` says in one line (FaketimeMissing) why the preload cannot work
here: no libfaketime at $EOSLAB_FAKETIME_LIB or Debian's paths, or no C
compiler for the sleep fix. `check_run(cfg)` and `prepare_run(rt, own,
packages)` are what `eoslab run` calls: the first refuses a run with a clock
fault before anything starts, the second turns the preload on for a cluster
the run starts and refuses a cluster it did not start without it.

Where a node's control file lives and how the preload is turned on is the
runtime's (`rt.clock_control_file(node)`, `rt.enable_clock()`,
`rt.clock_enabled()`): a LocalRuntime answers with this module's files and
state, a DockerRuntime with cluster.docker_clock's.

On the Docker runtime the same settings reach the services' containers
through cluster.docker_clock (the image carries libfaketime and the sleep
fix; the control files are on the host, bind-mounted); `enabled`,
`set_offset`, `offset` and `prepare_run` ask the runtime, so the clock
packages act on both alike. `python3 faketime.py sleep-fix
HOME` builds the sleep fix with no eoslab import (the image's gcc stage).
"""
from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile

LIB_ENV = "EOSLAB_FAKETIME_LIB"        # the path of libfaketimeMT.so.1 (else Debian's paths are searched)
ENABLE_ENV = "EOSLAB_FAKETIME"         # "1": a local cluster started by this process gets the preload
STATE_KEY = "faketime"
CACHE_DURATION_S = 1                   # how often a service re-reads its control file
DEBIAN_LIBS = tuple(f"/usr/lib/{arch}/faketime/libfaketimeMT.so.1"
                    for arch in ("x86_64-linux-gnu", "aarch64-linux-gnu")) + ("/usr/lib/faketime/libfaketimeMT.so.1",)

SLEEP_FIX_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
/* Sleeps on any clock but the wall clock go to the kernel as they are (the monotonic clock is not faked);
   sleeps on the wall clock go on to libfaketime, which turns a faked deadline into a real one. */
typedef int (*cns_t)(clockid_t, int, const struct timespec *, struct timespec *);
int clock_nanosleep(clockid_t id, int flags, const struct timespec *req, struct timespec *rem) {
  if (id != CLOCK_REALTIME) {
    long r = syscall(SYS_clock_nanosleep, id, flags, req, rem);
    return r == -1 ? errno : 0;
  }
  static cns_t next;
  if (!next) next = (cns_t)dlsym(RTLD_NEXT, "clock_nanosleep");
  return next(id, flags, req, rem);
}
"""


class FaketimeMissing(RuntimeError):
    """libfaketime (or the compiler for its sleep fix) is not there; the message is one line."""


def library() -> str:
    """The libfaketime (multi-threaded) library to preload, or FaketimeMissing saying where it looked."""
    given = os.environ.get(LIB_ENV)
    if given:
        if os.path.isfile(given):
            return given
        raise FaketimeMissing(f"clock faults need libfaketime, and ${LIB_ENV} names {given}, which is not "
                              "there (install Debian's libfaketime: make system-deps)")
    for path in DEBIAN_LIBS:
        if os.path.isfile(path):
            return path
    raise FaketimeMissing("clock faults need libfaketime, which is not installed (looked for "
                          f"{DEBIAN_LIBS[0]}; install it with `make system-deps` or apt-get install libfaketime)")


def sleep_fix_name() -> str:
    """The file name of the compiled sleep fix: it names the source's digest, so a stale build is never used."""
    return f"sleepfix-{hashlib.sha256(SLEEP_FIX_C.encode()).hexdigest()[:12]}.so"


def sleep_fix(home: str) -> str:
    """The compiled sleep fix in HOME/faketime/ (built once, atomically), or FaketimeMissing."""
    out = os.path.join(home, "faketime", sleep_fix_name())
    if os.path.isfile(out):
        return out
    cc = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
    if cc is None:
        raise FaketimeMissing("clock faults need a C compiler (cc) to build libfaketime's sleep fix; "
                              "install gcc (make system-deps)")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with tempfile.TemporaryDirectory(dir=os.path.dirname(out)) as tmp:
        src, so = os.path.join(tmp, "sleepfix.c"), os.path.join(tmp, "sleepfix.so")
        with open(src, "w") as f:
            f.write(SLEEP_FIX_C)
        r = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", so, src, "-ldl"], capture_output=True, text=True,
                           check=False)
        if r.returncode != 0:
            first = (r.stderr.strip().splitlines() or ["no output"])[0]
            raise FaketimeMissing(f"clock faults: building libfaketime's sleep fix with {cc} failed: {first}")
        os.replace(so, out)
    return out


def check(home: str | None = None) -> tuple[str, str]:
    """(library, sleep fix) when the preload can work here; FaketimeMissing with one line otherwise."""
    lib = library()
    return lib, sleep_fix(home or _default_home())


def _default_home() -> str:
    from cluster.local import default_home
    return default_home()


def _home_of(rt) -> str:
    return os.path.dirname(os.path.dirname(rt.dir))          # HOME/clusters/NAME


def enable(rt) -> None:
    """Preload libfaketime into the services this (not yet started) local cluster starts."""
    check(_home_of(rt))
    rt.state[STATE_KEY] = True


def enabled(rt) -> bool:
    """Whether this cluster's services get the preload (the runtime says: `rt.clock_enabled()`)."""
    return rt.clock_enabled()


def local_enabled(rt) -> bool:
    """A local cluster's answer: its state says so, or $EOSLAB_FAKETIME=1 (kept in its state)."""
    if os.environ.get(ENABLE_ENV) == "1":
        rt.state[STATE_KEY] = True                            # kept: a later restart by anyone gets it too
    return bool(rt.state.get(STATE_KEY))


def control_file(cluster_dir: str, node: str) -> str:
    return os.path.join(cluster_dir, "faketime", f"{node}.rc")


def spawn_env(rt, node: str) -> dict[str, str]:
    """The environment a preloaded service starts with; its control file is made ("+0") if missing."""
    lib, fix = check(_home_of(rt))
    path = control_file(rt.dir, node)
    if not os.path.exists(path):
        _write(path, "+0")
    return {"LD_PRELOAD": f"{fix} {lib}", "FAKETIME_TIMESTAMP_FILE": path,
            "FAKETIME_CACHE_DURATION": str(CACHE_DURATION_S), "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            "FAKETIME_FORCE_MONOTONIC_FIX": "0", "NO_FAKE_STAT": "1"}


def clean_env(env: dict[str, str]) -> None:
    """Drop libfaketime settings a service must not inherit from the process that starts it."""
    for k in [k for k in env if k.startswith("FAKETIME")]:
        del env[k]


def set_offset(rt, node: str, seconds: int) -> None:
    """The node's wall clock runs `seconds` ahead (negative: behind) of the real one, from its next re-read."""
    if not enabled(rt):
        raise RuntimeError(f"cluster {rt.cluster_name!r} was started without the clock preload")
    _write(rt.clock_control_file(node), f"{int(seconds):+d}")


def offset(rt, node: str) -> int:
    """The offset the node's control file holds (0 when it has none)."""
    try:
        with open(rt.clock_control_file(node)) as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def _write(path: str, text: str) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w") as f:
        f.write(text + "\n")
    os.replace(tmp, path)                                     # a service never reads half a line


def clock_packages(names) -> list[str]:
    from cluster.nemesis_clock import CLOCK_PACKAGES
    return sorted({n for n in names if n in CLOCK_PACKAGES})


def check_run(cfg) -> None:
    """ValueError with one line when a run's faults include a clock fault that cannot run here."""
    from cluster.run_schedule import played_packages
    wanted = clock_packages(played_packages(cfg))
    if not wanted:
        return
    if cfg.runtime not in ("local", "docker", "auto"):
        raise ValueError(f"{', '.join(wanted)}: clock faults need the local or the docker runtime, not {cfg.runtime}")
    try:
        if cfg.runtime == "local":
            check()
        elif cfg.runtime == "docker":
            _check_docker_image()
    except FaketimeMissing as e:
        raise ValueError(f"{', '.join(wanted)}: {e}") from None


def _check_docker_image() -> None:
    """The image the docker runtime would start carries libfaketime (FaketimeMissing otherwise); with no
    engine answering, or no docker SDK, nothing is said here: opening the runtime says it."""
    from cluster import docker_engine as eng
    from cluster.runtimes import images
    if not eng.engine_status(2.0)[0]:
        return
    try:
        import docker
        client = docker.DockerClient(base_url=f"unix://{eng.SOCKET}", version="auto", timeout=60)
    except Exception:  # noqa: BLE001 - ImportError, DockerException: the runtime refuses in its own words
        return
    from cluster import docker_clock
    try:
        docker_clock.check_image(client, images()[0])
    finally:
        client.close()


def prepare_run(rt, own: bool, names) -> None:
    """Before the run's cluster starts: the preload on when the run plays a clock fault (ValueError when
    the runtime is not local, or a cluster the run did not start has no preload)."""
    from cluster.runtime import Unsupported
    wanted = clock_packages(names)
    if not wanted:
        return
    if own:
        try:
            rt.enable_clock()
        except (FaketimeMissing, Unsupported) as e:
            raise ValueError(f"{', '.join(wanted)}: {e}") from None
    elif not enabled(rt):
        raise ValueError(f"{', '.join(wanted)}: cluster {rt.cluster_name!r} was started without the clock "
                         f"preload (start it with {ENABLE_ENV}=1 eoslab cluster up, or let the run start one)")


if __name__ == "__main__":      # the image's build: `python3 faketime.py sleep-fix HOME` (no eoslab imports)
    import sys
    if sys.argv[1:2] != ["sleep-fix"] or len(sys.argv) != 3:
        sys.exit("usage: faketime.py sleep-fix HOME   (builds HOME/faketime/sleepfix-DIGEST.so)")
    try:
        print(sleep_fix(sys.argv[2]))
    except FaketimeMissing as e:
        sys.exit(str(e))
