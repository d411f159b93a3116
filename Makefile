# The two commands of the README: `make demo` and `make test`. Both set up .venv first.
SHELL := /bin/bash
VENV ?= .venv
export SPARK_LOCAL_IP := 127.0.0.1
export MLFLOW_DISABLE_TELEMETRY := true
export PYSPARK_PYTHON := $(CURDIR)/$(VENV)/bin/python
export TOKENIZERS_PARALLELISM := false

.PHONY: bootstrap demo test test-fast lint clean

bootstrap:
	@bash scripts/bootstrap.sh

demo: bootstrap
	@$(VENV)/bin/flinktune demo $(DEMO_ARGS)

test: bootstrap
	@$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

# ruff (format and lint) on every package and the tests, mypy on every package but the tests (its files and
# settings in pyproject.toml); .ci/run runs it before the tests.
LINT_PATHS := flinktune models jobs dags plugins data_contracts benchmarks docker tests
lint: bootstrap
	@$(VENV)/bin/ruff format --check $(LINT_PATHS)
	@$(VENV)/bin/ruff check $(LINT_PATHS)
	@$(VENV)/bin/mypy

test-fast: bootstrap
	@$(VENV)/bin/python -m pytest -m "not slow and not e2e and not airflow and not spark" $(PYTEST_ARGS)

clean:
	rm -rf var .pytest_cache
