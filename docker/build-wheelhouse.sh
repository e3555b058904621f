#!/usr/bin/env bash
# Fills ./wheelhouse with every Python dependency of eoslab and of its k8s
# and lazyfs extras (the image installs them) as a wheel, so the image build installs them
# with `pip install --no-index` (no network).
#
# Guarantees: wheels for CPython 3.11 on glibc Linux (built or downloaded with
# the host's Python 3.11, the version the images run); the build backend
# (setuptools, wheel) is included so `pip install /src` works offline; eoslab's
# own wheel is not (the image builds it from the sources it copies); the
# wheelhouse is replaced only when the whole download succeeded.
# Usage: docker/build-wheelhouse.sh [PYTHON]   (default .venv/bin/python)
set -euo pipefail
PY=${1:-.venv/bin/python}
die() { echo "wheelhouse: $*" >&2; exit 1; }
"$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
  || die "$PY is not Python 3.11 (the images run 3.11; wheels must match)"
tmp=$(mktemp -d wheelhouse.tmp.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
"$PY" -m pip wheel -q --disable-pip-version-check --wheel-dir "$tmp" ".[k8s,lazyfs]" "setuptools>=74.1" wheel >"$tmp.log" 2>&1 \
  || { grep -v '^WARNING: Location' "$tmp.log" | tail -5 >&2; rm -f "$tmp.log"; die "pip wheel failed (is PyPI reachable?)"; }
rm -f "$tmp.log"
rm -f "$tmp"/eoslab-*.whl
rm -rf wheelhouse && mv "$tmp" wheelhouse && trap - EXIT
echo "wheelhouse: $(ls wheelhouse/*.whl | wc -l) wheels, $(du -sh wheelhouse | cut -f1)"
