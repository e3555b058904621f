#!/usr/bin/env bash
# Builds eoslab/spark:dev (docker/spark/Dockerfile): Java 17, PySpark, eoslab's checker and
# pipeline, for the docker-compose profile `spark` (a standalone master, a worker, the driver).
#
# Guarantees: nothing is pulled from an image registry and pip never goes online in the build
# when BASE_IMAGE is the local eoslab/base:bookworm (the default; made here by
# docker/build-base-image.sh when missing): Python packages come from
# .eoslab/spark-wheelhouse, which the host fills once with `pip wheel '.[spark]'` (pip's
# cache makes the 450 MB PySpark wheel a one-time download), and Java 17 from Debian's
# mirror through apt. The build context is assembled in a temporary directory (wheels
# hard-linked, sources without bytecode), so .dockerignore is not involved.
# Usage: docker/spark/build-image.sh [IMAGE]   (env: BASE_IMAGE, DOCKER, PY, FORCE_WHEELS=1)
set -euo pipefail
cd "$(dirname "$0")/../.."
IMAGE=${1:-eoslab/spark:dev}
LOCAL_BASE=eoslab/base:bookworm
BASE=${BASE_IMAGE:-$LOCAL_BASE}
DOCKER=${DOCKER:-/usr/bin/docker}
PY=${PY:-.venv/bin/python}
WHEELS=.eoslab/spark-wheelhouse
die() { echo "spark-image: $*" >&2; exit 1; }

"$DOCKER" info >/dev/null 2>&1 || die "no Docker engine answers (run .ci/docker-engine.sh)"
offline=0
if [ "$BASE" = "$LOCAL_BASE" ]; then
  offline=1
  "$DOCKER" image inspect "$BASE" >/dev/null 2>&1 || DOCKER="$DOCKER" bash docker/build-base-image.sh "$BASE"
fi

if [ "${FORCE_WHEELS:-0}" = 1 ] || [ ! -f "$WHEELS/.stamp" ] || [ pyproject.toml -nt "$WHEELS/.stamp" ]; then
  echo "spark-image: pip wheel '.[spark]' -> $WHEELS"
  tmp=$(mktemp -d .eoslab/spark-wheels.XXXXXX)
  "$PY" -m pip wheel -q --disable-pip-version-check --wheel-dir "$tmp" '.[spark]' 'setuptools>=68' wheel \
    >"$tmp.log" 2>&1 || { grep -v '^WARNING: Location' "$tmp.log" | tail -5 >&2; rm -rf "$tmp" "$tmp.log"; die "pip wheel failed"; }
  rm -f "$tmp.log" "$tmp"/eoslab-*.whl
  rm -rf "$WHEELS" && mv "$tmp" "$WHEELS" && touch "$WHEELS/.stamp"
fi

ctx=$(mktemp -d /tmp/eoslab-spark-ctx.XXXXXX)
trap 'rm -rf "$ctx"' EXIT
mkdir -p "$ctx/src" "$ctx/wheels"
cp -al "$WHEELS"/*.whl "$ctx/wheels/" 2>/dev/null || cp "$WHEELS"/*.whl "$ctx/wheels/"
tar -c --exclude=__pycache__ --exclude='*.pyc' pyproject.toml README.md eoslab services clients cluster checker pipeline \
  | tar -x -C "$ctx/src"
cp docker/spark/Dockerfile "$ctx/Dockerfile"

echo "spark-image: docker build $IMAGE (base $BASE, offline pip: $offline)"
DOCKER_BUILDKIT=0 "$DOCKER" build -q --build-arg BASE_IMAGE="$BASE" --build-arg PIP_OFFLINE="$offline" \
  -t "$IMAGE" "$ctx" >/dev/null
echo "spark-image: $IMAGE ($("$DOCKER" image inspect -f '{{.Size}}' "$IMAGE" | awk '{printf "%.0f MB", $1/1e6}'))"
