"""The data layer: MICROCTX_DATA_DIR offline, the cache, and downloads (through the HTTP layer) from a local server.

Downloads come from `tests/fake_github.FileServer` through MICROCTX_S8F_BASE_URL; the cache is a
temporary MICROCTX_CACHE_DIR. Nothing here touches the internet.
"""

from __future__ import annotations

import hashlib
import re
import socket

import pytest
from fake_github import FileServer

from microctx.cli import main
from microctx.corpus import snapshot as data
from microctx.errors import InputError

NAMES = {key: item.name for key, item in data.S8F.items()}


@pytest.fixture(scope="module")
def published(s8f):
    """The three published files' bytes, by file name (read through the data layer)."""
    return {data.S8F[key].name: getattr(s8f, key).read_bytes() for key in data.S8F}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache, MICROCTX_DATA_DIR unset and no microctx.toml in reach (the checkout's, written by
    `make setup`, would point at the data): the situation of a fresh machine."""
    folder = tmp_path / "cache"
    monkeypatch.delenv(data.DATA_DIR_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(data.CACHE_DIR_ENV, str(folder))
    return folder


def _dead_url() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{sock.getsockname()[1]}/files"


def _corrupt(blob: bytes) -> bytes:
    return blob[:-2] + b"X" + blob[-1:]


def test_pins_agree_with_the_s8f_readme(s8f):
    readme = s8f.public.parent / "README.md"
    if not readme.is_file():
        pytest.skip("MICROCTX_DATA_DIR has no README.md")
    rows = re.findall(r"^\| (s8f-\S+\.json) \| ([0-9a-f]{64}) \| commit ([0-9a-f]{40}) \|$", readme.read_text(), re.M)
    assert {name: (sha, commit) for name, sha, commit in rows} == {
        item.name: (item.sha256, item.commit) for item in data.S8F.values()
    }
    assert data.S8F["public"].url == (
        "https://raw.githubusercontent.com/anthony-chaudhary/fak/"
        "b0bb41b76bbf0b0ec90a298095ea7d77fbcbd40b/experiments/microcontext/"
        "s8f-github-issues-public-2026-08-09.json"
    )


def test_complete_data_dir_is_used_offline(s8f, tmp_path, monkeypatch):
    """With MICROCTX_DATA_DIR complete, neither the cache nor the network is touched."""
    monkeypatch.setenv(data.CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setenv(data.BASE_URL_ENV, _dead_url())
    assert data.s8f() == s8f
    assert data.s8f(download=False) == s8f
    assert not (tmp_path / "cache").exists()


def test_missing_files_are_downloaded_verified_and_cached(cache, published, monkeypatch, capsys):
    with FileServer(published) as server:
        monkeypatch.setenv(data.BASE_URL_ENV, server.base_url)
        assert main(["data", "s8f"]) == 0
        out = capsys.readouterr().out
        assert main(["data", "s8f"]) == 0  # second time: from the cache
    assert out == "".join(f"{key}\t{cache / name}\n" for key, name in NAMES.items())
    assert server.hits == {name: 1 for name in published}  # each downloaded once, then cached
    for _key, item in data.S8F.items():
        assert hashlib.sha256((cache / item.name).read_bytes()).hexdigest() == item.sha256
    assert sorted(p.name for p in cache.iterdir()) == sorted(published)  # no temporary files left
    # and offline, from the cache alone
    assert data.s8f(download=False) == data.S8fPaths(**{k: cache / n for k, n in NAMES.items()})


def test_partial_data_dir_takes_the_rest_from_the_cache(cache, published, tmp_path, monkeypatch, s8f):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / NAMES["report"]).symlink_to(s8f.report)
    monkeypatch.setenv(data.DATA_DIR_ENV, str(folder))
    with FileServer(published) as server:
        monkeypatch.setenv(data.BASE_URL_ENV, server.base_url)
        paths = data.s8f()
    assert paths.report == folder / NAMES["report"]
    assert paths.public == cache / NAMES["public"] and paths.answers == cache / NAMES["answers"]
    assert server.hits == {NAMES["public"]: 1, NAMES["answers"]: 1}


def test_wrong_digest_download_is_refused_showing_both_digests(cache, published, monkeypatch, capsys):
    bad = dict(published)
    bad[NAMES["answers"]] = _corrupt(published[NAMES["answers"]])
    bad_sha = hashlib.sha256(bad[NAMES["answers"]]).hexdigest()
    with FileServer(bad) as server:
        monkeypatch.setenv(data.BASE_URL_ENV, server.base_url)
        code = main(["data", "s8f"])
    err = capsys.readouterr().err
    assert code == 2
    line = [line for line in err.splitlines() if line.startswith("microctx data:")]
    assert len(line) == 1
    assert f"downloaded {NAMES['answers']} has SHA-256 {bad_sha}, not the pinned {data.S8F['answers'].sha256}" in line[0]
    assert f"{server.base_url}/{NAMES['answers']}" in line[0]
    # the good file before it is cached; the bad one is not kept, nor any temporary file
    assert sorted(p.name for p in cache.iterdir()) == [NAMES["public"]]


def test_corrupted_cached_file_is_refused_not_replaced(cache, published, monkeypatch):
    cache.mkdir()
    for name, blob in published.items():
        (cache / name).write_bytes(blob)
    corrupted = _corrupt(published[NAMES["public"]])
    (cache / NAMES["public"]).write_bytes(corrupted)
    with FileServer(published) as server:
        monkeypatch.setenv(data.BASE_URL_ENV, server.base_url)
        with pytest.raises(InputError) as caught:
            data.s8f()
    message = str(caught.value)
    assert message.startswith(str(cache / NAMES["public"]) + ": ")
    assert hashlib.sha256(corrupted).hexdigest() in message and data.S8F["public"].sha256 in message
    assert "delete it to download it again" in message
    assert server.hits == {}  # refused, not silently downloaded again
    assert (cache / NAMES["public"]).read_bytes() == corrupted
    # deleted, it is downloaded again and verified
    (cache / NAMES["public"]).unlink()
    with FileServer(published) as server:
        monkeypatch.setenv(data.BASE_URL_ENV, server.base_url)
        assert data.s8f().public == cache / NAMES["public"]
    assert server.hits == {NAMES["public"]: 1}


def test_corrupted_file_in_data_dir_is_refused(tmp_path, monkeypatch, s8f, published):
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / NAMES["public"]).symlink_to(s8f.public)
    (folder / NAMES["answers"]).symlink_to(s8f.answers)
    (folder / NAMES["report"]).write_bytes(_corrupt(published[NAMES["report"]]))
    monkeypatch.setenv(data.DATA_DIR_ENV, str(folder))
    monkeypatch.setenv(data.BASE_URL_ENV, _dead_url())
    with pytest.raises(InputError, match=f"SHA-256 [0-9a-f]{{64}} is not the pinned {data.S8F['report'].sha256}"):
        data.s8f()


def test_offline_without_files_says_how_to_get_them(cache, capsys):
    assert main(["data", "s8f", "--offline"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"microctx data: {NAMES['public']}: not found in the cache {cache}; "
        "run `microctx data s8f` without --offline to download it\n"
    )


def test_unreachable_or_missing_download_is_one_clear_line(cache, monkeypatch, capsys):
    dead = _dead_url()
    monkeypatch.setenv(data.BASE_URL_ENV, dead)
    assert main(["data", "s8f"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("microctx data:")]
    assert len(err) == 1 and f"{dead}/{NAMES['public']}: cannot download {NAMES['public']}: network failure" in err[0]
    with FileServer({}) as server:
        monkeypatch.setenv(data.BASE_URL_ENV, server.base_url)
        assert main(["data", "s8f"]) == 2
    err = capsys.readouterr().err
    assert f"cannot download {NAMES['public']}: 404 Client Error" in err
    assert not cache.exists() or list(cache.iterdir()) == []


def test_env_file_naming_one_of_the_data_files_is_refused(tmp_path, monkeypatch, s8f, capsys):
    """`data s8f --env F` with F one of the files it found (a slip of tab completion) wrote the
    shell assignments over the answer bundle; now it is refused, exit 2, the file untouched."""
    folder = tmp_path / "data"
    folder.mkdir()
    for key in ("public", "answers", "report"):
        (folder / NAMES[key]).write_bytes(getattr(s8f, key).read_bytes())
    monkeypatch.setenv(data.DATA_DIR_ENV, str(folder))
    monkeypatch.setenv(data.BASE_URL_ENV, _dead_url())
    target = folder / NAMES["answers"]
    before = target.read_bytes()
    assert main(["data", "s8f", "--env", str(target)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--env is the same file as the input ANSWERS" in err, err
    assert target.read_bytes() == before
