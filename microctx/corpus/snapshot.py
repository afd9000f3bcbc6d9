"""The data layer: where published artifacts are found, always checked against pinned SHA-256s.

`s8f()` returns the paths of the published s8f public corpus, answer bundle and report. Each file
is looked for, in order:
1. in the folder named by MICROCTX_DATA_DIR (when all three are there, nothing else is tried and
   nothing touches the network: tests and CI run this way), else in the project-local setting:
   `data_dir` in the nearest `microctx.toml` (or `[tool.microctx]` of a `pyproject.toml`) in the
   current folder or a parent (`project_data_dir`);
2. in the user cache: MICROCTX_CACHE_DIR, else `platformdirs.user_cache_dir("microctx")`;
3. downloaded into that cache through the HTTP layer (microctx/_io/http.py: a total deadline, a
   size cap) from its pinned URL (`S8F[key].url`, or
   `$MICROCTX_S8F_BASE_URL/<file name>` when that is set: a mirror, or a local server in tests),
   unless `download=False`.
Every file is checked against its pinned SHA-256 wherever it was found. A file with another
digest is refused with both digests shown: in MICROCTX_DATA_DIR and in the cache it is refused,
not replaced (delete it to download it again); a download with another digest is never moved
into place: it is deleted and refused.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from microctx.contract.digests import file_sha256
from microctx.errors import InputError, scrub_url, scrub_urls

DATA_DIR_ENV = "MICROCTX_DATA_DIR"
CACHE_DIR_ENV = "MICROCTX_CACHE_DIR"
BASE_URL_ENV = "MICROCTX_S8F_BASE_URL"
DEADLINE_ENV = "MICROCTX_DOWNLOAD_DEADLINE"  # seconds for one file's download (default below)
DOWNLOAD_DEADLINE_SECONDS = 600.0
READ_TIMEOUT_SECONDS = 30.0
MAX_DOWNLOAD_BYTES = 256 << 20  # the published files are a few MiB; anything far larger is refused


@dataclass(frozen=True)
class Published:
    name: str  # file name
    sha256: str
    commit: str  # commit of the publishing repository that holds it

    @property
    def url(self) -> str:
        return f"https://raw.githubusercontent.com/anthony-chaudhary/fak/{self.commit}/experiments/microcontext/{self.name}"


# Pinned: the commit and SHA-256 of each published file; a test checks they still agree.
S8F = {
    "public": Published(
        "s8f-github-issues-public-2026-08-09.json",
        "0740c911815eba7e44c63a14e021f418b66e8a42556d40f14b8b4cd58f173827",
        "b0bb41b76bbf0b0ec90a298095ea7d77fbcbd40b",
    ),
    "answers": Published(
        "s8f-github-issues-answers-2026-08-09.json",
        "af827ddca1063c602153f80b14523bda8d07e1a7e909a5c487616f2702eda05d",
        "5148dcf7ababd5c67f20e4db6a3548c8737089f5",
    ),
    "report": Published(
        "s8f-github-issues-report-2026-08-09.json",
        "386b7eba4740832debb5212552da846886daec63060babf1ce921108e9410ec7",
        "5148dcf7ababd5c67f20e4db6a3548c8737089f5",
    ),
}
S8F_SOURCE = "github.com/anthony-chaudhary/fak/issues?state=all&limit=1000"


@dataclass(frozen=True)
class S8fPaths:
    public: Path
    answers: Path
    report: Path


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
    """Where the published files are looked for first: MICROCTX_DATA_DIR, else the project-local
    setting (`project_data_dir`), else None (the cache, then a download)."""
    value = os.environ.get(DATA_DIR_ENV)
    return Path(value) if value else project_data_dir()


PROJECT_FILE = "microctx.toml"


def project_data_dir(start: str | os.PathLike | None = None) -> Path | None:
    """The project-local setting: `data_dir` in the nearest `microctx.toml`, or in `[tool.microctx]`
    of the nearest `pyproject.toml` that has that table, looking in `start` (the current folder)
    and each parent. A relative `data_dir` is relative to the file that sets it. So the CLI, a
    notebook opened anywhere under the project, and JupyterLab all find the same folder."""
    import tomllib

    folder = Path(start or os.getcwd()).resolve()
    for place in (folder, *folder.parents):
        for name, table in ((PROJECT_FILE, ()), ("pyproject.toml", ("tool", "microctx"))):
            path = place / name
            if not path.is_file():
                continue
            settings: object
            try:
                settings = tomllib.loads(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
                raise InputError(path, f"not readable TOML: {exc}") from None
            for key in table:
                settings = settings.get(key) if isinstance(settings, dict) else None
            if not isinstance(settings, dict) or "data_dir" not in settings:
                continue
            value = settings["data_dir"]
            if not isinstance(value, str) or not value:
                raise InputError(path, "expected a folder path (a non-empty string)", field="data_dir")
            return (place / Path(value).expanduser()).resolve()
    return None


OFFLINE_HINT = (
    f"offline? set {DATA_DIR_ENV} to a folder holding the three s8f files, or put "
    f'data_dir = "FOLDER" in a {PROJECT_FILE} in this folder or a parent'
)


def cache_dir() -> Path:
    """Where downloads are kept: MICROCTX_CACHE_DIR, else the user cache
    (`platformdirs.user_cache_dir("microctx")`, the folder pooch used)."""
    value = os.environ.get(CACHE_DIR_ENV)
    if value:
        return Path(value)
    import platformdirs

    return Path(platformdirs.user_cache_dir("microctx"))


def download_url(item: Published) -> str:
    """The pinned URL, or `$MICROCTX_S8F_BASE_URL/<name>` when that override is set."""
    base = os.environ.get(BASE_URL_ENV)
    return f"{base.rstrip('/')}/{item.name}" if base else item.url


def s8f(*, download: bool = True) -> S8fPaths:
    """Paths of the three published s8f files, each checked against its pinned digest.

    Offline when MICROCTX_DATA_DIR holds all three; otherwise each missing file comes from the
    cache, or is downloaded into it (`download=False` refuses instead).
    """
    folder = data_dir()
    if folder is not None:
        check_data_dir(folder)
    if folder is not None and all((folder / item.name).is_file() for item in S8F.values()):
        return S8fPaths(**{key: check_digest(folder / item.name, item.sha256) for key, item in S8F.items()})
    return S8fPaths(**{key: locate(item, folder, download) for key, item in S8F.items()})


def check_data_dir(folder: Path) -> None:
    """MICROCTX_DATA_DIR set to a folder that is not there, or holds none of the published files, is
    a mistake to report, not a reason to download silently."""
    where = f"{DATA_DIR_ENV}={folder}"
    if not folder.is_dir():
        raise InputError(where, "is not a folder; point it at the folder holding the s8f files, or unset it")
    if not any((folder / item.name).is_file() for item in S8F.values()):
        raise InputError(
            where,
            f"holds none of the s8f files ({', '.join(i.name for i in S8F.values())}); "
            "point it at the folder holding them, or unset it to use the cache",
        )


def locate(item: Published, folder: Path | None, download: bool) -> Path:
    """One published file: from `folder`, the cache, or a download into the cache; digest checked."""
    if folder is not None and (folder / item.name).is_file():
        return check_digest(folder / item.name, item.sha256)
    cache = cache_dir()
    cached = cache / item.name
    if cached.is_file():
        return check_cached(cached, item)
    if not download:
        places = (f"{DATA_DIR_ENV}={folder} or " if folder is not None else "") + f"the cache {cache}"
        raise InputError(item.name, f"not found in {places}; run `microctx data s8f` without --offline to download it")
    return fetch_with_hint(item, cache)


def fetch_with_hint(item: Published, cache: Path) -> Path:
    """`fetch_published`, and when the network fails, say how to work offline."""
    try:
        return fetch_published(item, cache)
    except InputError as exc:
        if "network failure" not in exc.message and "not complete within" not in exc.message:
            raise
        raise InputError(exc.file, f"{exc.message}; {OFFLINE_HINT}") from None


def check_cached(path: Path, item: Published) -> Path:
    """A cached file with another digest is refused, not silently replaced: a corrupted cache is
    worth knowing about, and deleting it is the user's call."""
    try:
        return check_digest(path, item.sha256)
    except InputError as exc:
        raise InputError(path, f"{exc.message} (a corrupted cache; delete it to download it again)") from None


def fetch_published(item: Published, cache: Path) -> Path:
    """Download one published file into `cache`, checked against its pinned SHA-256.

    The body streams into a temporary file in the cache (hashed as it comes, within the deadline
    and the size cap) that replaces the cached name only when the digest matches; otherwise it is
    deleted and refused, naming the file and both digests.
    """
    from microctx._io.atomic import atomic_write
    from microctx._io.http import Bounds, Budget, HttpFailure, make_client, open_stream

    url = download_url(item)
    seconds = download_deadline()
    bounds = Bounds(min(READ_TIMEOUT_SECONDS, seconds), seconds, MAX_DOWNLOAD_BYTES)
    where = scrub_url(url)
    try:
        cache.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(cache, f"cannot write the cache: {exc.strerror or exc}") from None
    try:
        with make_client(bounds=bounds) as client, open_stream(client, "GET", url, bounds=bounds, budget=Budget(seconds)) as got:
            if got.status >= 400:
                kind = "Client" if got.status < 500 else "Server"
                raise InputError(
                    where,
                    f"cannot download {item.name}: {got.status} {kind} Error: {got.response.reason_phrase} for url: {where}",
                )
            atomic_write(cache / item.name, _checked(got.chunks(), item, where))
    except HttpFailure as exc:
        raise InputError(where, f"cannot download {item.name}: {_download_problem(exc, seconds)}") from None
    # checked as it came; check again with the reader every other place uses
    return check_digest(cache / item.name, item.sha256)


def _download_problem(exc, seconds: float) -> str:
    if exc.kind == "deadline":
        return f"not complete within {seconds:g} s (the deadline, {DEADLINE_ENV}); giving up"
    if exc.kind == "too_large":
        return f"the download is larger than {MAX_DOWNLOAD_BYTES} bytes; refused"
    if exc.kind in ("connect", "network", "timeout"):
        return f"network failure ({scrub_urls(str(exc))[:200]})"
    return scrub_urls(str(exc))[:200]


def _checked(chunks: Iterator[bytes], item: Published, where: str) -> Iterator[bytes]:
    """The chunks, passed on as they come; at the end, InputError (so nothing is moved into place)
    unless they hash to the pinned digest."""
    digest = hashlib.sha256()
    for chunk in chunks:
        digest.update(chunk)
        yield chunk
    if digest.hexdigest() != item.sha256:
        raise InputError(
            where, f"downloaded {item.name} has SHA-256 {digest.hexdigest()}, not the pinned {item.sha256}; refused and deleted"
        )


def download_deadline() -> float:
    """Seconds allowed for one file's download: MICROCTX_DOWNLOAD_DEADLINE, else the default."""
    text = os.environ.get(DEADLINE_ENV, "")
    try:
        value = float(text) if text else DOWNLOAD_DEADLINE_SECONDS
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise InputError(DEADLINE_ENV, f"expected a positive number of seconds, got {text!r}")
    return value
