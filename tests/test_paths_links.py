"""Paths through a symbolic link and `..` (microctx._io.paths.resolved): the kernel follows the
link before it climbs, so `sub/link/../two` is the link target's parent's `two`, not `sub/two`."""

from __future__ import annotations

from pathlib import Path

from microctx._io.atomic import AtomicOutputs
from microctx._io.paths import resolved


def test_a_set_written_through_a_link_and_dotdot_lands_where_the_kernel_puts_it(tmp_path, monkeypatch):
    """`resolved` made the path absolute (dropping `link/..` by its letters) before following the
    link: a set written to `sub/link/../two` locked `sub/two`, which does not exist, and the
    command died with a FileNotFoundError traceback instead of writing into `two`."""
    monkeypatch.chdir(tmp_path)
    for folder in ("real", "two", "sub"):
        (tmp_path / folder).mkdir()
    (tmp_path / "sub" / "link").symlink_to("../real")
    spelled = Path("sub/link/../two")
    assert resolved(spelled) == (tmp_path / "two").resolve()
    with AtomicOutputs() as out:
        out.write(spelled / "a", b"new a")
        out.write(spelled / "b", b"new b")
    assert [(tmp_path / "two" / n).read_bytes() for n in ("a", "b")] == [b"new a", b"new b"]
