# One-command workflows for the toolkit. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
INSTALLED := $(VENV)/.installed
SERVE_DIR := .serve
PYTEST_ARGS ?=

.PHONY: help install java archive serve stop status check-config test test-unit \
        test-integration bench bench-intent lint loadtest loadtest-ui sweep tune gpu-check clean

help: ## List the commands
	@grep -hE '^[a-zA-Z_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-18s %s\n", $$1, $$2}'

$(INSTALLED): requirements.txt
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] >= (3, 11) else "Python 3.11+ is required")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements.txt
	touch $@

install: $(INSTALLED) java ## Create .venv with the pinned dependencies and check Java 17

java: ## Check Java 17 (installs it with apt-get when root)
	@bash scripts/ensure_java.sh

archive: $(INSTALLED) ## Export, verify and package every model into model-store/
	$(PY) -m scripts.build

serve: install archive ## Build what is missing, start TorchServe in the background, wait for READY
	$(PY) -m scripts.serve start --run-dir $(SERVE_DIR)

stop: ## Stop the TorchServe started by `make serve`
	@test -x $(PY) && $(PY) -m scripts.serve stop --run-dir $(SERVE_DIR) || true

status: ## Show the models of the running server
	$(PY) -m scripts.serve status --run-dir $(SERVE_DIR)

check-config: $(INSTALLED) ## Explain mistakes in config.properties and stale archives
	$(PY) -m scripts.check_config

test: install archive ## Install what is needed and run the whole suite (unit + integration)
	$(PY) -m pytest $(PYTEST_ARGS)

test-unit: $(INSTALLED) ## Fast unit tests only
	$(PY) -m pytest tests/unit $(PYTEST_ARGS)

test-integration: install archive ## Integration tests against real TorchServe instances
	$(PY) -m pytest tests/integration $(PYTEST_ARGS)

lint: $(INSTALLED) ## ruff
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: install archive ## Served vs in-process ResNet throughput under 16 clients
	$(PY) -m scripts.bench_resnet

clean: stop ## Remove build outputs (keeps .venv)
	rm -rf build model-store/*.mar reports $(SERVE_DIR)
