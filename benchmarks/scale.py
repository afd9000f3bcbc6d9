"""A large corpus for benchmarks, made by replicating the real s8f records under new numbers.

Copy k of issue N becomes issue N + k * STRIDE. In-corpus `#M` references of copy k are
rewritten to `#(M + k * STRIDE)` so each copy keeps its own reference graph, and each copy's
title and body get a copy tag so identical-title/body grouping does not merge copies.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import orjson  # noqa: E402

from microctx.contract.patterns import REFERENCE  # noqa: E402
from microctx.corpus import snapshot as data  # noqa: E402
from microctx.corpus.public import corpus_to_export, load_corpus  # noqa: E402

STRIDE = 10_000


def make_scale_export(corpus, n: int) -> list[dict]:
    """`n` gh-export rows replicating the corpus's records (copy 0 is the original)."""
    return [row for copy in scale_copies(corpus, n) for row in copy]


def scale_copies(corpus, n: int) -> Iterator[list[dict]]:
    """The rows of `make_scale_export`, one copy of the corpus at a time."""
    rows = corpus_to_export(corpus)
    numbers = {row["number"] for row in rows}
    if max(numbers) >= STRIDE:
        raise ValueError(f"issue numbers must stay below {STRIDE}")
    made = 0
    copy = 0
    while made < n:
        shift = copy * STRIDE

        def renumber(match, shift=shift):
            number = int(match.group(1))
            if number not in numbers or not shift:
                return match.group(0)
            start, end = match.span(1)
            whole = match.group(0)
            offset = match.start(0)
            return whole[: start - offset] + str(number + shift) + whole[end - offset :]

        out: list[dict] = []
        for row in rows[: n - made]:
            if copy == 0:
                out.append(row)
                continue
            new = dict(row)
            new["number"] = row["number"] + shift
            new["title"] = f"{REFERENCE.sub(renumber, row['title'])} [copy {copy}]"
            new["body"] = f"{REFERENCE.sub(renumber, row['body'])}\n\n[copy {copy}]"
            new["url"] = row["url"].rsplit("/", 1)[0] + f"/{new['number']}"
            out.append(new)
        made += len(out)
        copy += 1
        yield out


def write_scale_export(folder: str | os.PathLike, n: int) -> Path:
    """Write a raw export of `n` records to `folder/raw-<n>.json` (reused when present), one copy
    of the corpus at a time (the same bytes as `orjson.dumps(make_scale_export(corpus, n))`)."""
    Path(folder).mkdir(parents=True, exist_ok=True)
    path = Path(folder) / f"raw-{n}.json"
    if not path.exists():
        partial = path.with_suffix(".partial")
        with open(partial, "wb") as handle:
            handle.write(b"[")
            for index, copy in enumerate(scale_copies(load_corpus(data.s8f().public), n)):
                handle.write((b"," if index else b"") + orjson.dumps(copy)[1:-1])
            handle.write(b"]")
        partial.rename(path)
    return path


def freeze_scale_corpus(folder: str | os.PathLike, n: int) -> tuple[Path, Path]:
    """Freeze an `n`-record scale corpus into `folder`; returns (public_path, answers_path)."""
    from microctx.corpus.export import with_export
    from microctx.corpus.freeze import freeze_files

    folder = Path(folder)
    public, answers = folder / f"public-{n}.json", folder / f"answers-{n}.json"
    if not (public.exists() and answers.exists()):
        raw = write_scale_export(folder, n)
        paths = (public, answers, folder / f"report-{n}.json")
        with_export(raw, lambda issues: freeze_files(issues, f"scale:{n}", paths))
    return public, answers
