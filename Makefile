# One-command workflows for the toolkit. `make help` lists them.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
TSBATCH := $(VENV)/bin/tsbatch
INSTALLED := $(VENV)/.installed
SERVE_DIR := .serve
PYTEST_ARGS ?=
# `make test` runs the suite in two pytest runs: first everything not marked `serial` side by
# side in TEST_JOBS processes (pytest-xdist, one test file per process at a time, so a module's
# server starts once), then the `serial` tests alone (they time latency, stalls or shedding
# under load, which a neighbour's CPU would skew), collected from tests/integration only unless
# PYTEST_ARGS names paths (seconds of imports saved; tests/conftest.py refuses a serial mark
# elsewhere). TEST_JOBS=0 runs the first part in one process.
TEST_JOBS ?= 2
SERIAL_PATHS = $(if $(filter tests/%,$(PYTEST_ARGS)),,tests/integration)
# $(1): a marker expression ANDed with the split ("" for all tests). A run that selects nothing
# (pytest's exit status 5) is no failure; either run failing fails the target.
define two_runs
status=0; \
$(PY) -m pytest -n $(TEST_JOBS) --dist loadfile -m "$(1) not serial" $(PYTEST_ARGS) || { rc=$$?; [ $$rc = 5 ] || status=$$rc; }; \
$(PY) -m pytest -p no:xdist -m "$(1) serial" $(PYTEST_ARGS) $(SERIAL_PATHS) || { rc=$$?; [ $$rc = 5 ] || status=$$rc; }; \
exit $$status
endef

# bench-% is left out: a phony target gets no pattern rule (its `install` prerequisite runs it every time).
.PHONY: help install java archive plugins serve stop status doctor check-config test test-tools test-unit \
        test-integration bench perf-analyzer lint loadtest loadtest-ui sweep tune gpu-check image clean

help: ## List the commands
	@grep -hE '^[a-zA-Z_%-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{sub("%", "<name>", $$1); printf "  make %-18s %s\n", $$1, $$2}'

$(INSTALLED): requirements.txt requirements-dev.txt pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info[:2] >= (3, 11) else "Python 3.11+ is required")'
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -r requirements-dev.txt
	$(PY) -m pip install --quiet --no-deps --editable .
	touch $@

# The KServe SDK (for the tests) goes in without its own pins: requirements-dev.txt says why.
install: $(INSTALLED) java ## Create .venv with the pinned dependencies, the toolkit (editable) and the KServe SDK, check Java 17
	$(PY) -m pip install --quiet --no-deps kserve==0.21.0

java: ## Check Java 17 (installs it with apt-get when root)
	@bash scripts/ensure_java.sh

# The offline digits placeholder is allowed here (CI, demos); the image build refuses it.
# `make archive ALLOW_DIGITS=0` builds as the image does.
ALLOW_DIGITS ?= 1

archive: $(INSTALLED) plugins ## Export, verify and package every model into model-store/ (prints training reports)
	TSBATCH_ALLOW_DIGITS=$(ALLOW_DIGITS) $(TSBATCH) archive
	@for report in build/*/report.md; do if [ -f "$$report" ]; then echo; cat "$$report"; fi; done

plugins: $(INSTALLED) ## Compile the frontend plugins (Open Inference Protocol health/metadata) into build/plugins/
	$(TSBATCH) plugins

serve: install archive ## Build what is missing, start TorchServe in the background, wait for READY
	$(TSBATCH) serve --run-dir $(SERVE_DIR)

stop: ## Stop the TorchServe started by `make serve`
	@test -x $(TSBATCH) && $(TSBATCH) stop --run-dir $(SERVE_DIR) || true

status: ## Show the models of the running server
	$(TSBATCH) status --run-dir $(SERVE_DIR)

doctor: $(INSTALLED) ## What this machine offers (CPU flags, compiler, CUDA) and what a worker here would serve per model
	$(TSBATCH) doctor

check-config: $(INSTALLED) ## Explain mistakes in config.properties and models.yaml, limits that disagree across them, stale archives
	$(TSBATCH) check-config
	$(TSBATCH) container-config --check

test-tools: ## Chromium, Prometheus and perf_analyzer for the web-UI, scrape and perf_analyzer tests (apt-get when root)
	@bash scripts/ensure_chromium.sh
	@bash scripts/ensure_prometheus.sh
	@bash scripts/ensure_perf_analyzer.sh

perf-analyzer: ## NVIDIA's perf_analyzer (tritonclient 2.40.0's binary, libcudart 12) into build/perf_analyzer/, outside the venv
	@bash scripts/ensure_perf_analyzer.sh

test: install archive test-tools ## Install what is needed and run the whole suite (unit + integration; TEST_JOBS=2 side by side, then the serial tests alone)
	$(call two_runs,)

test-unit: $(INSTALLED) ## Fast unit tests only (everything not marked integration), side by side in TEST_JOBS processes
	$(PY) -m pytest -n $(TEST_JOBS) --dist loadfile -m "not integration" $(PYTEST_ARGS)

test-integration: install archive test-tools ## Integration tests against real TorchServe instances (as `make test` runs them)
	$(call two_runs,integration and)

lint: $(INSTALLED) ## ruff
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

bench: install archive ## Served vs in-process ResNet throughput under 16 clients
	$(TSBATCH) bench resnet
	$(TSBATCH) bench multi-input

# `make bench-<name>` is `tsbatch bench <name> $(ARGS)`, for every benchmark `tsbatch bench --help`
# lists; those serving the built archives build them first, and clients installs perf_analyzer.
bench-%: install ## tsbatch bench <name> (intent, photos, overload, client, clients...; ARGS="--settings 2x1 --duration 30")
	$(TSBATCH) bench $* $(ARGS)

bench-resnet bench-multi-input bench-intent bench-clients bench-apply bench-trickle-burst: archive
bench-clients: perf-analyzer

sweep: $(INSTALLED) archive ## In-process batch-size sweep -> reports/sweep/ (options: ARGS="--max-batch 8 --iters 5")
	$(TSBATCH) sweep $(ARGS)

tune: install archive ## SLA-driven batchSize x maxBatchDelay x workers search through TorchServe -> reports/tune/ (QUICK=1 or ARGS=--quick; ARGS=--apply)
	$(TSBATCH) tune $(if $(QUICK),--quick) $(ARGS)

gpu-check: ## Sweep both models on a GPU (fp32/fp16/bf16) into reports/gpu-check/ (installs .venv if missing)
	bash scripts/gpu_check.sh $(ARGS)

# Load test against the server `make serve` started. CI-sized by default; the SLA profile is
# LOADTEST_PROFILE, else $SLA_PROFILE, else sla.yaml's default (cpu). Override e.g.
# `make loadtest LOADTEST_USERS=16 LOADTEST_TIME=2m LOADTEST_ARGS="--mode open --user-rate 5 --processes 2"`.
LOADTEST_USERS ?= 8
LOADTEST_RATE ?= 4
LOADTEST_TIME ?= 30s
LOADTEST_WARMUP ?= 5
LOADTEST_PROFILE ?=
LOADTEST_ARGS ?=
LOADTEST_REPORTS := reports/loadtest
LOADTEST := $(TSBATCH) loadtest -u $(LOADTEST_USERS) -r $(LOADTEST_RATE) \
          $(if $(LOADTEST_PROFILE),--sla-profile $(LOADTEST_PROFILE))

loadtest: $(INSTALLED) ## Headless load test gated on loadtest/sla.yaml (exit 1 on a breach); reports in reports/loadtest/
	@mkdir -p $(LOADTEST_REPORTS)
	$(LOADTEST) -t $(LOADTEST_TIME) --warmup $(LOADTEST_WARMUP) --only-summary --csv $(LOADTEST_REPORTS)/locust --html $(LOADTEST_REPORTS)/locust.html \
	  --sla-report $(LOADTEST_REPORTS)/sla.json --sla-html $(LOADTEST_REPORTS)/sla.html $(LOADTEST_ARGS)

loadtest-ui: $(INSTALLED) ## Locust web UI with a live "SLA gate" tab (and /sla with the server view) on http://127.0.0.1:8089
	$(LOADTEST) --ui --web-host 127.0.0.1 --web-port 8089 $(LOADTEST_ARGS)

IMAGE ?= localhost/torchserve-batch-toolkit:dev

image: ## Opt-in: build the Dockerfile with buildah where no Docker runs (root; IMAGE=..., ALLOW_DIGITS=0 needs real weights)
	IMAGE=$(IMAGE) ALLOW_DIGITS=$(ALLOW_DIGITS) bash scripts/build_image.sh

clean: stop ## Remove build outputs (keeps .venv)
	rm -rf build model-store/*.mar reports $(SERVE_DIR)
