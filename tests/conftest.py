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

    return data.s8f()


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
