"""Shared fixtures: the published s8f artifacts, found through the data layer.

Tests read them from MICROCTX_DATA_DIR (CI points it at ../shared/s8f). When it is unset and the
checkout sits beside ../shared/s8f, that folder is used, so `pytest` works in a fresh clone.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_BESIDE = ROOT.parent / "shared" / "s8f"
if not os.environ.get("MICROCTX_DATA_DIR") and _BESIDE.is_dir():
    os.environ["MICROCTX_DATA_DIR"] = str(_BESIDE)


@pytest.fixture(scope="session")
def s8f():
    """Paths of the published public corpus, answers and report (digests checked)."""
    from microctx.corpus import snapshot as data

    paths = data.s8f()
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
