#!/usr/bin/env bash
# Builds the image `eoslab/base:bookworm` from Debian's packages, for machines
# that cannot pull python:3.11-slim: debootstrap a minimal bookworm into a
# folder, trim it, `docker import` it.
#
# Guarantees: the image has python3 (3.11) reachable as `python` and
# `python3`, `python -m venv` with pip (so the Dockerfile's build stage works
# as on python:3.11-slim), iptables and iproute2 (tc) for the fault sidecar,
# Debian's libfaketime for the clock faults, fuse3 (libfuse3 and fusermount3)
# for the lazy filesystem's sidecar, and working apt/dpkg (the ZooKeeper
# image adds Debian's `zookeeper` on top; the eoslab image installs
# libfaketime and fuse3 itself when an older base lacks them).
# Nothing is pulled from an image registry. Skips the work when the image
# already exists, made of these packages (its comment says), unless FORCE=1.
# Needs root and debootstrap.
#
# Usage: docker/build-base-image.sh [IMAGE]   (env: MIRROR, SUITE, FORCE, DOCKER)
set -euo pipefail

IMAGE=${1:-eoslab/base:bookworm}
SUITE=${SUITE:-bookworm}
MIRROR=${MIRROR:-http://deb.debian.org/debian}
DOCKER=${DOCKER:-/usr/bin/docker}
PACKAGES=python3,python3-venv,iptables,iproute2,netbase,tzdata,libfaketime,fuse3

die() { echo "base-image: $*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || die "needs root (debootstrap and chroot)"
"$DOCKER" info >/dev/null 2>&1 || die "no Docker engine answers (run .ci/docker-engine.sh)"
MADE="debootstrap --variant=minbase $SUITE + $PACKAGES"     # the image's comment: what it was made of
if [ "${FORCE:-0}" != 1 ] && "$DOCKER" image inspect "$IMAGE" >/dev/null 2>&1; then
  have=$("$DOCKER" image inspect -f '{{.Comment}}' "$IMAGE" 2>/dev/null || true)
  if [ "$have" = "$MADE" ]; then
    echo "base-image: $IMAGE exists (FORCE=1 to rebuild)"; exit 0
  fi
  echo "base-image: $IMAGE was made of other packages (${have:-unknown}): rebuilding it"
fi
if ! command -v debootstrap >/dev/null 2>&1; then
  echo "base-image: installing debootstrap"
  apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >/dev/null \
    || die "cannot install debootstrap"
fi

ROOT=$(mktemp -d /tmp/eoslab-rootfs.XXXXXX)
trap 'rm -rf "$ROOT"' EXIT

echo "base-image: debootstrap $SUITE ($MIRROR) into $ROOT"
debootstrap --variant=minbase --include="$PACKAGES" "$SUITE" "$ROOT" "$MIRROR" >"$ROOT.log" 2>&1 \
  || { tail -5 "$ROOT.log" >&2; die "debootstrap failed (full log: $ROOT.log)"; }
rm -f "$ROOT.log"

# python:3.11-slim compatibility: `python`, and pip allowed to install into
# the system interpreter (the Dockerfile uses a venv anyway).
ln -sf python3 "$ROOT/usr/bin/python"
rm -f "$ROOT"/usr/lib/python3.*/EXTERNALLY-MANAGED
# The same sources as the host's mirror, plus security updates.
cat >"$ROOT/etc/apt/sources.list" <<SRC
deb $MIRROR $SUITE main
deb $MIRROR $SUITE-updates main
deb http://deb.debian.org/debian-security $SUITE-security main
SRC
# Keep apt from installing docs and recommends in derived images.
cat >"$ROOT/etc/apt/apt.conf.d/90eoslab" <<'CONF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
CONF
cat >"$ROOT/etc/dpkg/dpkg.cfg.d/90eoslab-nodoc" <<'CONF'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
CONF
# Trim: caches, docs, man pages, locales (keep the stdlib bytecode: Python starts often here).
rm -rf "$ROOT"/var/cache/apt/archives/*.deb "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/log/* \
       "$ROOT"/usr/share/man/* "$ROOT"/usr/share/info/* "$ROOT"/usr/share/locale/* "$ROOT"/tmp/*
find "$ROOT/usr/share/doc" -mindepth 2 ! -name copyright -delete 2>/dev/null || true

echo "base-image: docker import -> $IMAGE"
tar -C "$ROOT" -c . | "$DOCKER" import \
  -c 'ENV LANG=C.UTF-8 PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
  -c 'CMD ["python3"]' \
  -m "$MADE" - "$IMAGE" >/dev/null
"$DOCKER" run --rm "$IMAGE" python -c 'import sys, venv; assert sys.version_info[:2] == (3, 11), sys.version' \
  || die "$IMAGE has no working python 3.11"
echo "base-image: $IMAGE ($("$DOCKER" image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
