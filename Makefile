# eoslab: `make cluster-up` starts a cluster, `make test` runs the test suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
NAME   ?= default
BROKERS ?= 3
CONTROLLERS ?= 2
PYTEST_WORKERS ?= auto
RUNTIME ?= auto
KAFKA_VERSION ?= 4.0

.PHONY: help venv system-deps test-deps cluster-up cluster-down cluster-status test test-fast test-docker chaos proto bench clean

help:
	@echo "make cluster-up     start a cluster: on Docker when an engine answers, else local processes"
	@echo "                    (RUNTIME=$(RUNTIME)|docker|local, NAME=$(NAME), BROKERS=$(BROKERS), CONTROLLERS=$(CONTROLLERS),"
	@echo "                    KAFKA_VERSION=$(KAFKA_VERSION): 0.11, 2.5, 3.0, 3.6 or 4.0)"
	@echo "make cluster-down   stop it (on whichever runtime it runs) and remove its data"
	@echo "make test           fast and integration tests (real ZooKeeper, real processes), under pytest-xdist"
	@echo "make test-docker    the container tests (starts a Docker engine, builds images offline)"
	@echo "make chaos          the long suites (slow marker)"
	@echo "make proto          regenerate eoslab/v1 stubs from proto/"
	@echo "make bench          run the benchmark scripts under bench/"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev,docker,k8s,spark,clients,lazyfs,serve]'
	touch $@

venv: $(VENV)/.installed

system-deps:
	@bash tools/system-deps.sh

test-deps:
	@bash tools/system-deps.sh --tests

# The runtime is chosen first (a quick probe of /var/run/docker.sock that never hangs): Docker
# when an engine answers (images are built if missing or older than the sources), local otherwise.
cluster-up: venv
	@choice=$$($(BIN)/python -m cluster.runtimes choose $(RUNTIME) --images-optional) || exit 1; \
	 kind=$${choice%% *}; echo "runtime: $$choice"; \
	 if [ "$$kind" = docker ]; then $(MAKE) --no-print-directory docker-prereqs || exit 1; \
	 else $(MAKE) --no-print-directory system-deps || exit 1; fi; \
	 $(BIN)/eoslab cluster up --runtime $$kind --name $(NAME) --brokers $(BROKERS) --controllers $(CONTROLLERS) \
	   --kafka-version $(KAFKA_VERSION) > .cluster-$(NAME).json || { rm -f .cluster-$(NAME).json; exit 1; }; \
	 boot=$$($(BIN)/python -c 'import json;print(json.load(open(".cluster-$(NAME).json"))["bootstrap"])'); \
	 echo "cluster '$(NAME)' is up on $$kind as Kafka $(KAFKA_VERSION); bootstrap: $$boot"; \
	 kboot=$$($(BIN)/python -c 'import json;print(json.load(open(".cluster-$(NAME).json")).get("kafka_bootstrap", ""))'); \
	 if [ -n "$$kboot" ]; then echo "  Kafka clients: bootstrap.servers=$$kboot"; fi; \
	 echo "  produce:  $(BIN)/eoslab produce --bootstrap $$boot --topic demo --count 1000 --idempotent"; \
	 echo "  consume:  $(BIN)/eoslab consume --bootstrap $$boot --topic demo --json"; \
	 echo "  status:   make cluster-status NAME=$(NAME)"; \
	 echo "  stop:     make cluster-down NAME=$(NAME)"

cluster-down: venv
	@$(BIN)/eoslab cluster down --name $(NAME)
	@rm -f .cluster-$(NAME).json

cluster-status: venv
	@$(BIN)/eoslab cluster status --name $(NAME)

test: venv test-deps
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -m "not slow and not docker" tests

# The container tests, one at a time (they share one engine and two cores): tests/docker
# (compose cluster, sidecars, chaos run on Docker), the Spark job on a standalone Spark cluster in
# compose (tests/pipeline/test_spark_docker.py) and the offline manifest checks of tests/k8s.
# Without an engine that can run, they skip and say why.
test-docker: venv
	@$(BIN)/python -c 'import docker, kubernetes, kubernetes_validate' 2>/dev/null || $(BIN)/pip install -q -e '.[dev,docker,k8s]'
	@bash .ci/docker-engine.sh || echo "test-docker: the container tests will skip (no engine)"
	$(BIN)/python -m pytest -n 0 -p no:cacheprovider -m "docker or fast" tests/docker tests/k8s \
	  tests/pipeline/test_spark_docker.py

test-fast: venv
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -m fast tests

chaos: venv test-deps
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -m "slow or integration" tests

proto: venv
	$(BIN)/python tools/gen_proto.py

bench: venv system-deps
	$(BIN)/python bench/produce.py --replication-factor 1
	$(BIN)/python bench/produce.py --replication-factor 3
	$(BIN)/python bench/failover.py --kills 20 --session-timeout-ms 1000
	$(BIN)/python bench/checker_knossos.py

clean:
	rm -rf $(VENV) *.egg-info .pytest_cache

include mk/docker.mk
