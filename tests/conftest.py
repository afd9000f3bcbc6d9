"""Shared fixtures: the published s8f artifacts, found through the data layer.

Tests find them the way the CLI does: MICROCTX_DATA_DIR, else the `microctx.toml` that `make setup`
writes when ../shared/s8f sits beside the checkout, else the cache or a download. When none of
these can give them (offline, a lone clone), the session stops once, saying what to set, instead
of failing every test that reads s8f.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def s8f():
    """Paths of the published public corpus, answers and report (digests checked)."""
    from microctx.corpus import snapshot as data
    from microctx.errors import InputError

    try:
        paths = data.s8f()
    except InputError as exc:  # said once, not once per test
        hint = "" if data.OFFLINE_HINT in str(exc) else f"; {data.OFFLINE_HINT}"
        pytest.exit(f"the s8f files are not reachable: {exc}{hint}", returncode=2)
    # a lone clone: found in the cache (or downloaded into it); from here on the session reads
    # them through MICROCTX_DATA_DIR like any other run, so the isolation tests see the variable
    # they check the runner strips
    if not os.environ.get(data.DATA_DIR_ENV) and len({p.parent for p in (paths.public, paths.answers, paths.report)}) == 1:
        os.environ[data.DATA_DIR_ENV] = str(paths.public.parent)
    return paths


# ---- the tiny synthetic corpus (tests/data, made by tests/data/make_synthetic.py): no s8f needed

SYNTHETIC = ROOT / "tests" / "data"


@pytest.fixture(scope="session")
def synthetic():
    """Paths of the synthetic public corpus, answers, report and raw export (60 issues)."""
    from types import SimpleNamespace

    return SimpleNamespace(**{key: SYNTHETIC / f"synthetic-{key}.json" for key in ("public", "answers", "report", "raw")})


@pytest.fixture(scope="session")
def synthetic_corpus(synthetic):
    from microctx import load_corpus

    return load_corpus(synthetic.public)


@pytest.fixture(scope="session")
def synthetic_answers(synthetic):
    from microctx import load_answers

    return load_answers(synthetic.answers)


@pytest.fixture(scope="session")
def s8f_corpus(s8f):
    from microctx import load_corpus

    return load_corpus(s8f.public)


@pytest.fixture(scope="session")
def s8f_answers(s8f):
    from microctx import load_answers

    return load_answers(s8f.answers)


@pytest.fixture(scope="module")
def devkit(tmp_path_factory, s8f_answers, s8f_corpus):
    """The s8f devkit (train and tune answers, no test), written once per test module."""
    from microctx.candidates.devkit import make_devkit
    from microctx.contract.canonical import dumps

    path = tmp_path_factory.mktemp("devkit") / "devkit.json"
    path.write_bytes(dumps(make_devkit(s8f_answers, corpus=s8f_corpus)))
    return path


# The held-out ledger (microctx.grading.ledger): no test writes to the user's real one. The whole
# session points at a temporary file (module- and session-scoped fixtures grade too), and each
# test gets its own file.
os.environ["MICROCTX_LEDGER"] = str(Path(__import__("tempfile").mkdtemp(prefix="microctx-test-ledger-")) / "ledger.sqlite")


@pytest.fixture(autouse=True)
def _own_ledger(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("MICROCTX_LEDGER", str(tmp_path_factory.mktemp("ledger") / "ledger.sqlite"))


# A real PostgreSQL server for the grading-service tests (tests/postgres.py), one per session, started
# only when a test asks for it; a test fails, saying why, when it cannot start.
@pytest.fixture(scope="session")
def pg():
    from postgres import PostgresServer, PostgresUnavailable

    try:
        server = PostgresServer().start()
    except PostgresUnavailable as exc:
        pytest.fail(f"PostgreSQL could not start, so the PostgreSQL half of the service tests cannot run: {exc}")
    yield server
    server.stop()
