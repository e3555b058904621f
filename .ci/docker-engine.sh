#!/usr/bin/env bash
# Makes sure a Docker engine runs on this machine, so CI exercises the container path.
#
# Guarantees: exits 0 only when `/usr/bin/docker info` answers (an engine runs);
# otherwise exits non-zero with one line on stderr saying why. When no engine
# answers and we are root, it installs Debian's docker.io (if dockerd is
# missing) and starts dockerd in its own session (setsid), logging to
# $DOCKERD_LOG: killing the process group of whoever started it (a test run,
# a CI job, a shell) must not take the engine down with it. A dockerd that
# exits at start is retried once after removing a stale pid file. Concurrent
# callers are serialised by a lock, so only one dockerd is ever started.
# Always uses Debian's client /usr/bin/docker: another `docker` on PATH may be
# newer than this daemon's API. Idempotent: a running engine is left alone.
set -uo pipefail

DOCKER=/usr/bin/docker
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/eoslab-dockerd.log}
WAIT_S=${DOCKER_ENGINE_WAIT_S:-60}
LOCK=${DOCKER_ENGINE_LOCK:-/run/lock/eoslab-docker-engine.lock}

die() { echo "docker-engine: $*" >&2; exit 1; }
engine_up() { [ -x "$DOCKER" ] && timeout 10 "$DOCKER" info >/dev/null 2>&1; }
running() { echo "docker-engine: engine running ($("$DOCKER" version -f '{{.Server.Version}}' 2>/dev/null))"; exit 0; }

engine_up && running
[ "$(id -u)" -eq 0 ] || die "no Docker engine answers and starting one needs root"

mkdir -p "$(dirname "$LOCK")"
exec 9>"$LOCK"
flock -w 600 9 || die "another caller held $LOCK for 10 minutes"
engine_up && running        # someone else started it while we waited for the lock

if ! command -v dockerd >/dev/null 2>&1 || [ ! -x "$DOCKER" ]; then
  echo "docker-engine: installing Debian's docker.io"
  apt-get update -qq >/dev/null 2>&1 || die "apt-get update failed (is Debian's mirror reachable?)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io iptables >/dev/null 2>&1 \
    || die "apt-get install docker.io failed"
fi

start_dockerd() {
  # A dockerd killed with SIGKILL leaves its pid file; if that pid is reused, a new dockerd refuses to start.
  if ! pgrep -x dockerd >/dev/null 2>&1; then
    rm -f /var/run/docker.pid
    echo "docker-engine: starting dockerd (log: $DOCKERD_LOG)"
    # containerd comes with docker.io; dockerd starts its own when none runs.
    # --live-restore: containers keep running while the engine restarts.
    setsid nohup dockerd --live-restore >>"$DOCKERD_LOG" 2>&1 </dev/null 9>&- &
  fi
}

for attempt in 1 2; do
  start_dockerd
  for _ in $(seq "$WAIT_S"); do
    sleep 1
    engine_up && running
    pgrep -x dockerd >/dev/null 2>&1 || break     # it exited: retry once, then give up
  done
done
reason=$(grep -iE 'level=(fatal|error)|failed' "$DOCKERD_LOG" 2>/dev/null | tail -1)
die "dockerd did not answer within ${WAIT_S}s${reason:+: $reason}"
