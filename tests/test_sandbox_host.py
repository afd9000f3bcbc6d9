"""The sandbox, second pass: the candidate never runs as the runner's uid, its root is read-only,
and what it leaves in its cache folder cannot hurt the host or a later run.

Each hostile candidate (tests/candidates/hostile_host.py) attacks; each attack must fail and
leave the host unchanged.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

import pytest

from microctx.candidates import sandbox as sb
from microctx.candidates.cachedir import MARKER
from microctx.candidates.hostile_tree import MAX_DEPTH
from microctx.candidates.run_record import manifest_path
from microctx.candidates.run_record import read_manifest_document as read_manifest
from microctx.candidates.runner import run_candidate
from microctx.cli import main
from microctx.errors import InputError

HERE = Path(__file__).resolve().parent
HOSTILE = HERE / "candidates" / "hostile_host.py"


def _run(s8f, tmp_path, function, *options, name="out"):
    out = tmp_path / f"{name}.json"
    code = main(["run", f"{HOSTILE}:{function}", "--public", str(s8f.public), "--submission", str(out), *options])
    manifest = json.loads(manifest_path(out).read_text())
    report = json.loads(out.read_text())["hostile"] if out.exists() else None
    return code, manifest, report


def _tree(folder: Path) -> list[tuple[str, int, int]]:
    """(relative path, mode, uid) of everything under `folder`, walked without following links."""
    found, todo = [], [(folder, 0)]
    while todo:
        here, depth = todo.pop()
        for entry in os.scandir(here):
            info = entry.stat(follow_symlinks=False)
            found.append((os.path.relpath(entry.path, folder), info.st_mode, info.st_uid))
            if entry.is_dir(follow_symlinks=False):
                assert depth < 100, "the tree is deeper than the cleaner allows"
                todo.append((Path(entry.path), depth + 1))
    return found


def test_the_root_is_read_only_and_the_uid_is_not_the_runners(s8f, tmp_path):
    code, manifest, report = _run(s8f, tmp_path, "write_root")
    assert code == 0, manifest["error"]
    assert report.pop("uid") == sb.SANDBOX_UID
    assert report.pop("/candidate/planted") == "done" and report.pop("/tmp/planted") == "done"
    assert report == {p: "refused: Read-only file system" for p in report}  # "/", /usr, /opt, /home, /etc
    assert len(report) == 5 and not Path("/planted").exists() and not Path("/usr/planted").exists()


def test_cache_litter_is_cleaned_and_owned_by_an_unprivileged_uid(s8f, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    code, manifest, report = _run(s8f, tmp_path, "litter_cache", "--cache-dir", str(cache))
    assert code == 0, manifest["error"]
    assert {k: report[k] for k in ("setuid", "fifo", "socket", "symlink", "deep")} == dict.fromkeys(
        ("setuid", "fifo", "socket", "symlink", "deep"), "done"
    )  # every attack got its file in: the runner's cleaning is what stops it
    assert manifest["cache_cleaned"]["removed"] == {"deep": 1, "fifo": 1, "socket": 1, "symlink": 1}
    assert manifest["cache_cleaned"]["set_id_cleared"] == 1
    tree = _tree(cache)
    assert all(stat.S_ISDIR(mode) or stat.S_ISREG(mode) for _, mode, _ in tree)
    assert not any(mode & 0o7000 for _, mode, _ in tree)
    assert max(path.count(os.sep) + 1 for path, _, _ in tree) == MAX_DEPTH - 1  # d/d/...: levels below the bound kept
    owners = {uid for path, _, uid in tree if path != MARKER}
    assert owners == {sb.host_uid()} and (os.geteuid() != 0 or owners == {sb.NOBODY_UID})
    assert (cache / "kept.txt").read_text() == "an ordinary cache entry"
    # a later run with the same cache folder is not held up by what the first one left
    again = run_candidate("exact-sql", s8f.public, tmp_path / "again.json", sandbox=sb.SandboxSettings(cache_dir=str(cache)))
    assert again["ok"] and again["cache_cleaned"]["removed"] == {}


def test_a_run_racing_another_runs_cache_cleaning_cannot_chmod_a_host_file(s8f, tmp_path):
    """A sweep's runs share the cache folder and run side by side: while one run's cleaner clears
    the set-id bits it found, a candidate still running in another run swaps the files not yet
    reached for links to a host file. The cleaner (root, when the runner is) changes the mode of
    the files it listed only, never of what a link points at."""
    import subprocess
    import sys
    import time

    cache = tmp_path / "cache"
    cache.mkdir()
    victim = tmp_path / "victim"
    victim.write_text("a host file the candidate cannot see")
    victim.chmod(0o600)
    out = tmp_path / "racer.json"
    argv = [sys.executable, "-m", "microctx", "run", f"{HOSTILE}:race_cache_cleaning", "--public", str(s8f.public)]
    argv += ["--submission", str(out), "--cache-dir", str(cache), "--param", f"victim={json.dumps(str(victim))}"]
    racer = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 240
        while not (cache / "racer-ready").exists():
            assert racer.poll() is None and time.monotonic() < deadline, racer.stdout.read().decode()[-2000:]
            time.sleep(0.05)
        other = run_candidate("exact-sql", s8f.public, tmp_path / "other.json", sandbox=sb.SandboxSettings(cache_dir=str(cache)))
        assert racer.wait(timeout=240) == 0, racer.stdout.read().decode()[-2000:]
    finally:
        racer.kill()
    report = json.loads(out.read_text())["hostile"]
    assert report["started"] and report["swapped"] > 0, report  # the race was run: links stood where set-id files were
    assert stat.S_IMODE(victim.stat().st_mode) == 0o600, oct(victim.stat().st_mode)
    assert other["ok"] and other["cache_cleaned"]["removed"].get("symlink", 0) > 0, other["cache_cleaned"]
    assert all(stat.S_ISDIR(mode) or stat.S_ISREG(mode) for _, mode, _ in _tree(cache))


def test_cache_folders_that_are_not_microctx_caches_are_refused(s8f, tmp_path, monkeypatch, capsys):
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "authorized_keys").write_text("ssh-ed25519 AAAA the-owner\n")
    monkeypatch.setenv("HOME", str(home))
    answers_copy = tmp_path / "notes"
    answers_copy.mkdir()
    bundle = json.loads(s8f.answers.read_text())
    (answers_copy / MARKER).write_text("a cache folder, once")
    (answers_copy / "answers.json.bak").write_text(json.dumps(bundle["answers"], indent=1))  # re-serialised, renamed
    full = tmp_path / "full"
    full.mkdir()
    (full / "mine.txt").write_text("someone's files")
    base = ["run", "exact-sql", "--public", str(s8f.public), "--submission", str(tmp_path / "x.json")]
    cases = {
        home / ".ssh": "a dot-folder",
        home: "not your home",
        tmp_path: "not your home",  # above the home folder
        answers_copy: "holds an answer bundle",
        full: f"no {MARKER}",
        s8f.public.parent: "MICROCTX_DATA_DIR",
    }
    for folder, said in cases.items():
        assert main([*base, "--cache-dir", str(folder)]) == 2, folder
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and said in err, (folder, err)
    assert (home / ".ssh" / "authorized_keys").read_text() == "ssh-ed25519 AAAA the-owner\n"
    assert sorted(p.name for p in (home / ".ssh").iterdir()) == ["authorized_keys"]
    assert not (tmp_path / "x.json").exists() and not list(full.glob(MARKER))


def test_a_killed_runners_folder_and_cgroups_are_removed_by_the_next_run(s8f, tmp_path):
    from microctx.candidates import limits

    dead = f"{limits.RUN_PREFIX}999999999-1-x"  # no such pid: its runner is gone
    folder = Path(tempfile.gettempdir()) / dead
    (folder / "work").mkdir(parents=True)
    (folder / "work" / "left.txt").write_text("litter")
    alive = Path(tempfile.mkdtemp(prefix=limits.run_name()))  # this runner's own: kept
    groups = []
    mounts, own = limits._cgroup_mounts(), limits._own_cgroups()
    for controller, point in mounts.items():
        group = point / own.get(controller, "/").lstrip("/") / dead
        try:
            group.mkdir()
            groups.append(group)
        except OSError:
            pass
    manifest = run_candidate("exact-sql", s8f.public, tmp_path / "out.json")
    assert manifest["ok"]
    assert not folder.exists() and alive.is_dir() and not any(g.exists() for g in groups)
    alive.rmdir()


def test_a_submission_beside_another_runs_manifest_is_not_read_as_its_set(s8f, tmp_path):
    out = tmp_path / "out.json"
    manifest = run_candidate("exact-sql", s8f.public, out)
    assert read_manifest(out) == json.loads(manifest_path(out).read_text()) and manifest["ok"]
    document = json.loads(out.read_text())
    out.write_text(json.dumps(document, indent=2))  # as a kill between the two renames would leave it: a new submission
    assert read_manifest(out) is None
    with pytest.raises(InputError, match="does not belong to the submission"):
        read_manifest(out, strict=True)


def test_a_runner_killed_between_its_two_renames(s8f, tmp_path):
    """strace kills the runner at its second rename (the manifest's): the new submission beside
    the earlier run's manifest is never read as one set, and the next run removes the killed
    runner's folder and cgroups."""
    import shutil
    import subprocess
    import sys

    from microctx.candidates import limits

    if shutil.which("strace") is None:
        pytest.skip("strace is not installed")
    out = tmp_path / "out.json"
    assert run_candidate("exact-sql", s8f.public, out)["ok"]
    earlier = manifest_path(out).read_bytes()
    inject = "inject=rename,renameat,renameat2:signal=SIGKILL:when=2"
    argv = ["strace", "-o", "/dev/null", "-e", "trace=rename,renameat,renameat2", "-e", inject]
    argv += [
        sys.executable,
        "-m",
        "microctx",
        "run",
        f"{HOSTILE}:write_root",
        "--public",
        str(s8f.public),
        "--submission",
        str(out),
    ]
    done = subprocess.run(argv, capture_output=True, env={**os.environ}, timeout=300)
    assert done.returncode != 0
    # Killed at its second rename: a microctx reader first finishes (or drops) the journaled set it
    # finds, then sees one whole set: the new submission with its manifest, or the old pair, or the
    # new submission beside no manifest of its own. Never a submission read under another's manifest.
    manifest = read_manifest(out)
    submission = json.loads(out.read_text())
    if manifest is None:
        assert "hostile" in submission
    elif manifest["candidate"] == "exact-sql":
        assert "hostile" not in submission and manifest_path(out).read_bytes() == earlier
    else:
        assert manifest["candidate"].endswith("hostile_host.py:write_root") and "hostile" in submission
    left = [
        p for p in Path(tempfile.gettempdir()).iterdir() if p.name.startswith(limits.RUN_PREFIX) and limits.owner_is_gone(p.name)
    ]
    assert left  # the killed runner's folder
    mounts, own = limits._cgroup_mounts(), limits._own_cgroups()
    groups = [point / own.get(c, "/").lstrip("/") / p.name for c, point in mounts.items() for p in left]
    assert run_candidate("exact-sql", s8f.public, tmp_path / "next.json")["ok"]
    assert not any(p.exists() for p in left) and not any(g.exists() for g in groups)
