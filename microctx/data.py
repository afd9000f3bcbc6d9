"""The data layer: where published artifacts are found, always checked against pinned SHA-256s.

`s8f()` returns the paths of the published s8f public corpus, answer bundle and report. It looks
in the folder named by MICROCTX_DATA_DIR; a file whose digest is not the pinned one is refused
with both digests shown.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from .errors import InputError

DATA_DIR_ENV = "MICROCTX_DATA_DIR"


@dataclass(frozen=True)
class Published:
    name: str  # file name
    sha256: str
    commit: str  # commit of the publishing repository that holds it

    @property
    def url(self) -> str:
        return (f"https://raw.githubusercontent.com/anthony-chaudhary/fak/{self.commit}"
                f"/experiments/microcontext/{self.name}")


# Pinned from the s8f README (../shared/s8f/README.md); a test checks they still agree.
S8F = {
    "public": Published("s8f-github-issues-public-2026-08-09.json",
                        "0740c911815eba7e44c63a14e021f418b66e8a42556d40f14b8b4cd58f173827",
                        "b0bb41b76bbf0b0ec90a298095ea7d77fbcbd40b"),
    "answers": Published("s8f-github-issues-answers-2026-08-09.json",
                         "af827ddca1063c602153f80b14523bda8d07e1a7e909a5c487616f2702eda05d",
                         "5148dcf7ababd5c67f20e4db6a3548c8737089f5"),
    "report": Published("s8f-github-issues-report-2026-08-09.json",
                        "386b7eba4740832debb5212552da846886daec63060babf1ce921108e9410ec7",
                        "5148dcf7ababd5c67f20e4db6a3548c8737089f5"),
}
S8F_SOURCE = "github.com/anthony-chaudhary/fak/issues?state=all&limit=1000"


@dataclass(frozen=True)
class S8fPaths:
    public: Path
    answers: Path
    report: Path


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def check_digest(path: Path, expected: str) -> Path:
    """Return `path` if its SHA-256 is `expected`; otherwise refuse it, showing both digests."""
    try:
        actual = file_sha256(path)
    except OSError as exc:
        raise InputError(path, f"cannot read file: {exc.strerror or exc}") from None
    if actual != expected:
        raise InputError(path, f"SHA-256 {actual} is not the pinned {expected}; refusing the file")
    return path


def data_dir() -> Path | None:
    value = os.environ.get(DATA_DIR_ENV)
    return Path(value) if value else None


def s8f() -> S8fPaths:
    """Paths of the three published s8f files, each checked against its pinned digest."""
    folder = data_dir()
    if folder is None:
        raise InputError(DATA_DIR_ENV, "not set; point it at the folder holding the published s8f files")
    paths = {}
    for key, item in S8F.items():
        path = folder / item.name
        if not path.is_file():
            raise InputError(path, f"not found (looked in {DATA_DIR_ENV}={folder})")
        paths[key] = check_digest(path, item.sha256)
    return S8fPaths(**paths)
