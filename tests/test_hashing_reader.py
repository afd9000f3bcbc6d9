"""HashingReader: a file hashed as it is read, each byte once, whatever the reader looks back at."""

from __future__ import annotations

import hashlib
import os

import pytest

from microctx._io.hashing import HashingReader


@pytest.fixture()
def data_file(tmp_path):
    data = os.urandom(300_000)
    path = tmp_path / "data.bin"
    path.write_bytes(data)
    return path, hashlib.sha256(data).hexdigest()


def test_a_look_ahead_and_a_seek_back_are_hashed_once(data_file):
    path, expected = data_file
    with open(path, "rb") as handle:
        reader = HashingReader(handle)
        reader.read(70_000)  # look ahead, as the public corpus reader does for its head
        reader.seek(1_234)
        assert reader.hexdigest() is None  # not read to the end yet
        while reader.read(65_536):
            pass
        assert reader.hexdigest() == expected


def test_a_file_not_read_to_the_end_has_no_digest(data_file):
    path, _ = data_file
    with open(path, "rb") as handle:
        reader = HashingReader(handle)
        reader.read(299_999)
        assert reader.hexdigest() is None


def test_a_read_past_unread_bytes_is_refused(data_file):
    path, _ = data_file
    with open(path, "rb") as handle:
        reader = HashingReader(handle)
        reader.read(10)
        reader.seek(100)
        with pytest.raises(ValueError):
            reader.read(10)


def test_verify_hashes_the_public_bytes_it_parses(tmp_path, s8f, monkeypatch):
    """A large public corpus parsed in batches is hashed as it is read: a file replaced between
    a hash by name and the parse was checked as one file and named by the other's digest."""
    import hashlib

    import orjson

    from microctx._io import jsonscan
    from microctx.corpus import verify as verifying

    public = tmp_path / "public.json"
    first = s8f.public.read_bytes()
    document = orjson.loads(first)
    document["records"] = document["records"][:-1]
    second = orjson.dumps(document)
    public.write_bytes(first)
    real = jsonscan.ObjectStream

    def replaced_first(*args, **kwargs):  # the file changes as its parse begins
        public.write_bytes(second)
        return real(*args, **kwargs)

    monkeypatch.setattr(verifying, "STREAM_PUBLIC_FROM_BYTES", 0)
    monkeypatch.setattr(verifying, "ObjectStream", replaced_first)
    digest, parsed = verifying._load_public(public)
    assert parsed == document and digest == hashlib.sha256(second).hexdigest()
