#!/usr/bin/env bash
# Makes sure a Docker engine runs on this machine, so CI exercises the container path.
#
# Guarantees: exits 0 only when `/usr/bin/docker info` answers (an engine runs);
# otherwise exits non-zero with one line on stderr saying why. When no engine
# answers and we are root, it installs Debian's docker.io (if dockerd is
# missing) and starts dockerd in the background, logging to $DOCKERD_LOG.
# Always uses Debian's client /usr/bin/docker: another `docker` on PATH may be
# newer than this daemon's API. Idempotent: a running engine is left alone.
set -uo pipefail

DOCKER=/usr/bin/docker
DOCKERD_LOG=${DOCKERD_LOG:-/var/log/eoslab-dockerd.log}
WAIT_S=${DOCKER_ENGINE_WAIT_S:-60}

die() { echo "docker-engine: $*" >&2; exit 1; }
engine_up() { [ -x "$DOCKER" ] && "$DOCKER" info >/dev/null 2>&1; }

engine_up && { echo "docker-engine: engine running ($("$DOCKER" version -f '{{.Server.Version}}' 2>/dev/null))"; exit 0; }

[ "$(id -u)" -eq 0 ] || die "no Docker engine answers and starting one needs root"

if ! command -v dockerd >/dev/null 2>&1 || [ ! -x "$DOCKER" ]; then
  echo "docker-engine: installing Debian's docker.io"
  apt-get update -qq >/dev/null 2>&1 || die "apt-get update failed (is Debian's mirror reachable?)"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io iptables >/dev/null 2>&1 \
    || die "apt-get install docker.io failed"
fi

if ! pgrep -x dockerd >/dev/null 2>&1; then
  echo "docker-engine: starting dockerd (log: $DOCKERD_LOG)"
  # containerd comes with docker.io; dockerd starts its own when none runs.
  nohup dockerd >>"$DOCKERD_LOG" 2>&1 </dev/null &
fi

for _ in $(seq "$WAIT_S"); do
  engine_up && { echo "docker-engine: engine running ($("$DOCKER" version -f '{{.Server.Version}}' 2>/dev/null))"; exit 0; }
  sleep 1
done
reason=$(grep -iE 'level=(fatal|error)|failed' "$DOCKERD_LOG" 2>/dev/null | tail -1)
die "dockerd did not answer within ${WAIT_S}s${reason:+: $reason}"
