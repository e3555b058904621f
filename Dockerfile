# One image for every eoslab service; the command selects the service:
#   docker run eoslab/eoslab broker --broker-id 1 --listen 0.0.0.0:9092 ...
#   (broker | controller | txn-coordinator | sidecar | probe, or any command)
#
# BASE_IMAGE defaults to python:3.11-slim. Where nothing can be pulled,
# `make images` builds eoslab/base:bookworm from Debian's packages
# (docker/build-base-image.sh) and passes it here together with
# PIP_OFFLINE=1, so Python packages come only from ./wheelhouse (which
# `make wheelhouse` downloads on the host): the build then needs no network
# but for what the clock faults need and the base lacks (gcc for their sleep
# fix, libfaketime), taken from Debian's mirror; CLOCK_FAULTS=0 leaves them
# out (an image without clock faults, built with no network at all).
# The image has the `k8s` extra (the kubernetes client): the zombie-fencing
# Job in k8s/ runs `eoslab run --runtime k8s` from this image. It has the
# `lazyfs` extra (mfusepy) and Debian's fuse3 too: the broker pod's lazyfs
# sidecar (k8s/lazyfs) mounts the lazy filesystem from this image.
ARG BASE_IMAGE=python:3.11-slim
ARG CLOCK_FAULTS=1

FROM ${BASE_IMAGE} AS build
ARG PIP_OFFLINE=0
# `wheelhous[e]` matches nothing when there is no wheelhouse; pyproject.toml
# keeps the COPY valid either way.
COPY pyproject.toml wheelhous[e] /wheelhouse/
COPY pyproject.toml README.md /src/
COPY eoslab /src/eoslab
COPY services /src/services
COPY clients /src/clients
COPY cluster /src/cluster
COPY checker /src/checker
RUN set -eu; \
    if [ "$PIP_OFFLINE" = 1 ]; then export PIP_NO_INDEX=1; fi; \
    python -m venv /opt/eoslab; \
    PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_NO_CACHE_DIR=1 \
      /opt/eoslab/bin/pip install -q --find-links /wheelhouse "/src[k8s,lazyfs]"; \
    /opt/eoslab/bin/pip uninstall -q -y pip setuptools 2>/dev/null || true; \
    # Bytecode compiled now: healthchecks start Python every second, and
    # compiling grpc/protobuf at each start would take most of the CPU.
    /opt/eoslab/bin/python -m compileall -q -j 0 /opt/eoslab/lib >/dev/null; \
    /opt/eoslab/bin/python -c 'import services.broker, services.controller, services.txn_coordinator, services.sidecar, services.probe, grpc, kazoo, kubernetes'

# The clock faults' sleep fix (cluster/faketime.py's SLEEP_FIX_C), compiled here because the
# image has no C compiler: /usr/lib/eoslab/faketime/sleepfix-DIGEST.so, the DIGEST of the source,
# so the harness can tell an image whose fix is stale (cluster/docker_clock.py). gcc comes from
# the base when it has one, else from Debian's mirror. CLOCK_FAULTS=0 (a build without network:
# `make images CLOCK_FAULTS=0`) leaves the fix and libfaketime out, and a run with a clock fault on
# that image is refused in one line. It is a build argument, not a fallback, so a build without
# network never leaves a layer without them in the cache for a build with network to reuse.
#
# The same stage, with the same compiler, builds the package's C walker over a Kafka batch's records
# (eoslab/common/_records_native.c; Python's headers from Debian's mirror when the base lacks them), which
# the final stage puts beside the installed package. Without it (CLOCK_FAULTS=0) the brokers walk the
# records in Python: the same answers, more CPU per record.
FROM ${BASE_IMAGE} AS sleepfix
ARG CLOCK_FAULTS
RUN if [ "$CLOCK_FAULTS" = 1 ]; then need=""; \
      command -v gcc >/dev/null || need="gcc libc6-dev"; \
      python3 -c 'import os, sys, sysconfig; sys.exit(not os.path.exists(sysconfig.get_paths()["include"] + "/Python.h"))' \
        || need="$need python3-dev"; \
      if [ -n "$need" ]; then \
        { apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -qq --no-install-recommends $need >/dev/null; } \
        || { echo "eoslab image: the clock faults' sleep fix needs gcc from Debian's mirror;" \
                  "without network build with CLOCK_FAULTS=0" >&2; exit 1; }; fi; fi
COPY cluster/faketime.py /src/faketime.py
COPY eoslab/common/_records_native.c /src/_records_native.c
RUN mkdir -p /usr/lib/eoslab/faketime /usr/lib/eoslab/native; \
    if [ "$CLOCK_FAULTS" = 1 ]; then python3 /src/faketime.py sleep-fix /usr/lib/eoslab; \
      gcc -O2 -shared -fPIC -I"$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
        -o "/usr/lib/eoslab/native/_records_native$(python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')" \
        /src/_records_native.c; fi

FROM ${BASE_IMAGE}
ARG CLOCK_FAULTS
# The fault sidecar needs iptables and tc; the lazyfs sidecar Debian's fuse3; the clock faults need Debian's libfaketime (preloaded into
# the services only when a cluster is started for clock faults). A base made by
# docker/build-base-image.sh has them all; what a base lacks is installed from Debian's mirror
# (libfaketime only with CLOCK_FAULTS=1). /usr/lib/eoslab/faketime/libfaketimeMT.so.1 names the
# library on every architecture.
RUN set -eu; missing=""; \
    command -v iptables >/dev/null || missing="$missing iptables"; \
    command -v tc >/dev/null || missing="$missing iproute2"; \
    command -v fusermount3 >/dev/null || missing="$missing fuse3"; \
    if [ "$CLOCK_FAULTS" = 1 ] && ! ls /usr/lib/*/faketime/libfaketimeMT.so.1 >/dev/null 2>&1; then \
      missing="$missing libfaketime"; fi; \
    if [ -n "$missing" ]; then \
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        $missing >/dev/null && rm -rf /var/lib/apt/lists/*; fi; \
    mkdir -p /usr/lib/eoslab/faketime; \
    for lib in /usr/lib/*/faketime/libfaketimeMT.so.1; do \
      if [ -e "$lib" ]; then ln -sf "$lib" /usr/lib/eoslab/faketime/libfaketimeMT.so.1; fi; done
COPY --from=sleepfix /usr/lib/eoslab/faketime/ /usr/lib/eoslab/faketime/
COPY --from=build /opt/eoslab /opt/eoslab
COPY --from=sleepfix /usr/lib/eoslab/native/ /usr/lib/eoslab/native/
RUN for so in /usr/lib/eoslab/native/_records_native*.so; do if [ -e "$so" ]; then \
      cp "$so" /opt/eoslab/lib/python3*/site-packages/eoslab/common/ \
      && /opt/eoslab/bin/python -c 'import eoslab.common._records_native'; fi; done
COPY docker/entrypoint.sh /usr/local/bin/eoslab-entrypoint
COPY docker/healthcheck.py /usr/local/bin/eoslab-health
COPY docker/launch.py /usr/local/bin/eoslab-launch
ENV PATH=/opt/eoslab/bin:$PATH PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
WORKDIR /var/lib/eoslab
VOLUME /var/lib/eoslab
ENTRYPOINT ["/usr/local/bin/eoslab-entrypoint"]
CMD ["--help"]
