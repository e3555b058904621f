# eoslab: `make cluster-up` starts a cluster, `make test` runs the test suite.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
NAME   ?= default
BROKERS ?= 3
CONTROLLERS ?= 2
PYTEST_WORKERS ?= auto

.PHONY: help venv system-deps cluster-up cluster-down cluster-status test test-fast test-docker chaos proto bench clean

help:
	@echo "make cluster-up     start a cluster (NAME=$(NAME), BROKERS=$(BROKERS), CONTROLLERS=$(CONTROLLERS))"
	@echo "make cluster-down   stop it and remove its data"
	@echo "make test           fast and integration tests (real ZooKeeper, real processes), under pytest-xdist"
	@echo "make test-docker    the container tests (starts a Docker engine, builds images offline)"
	@echo "make chaos          the long suites (slow marker)"
	@echo "make proto          regenerate eoslab/v1 stubs from proto/"
	@echo "make bench          run the benchmark scripts under bench/"

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[dev,docker,spark]'
	touch $@

venv: $(VENV)/.installed

system-deps:
	@bash tools/system-deps.sh

cluster-up: venv system-deps
	@$(BIN)/eoslab cluster up --name $(NAME) --brokers $(BROKERS) --controllers $(CONTROLLERS) > .cluster-$(NAME).json
	@echo "runtime: local processes (ZooKeeper, $(CONTROLLERS) controllers, $(BROKERS) brokers)"
	@echo "cluster '$(NAME)' is up; bootstrap: $$($(BIN)/python -c 'import json;print(json.load(open(".cluster-$(NAME).json"))["bootstrap"])')"
	@echo "  produce:  $(BIN)/eoslab produce --bootstrap $$($(BIN)/python -c 'import json;print(json.load(open(".cluster-$(NAME).json"))["bootstrap"])') --topic demo --count 1000 --idempotent"
	@echo "  consume:  $(BIN)/eoslab consume --bootstrap $$($(BIN)/python -c 'import json;print(json.load(open(".cluster-$(NAME).json"))["bootstrap"])') --topic demo --json"
	@echo "  status:   $(BIN)/eoslab cluster status --name $(NAME)"
	@echo "  stop:     make cluster-down NAME=$(NAME)"

cluster-down: venv
	@$(BIN)/eoslab cluster down --name $(NAME)
	@rm -f .cluster-$(NAME).json

cluster-status: venv
	@$(BIN)/eoslab cluster status --name $(NAME)

test: venv system-deps
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -m "not slow and not docker" tests

test-docker: venv
	$(BIN)/pip install -q -e '.[docker]'
	bash .ci/docker-engine.sh
	$(BIN)/python -m pytest -m docker tests

test-fast: venv
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -m fast tests

chaos: venv system-deps
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
