#!/usr/bin/env bash
# Installs what eoslab needs from Debian's packages when it is missing:
# ZooKeeper (the `zookeeper` package), Java 17, iptables and fuse3 (fusermount3 and libfuse3:
# the lazy filesystem of cluster/lazyfs), libfaketime and a C compiler (the clock faults of
# cluster/faketime: the preload and its small sleep fix); with --tests also Chromium (the tests that
# open the reports and the pipeline's pages in a headless browser skip without it). Idempotent.
set -euo pipefail
need=()
[ -f /usr/share/java/zookeeper.jar ] || need+=(zookeeper)
command -v java >/dev/null 2>&1 || need+=(openjdk-17-jre-headless)
command -v iptables >/dev/null 2>&1 || need+=(iptables)
command -v fusermount3 >/dev/null 2>&1 || need+=(fuse3)
compgen -G "/usr/lib/*/faketime/libfaketimeMT.so.1" >/dev/null || need+=(libfaketime)
command -v cc >/dev/null 2>&1 || need+=(gcc libc6-dev)
if [ "${1:-}" = --tests ]; then command -v chromium >/dev/null 2>&1 || need+=(chromium); fi
[ ${#need[@]} -eq 0 ] && exit 0
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null 2>&1 || { echo "system-deps: need root (or sudo) to install: ${need[*]}" >&2; exit 1; }
  SUDO=sudo
fi
echo "system-deps: installing ${need[*]} from Debian's packages"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
