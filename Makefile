# One task runner; CI calls these targets and nothing else.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3.11
VENV := .venv
PY := $(VENV)/bin/python
BIN := $(VENV)/bin
NODE_BIN := node_modules/.bin
GRPC_PROTO := $(shell $(PY) -c "import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), '_proto'))" 2>/dev/null)
PROTOS := $(wildcard proto/batchline/v1/*.proto)

.PHONY: help install web gen check-gen lint format typecheck test test-unit test-integration test-e2e test-faults test-contract run up down env tls-config bench bench-full overload soak bench-scale bench-batching bench-policy clean

help: ## list the targets
	@grep -hE '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

# --- install: a venv with the package (editable) and its tools; node tools for buf -------------
$(VENV)/.installed: pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[model,dev]'
	@touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

install: $(VENV)/.installed node_modules/.installed ## create .venv and node_modules (only what is missing)

# --- the chat UI: typecheck, unit tests, build ------------------------------------------------------
WEB_SOURCES := $(shell find clients/web/src clients/web/index.html clients/web/vite.config.ts -type f 2>/dev/null)

clients/web/dist/index.html: $(WEB_SOURCES) node_modules/.installed
	$(NODE_BIN)/vite build clients/web --logLevel warn

web: install clients/web/dist/index.html ## build the chat UI into clients/web/dist

# --- generated code: Python stubs, TypeScript, Envoy descriptor set ----------------------------
gen: install ## regenerate code from proto/ (commit the result)
	$(NODE_BIN)/buf lint
	rm -rf src/batchline/v1 && mkdir -p src/batchline/v1
	$(PY) -m grpc_tools.protoc -I proto -I $(GRPC_PROTO) \
	  --plugin=protoc-gen-mypy=$(BIN)/protoc-gen-mypy --plugin=protoc-gen-mypy_grpc=$(BIN)/protoc-gen-mypy_grpc \
	  --python_out=src --mypy_out=src --grpc_python_out=src --mypy_grpc_out=src $(PROTOS)
	printf '"""Generated from proto/batchline/v1 by `make gen`. Do not edit."""\n' > src/batchline/v1/__init__.py
	touch src/batchline/v1/py.typed
	rm -rf clients/web/src/gen && $(NODE_BIN)/buf generate
	$(NODE_BIN)/buf build -o envoy/batchline.pb

check-gen: gen ## fail if generated code differs from what is committed
	@git diff --exit-code -- src/batchline/v1 clients/web/src/gen envoy/batchline.pb \
	  || { echo "generated code is stale: run 'make gen' and commit"; exit 1; }
	@test -z "$$(git status --porcelain -- src/batchline/v1 clients/web/src/gen envoy/batchline.pb)" \
	  || { echo "generated files are not committed: run 'make gen' and commit"; exit 1; }

# --- quality --------------------------------------------------------------------------------------
lint: install ## ruff lint + format check, buf lint, Envoy config, compose file, Dockerfiles
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(NODE_BIN)/buf lint
	$(BIN)/envoy --mode validate -c envoy/envoy.yaml --log-level warn
	$(BIN)/check-jsonschema --builtin-schema vendor.compose-spec docker-compose.yml docker-compose.tls.yml
	$(BIN)/hadolint docker/*.Dockerfile

format: install ## apply ruff fixes and formatting
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

typecheck: install ## mypy, strict on our code; tsc, strict on the UI
	$(BIN)/mypy
	$(BIN)/mypy scripts
	$(NODE_BIN)/tsc -p clients/web/tsconfig.json

test: install web ## every test: UI unit tests, then unit, integration, end-to-end, contract, browser
	$(NODE_BIN)/vitest run --root clients/web
	$(BIN)/pytest

test-unit: install
	$(BIN)/pytest -m unit

test-integration: install
	$(BIN)/pytest -m integration

test-e2e: install
	$(BIN)/pytest -m e2e

test-faults: install ## kills, cut connections and restarts under load
	$(BIN)/pytest -m faults

test-contract: install
	$(BIN)/pytest -m contract

# --- running --------------------------------------------------------------------------------------
run: install web ## the whole system: one process (in-memory queue and store) behind Envoy; Ctrl-C stops it
	$(PY) scripts/devstack.py run

up: install web ## ingress, stream, batcher(s) and Envoy as processes against local RabbitMQ and Redis
	$(PY) scripts/devstack.py up

down: ## stop what `make up` started
	$(PY) scripts/devstack.py down

env: ## write .env for docker compose from .env.example, with random passwords
	$(PY) scripts/make_env.py

tls-config: install ## envoy/envoy.tls.yaml for docker-compose.tls.yml (certificates from TLS_DIR)
	$(PY) -m batchline.edge tls /etc/envoy/tls/tls.crt /etc/envoy/tls/tls.key > envoy/envoy.tls.yaml

bench: install ## the load targets, quick (~2 min): docs/benchmarks/load-quick.md
	$(PY) -m bench.suite

bench-full: install ## the load targets, 30 s runs, medians of 3 (10-18 min): docs/benchmarks/load.md and history.*
	$(PY) -m bench.suite --full
	$(PY) -m bench.history

overload: install ## 5x capacity for 60 s, refusals and recovery measured: docs/benchmarks/overload.md
	$(PY) -m bench.reliability overload

soak: install ## 50% capacity for 10 min; memory, keys, tasks, watchers sampled: docs/benchmarks/soak.md
	$(PY) -m bench.reliability soak

bench-scale: install ## throughput against 1..6 batchers (~2 min): docs/benchmarks/scale.md
	$(PY) -m bench.scale

bench-batching: install ## the batching engine against the bare model (about 45 min; writes docs/benchmarks/batching.* and history.*)
	$(PY) -m bench.batching
	$(PY) -m bench.history

bench-policy: install ## the batch policies simulated on the measured pass costs, one and two model lanes (about a minute): docs/benchmarks/policy-simulation.md
	$(PY) -m bench.simulate

clean: ## remove the venv, node_modules and caches
	rm -rf $(VENV) node_modules .pytest_cache .mypy_cache .ruff_cache .run clients/web/dist test-artifacts
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
