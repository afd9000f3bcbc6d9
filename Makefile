# The two quickstart commands: `make demo` (set up, then run the main job end to end) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# Offline by default when the published s8f files sit beside the checkout; otherwise the data
# layer downloads them by pinned URL and SHA-256.
SHARED_S8F := $(abspath ../shared/s8f)
export MICROCTX_DATA_DIR ?= $(if $(wildcard $(SHARED_S8F)/*.json),$(SHARED_S8F),)

.PHONY: setup sandbox-tool demo test lint bench lab test-fast
setup: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test]'
	touch $@

# bubblewrap (bwrap): `microctx run` sandboxes every candidate with it. A Debian package, installed
# here when it is missing and this user may (root); otherwise one line says what to install.
sandbox-tool:
	@command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; } \
	  || echo "bubblewrap (bwrap) is missing: install it (apt-get install bubblewrap) so candidates can run sandboxed"

demo: setup sandbox-tool
	$(BIN)/microctx demo --out reports/demo

test: setup sandbox-tool
	$(BIN)/python -m pytest

lint: setup
	$(BIN)/ruff check .
	$(BIN)/mypy

bench: setup
	$(BIN)/python benchmarks/bench_all.py

# JupyterLab on working copies of the notebooks in lab/ (the tracked notebooks stay clean), with
# MICROCTX_DATA_DIR as above (or a microctx.toml data_dir), so notebooks find the data like the CLI.
lab: setup
	$(BIN)/microctx lab --dir lab

# The quick run: everything but the tests marked slow (`make test` runs them all).
test-fast: setup
	$(BIN)/python -m pytest -m "not slow"
