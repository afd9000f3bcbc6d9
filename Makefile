# The two quickstart commands: `make demo` (set up, then run the main job end to end) and `make test`.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# One data setting: `make setup` writes microctx.toml (data_dir) when the published s8f files sit
# beside the checkout in ../shared/s8f. The CLI, notebooks, JupyterLab and the tests all read it,
# from this folder or below; without it the data layer downloads the files by pinned URL and SHA-256.
SHARED_S8F ?= ../shared/s8f

.PHONY: setup setup-test data-setting lock sandbox-tool browser-tool demo test lint docs bench lab test-fast
setup: $(VENV)/.installed data-setting
setup-test: $(VENV)/.installed-test data-setting

# Exact versions from the lock files (`make lock` rewrites them from pyproject.toml with uv), so
# `make setup` twice, or on two machines, installs the same versions and gives the same numbers.
# requirements.lock is what the package needs (the demo); requirements-test.lock adds the test tools.
# --no-deps: the lock only, nothing resolved beside it (tests/test_environment.py checks that each
# lock is closed: resolving it in a fresh environment gives exactly its pins).
# requirements-eee.lock: the Every Eval Ever validator, installed as its file explains.
# requirements-build.lock: pip and the build backend; the editable install is built with them
# (--no-build-isolation), so setup fetches nothing outside a lock.
$(VENV)/.installed: requirements-build.lock requirements.lock pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --no-deps -r requirements-build.lock
	$(BIN)/pip install --quiet --no-deps -r requirements.lock
	$(BIN)/pip install --quiet --no-deps --no-build-isolation -e .
	touch $@

$(VENV)/.installed-test: requirements-test.lock requirements-eee.lock $(VENV)/.installed
	$(BIN)/pip install --quiet --no-deps -r requirements-test.lock
	$(BIN)/pip install --quiet --no-deps --ignore-requires-python -r requirements-eee.lock
	touch $@

lock:
	uv pip compile pyproject.toml --extra test --python-version 3.11 -q -o requirements-test.lock
	uv pip compile pyproject.toml --python-version 3.11 -q -c requirements-test.lock -o requirements.lock
	printf 'pip\nsetuptools>=77\nsetuptools-scm>=8\n' | uv pip compile - --python-version 3.11 -q -c requirements.lock -o requirements-build.lock

data-setting:
	@if [ ! -f microctx.toml ] && ls $(SHARED_S8F)/*.json >/dev/null 2>&1; then \
	  printf '# Written by `make setup`: where the published s8f files are. The microctx CLI, notebooks,\n# JupyterLab and the tests read it from this folder and below (MICROCTX_DATA_DIR, when set, wins).\ndata_dir = "%s"\n' '$(SHARED_S8F)' > microctx.toml; \
	  echo "make setup: wrote microctx.toml (data_dir = $(SHARED_S8F))"; fi

# bubblewrap (bwrap): `microctx run` sandboxes every candidate with it. A Debian package, installed
# here when it is missing and this user may (root); otherwise one line says what to install.
sandbox-tool:
	@command -v bwrap >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
	  && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; } \
	  || echo "bubblewrap (bwrap) is missing: install it (apt-get install bubblewrap) so candidates can run sandboxed"

# chromium: the browser tests drive it headless (the same Debian package .ci/run installs). Missing
# and not installable here, `make test` stops and says so: the browser tests never skip silently.
browser-tool:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { [ "$$(id -u)" = 0 ] \
	  && command -v apt-get >/dev/null && apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; } \
	  || { echo "make test: chromium is missing and cannot be installed here: install the Debian package chromium (apt-get install chromium)"; exit 1; }

demo: setup sandbox-tool
	$(BIN)/microctx demo --out reports/demo

test: setup-test sandbox-tool browser-tool
	MICROCTX_REQUIRE_BROWSER=1 $(BIN)/python -m pytest

lint: setup-test
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/nbstripout --keep-id --verify notebooks/*.ipynb
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet --site-dir $(VENV)/site

# The reference as a site (docs/, mkdocs-material): `make docs` serves it on http://127.0.0.1:8000.
docs: setup-test
	$(BIN)/mkdocs serve

bench: setup
	$(BIN)/python benchmarks/bench_all.py

# JupyterLab on working copies of the notebooks in lab/ (the tracked notebooks stay clean); the data
# folder as above. Extra JupyterLab options: `make lab LAB_ARGS="--port 8890 --no-browser"`.
lab: setup
	$(BIN)/microctx lab --dir lab $(LAB_ARGS)

# The quick run: everything but the tests marked slow (`make test` runs them all).
test-fast: setup-test
	$(BIN)/python -m pytest -m "not slow"
