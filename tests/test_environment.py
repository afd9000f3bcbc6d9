"""The locked environment: every dependency pyproject.toml declares is pinned in the lock files
`make setup` installs from (requirements.lock; requirements-test.lock adds the test extra), each
package at one version in both; `make setup` installs the lock only (--no-deps), and each lock is
closed: pip resolving it from nothing, in two fresh environments, lands on exactly its pins, so
`make setup` twice, or on two machines, installs identical versions."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def pins(name: str) -> dict[str, str]:
    found = re.findall(r"^([A-Za-z0-9_.\-\[\]]+)==([^\s;]+)", (ROOT / name).read_text(), re.M)
    return {canonical(package.split("[")[0]): version for package, version in found}


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def declared(requirements: list[str]) -> set[str]:
    return {canonical(re.split(r"[<>=!~;\[ ]", r, maxsplit=1)[0]) for r in requirements}


def test_every_declared_dependency_is_pinned_at_one_version():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    runtime, test = pins("requirements.lock"), pins("requirements-test.lock")
    missing = declared(project["dependencies"]) - set(runtime)
    assert not missing, f"not in requirements.lock (run `make lock`): {sorted(missing)}"
    missing = declared(project["dependencies"] + project["optional-dependencies"]["test"]) - set(test)
    assert not missing, f"not in requirements-test.lock (run `make lock`): {sorted(missing)}"
    assert {k: v for k, v in test.items() if k in runtime} == runtime  # one version of each package
    assert "pytest" not in runtime and "playwright" not in runtime  # the demo installs no test tool


def test_make_setup_installs_from_the_lock_without_resolving():
    makefile = (ROOT / "Makefile").read_text()
    installs = re.findall(r"^\t\$\(BIN\)/pip install (.*)$", makefile, re.M)
    assert installs == [
        "--quiet --no-deps -r requirements-build.lock",
        "--quiet --no-deps -r requirements.lock",
        "--quiet --no-deps --no-build-isolation -e .",
        "--quiet --no-deps -r requirements-test.lock",
        "--quiet --no-deps --ignore-requires-python -r requirements-eee.lock",
    ], installs  # the lock files only: nothing resolved, nothing unpinned
    assert "'.[test]'" not in makefile  # the demo's setup never installs the test extra
    build = pins("requirements-build.lock")  # pip and the build backend: nothing fetched outside a lock
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    assert declared(requires) | {"pip"} <= set(build), sorted(declared(requires) | {"pip"} - set(build))
    assert all(pins("requirements.lock")[k] == v for k, v in build.items() if k in pins("requirements.lock"))
    eee = pins("requirements-eee.lock")
    assert list(eee) == ["every-eval-ever"] and not set(eee) & set(pins("requirements-test.lock"))
    assert {"pydantic", "rich", "jsonschema"} <= set(pins("requirements-test.lock"))  # what its validator imports


def resolved(lock: str, venv: Path) -> dict[str, str]:
    """What pip, in a fresh virtual environment, resolves `lock` to (with dependencies, from the
    index): name -> version, from its installation report (nothing is installed)."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    report = venv / "report.json"
    pip = [str(venv / "bin" / "pip"), "install", "--quiet", "--dry-run", "--ignore-installed", "--report", str(report)]
    done = subprocess.run([*pip, "-r", str(ROOT / lock)], capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    return {canonical(i["metadata"]["name"]): i["metadata"]["version"] for i in json.loads(report.read_text())["install"]}


@pytest.mark.slow
def test_two_fresh_environments_resolve_each_lock_to_exactly_its_pins(tmp_path):
    """Each lock resolved from nothing (PyPI), in its own new virtual environment: pip adds no
    package, drops none and moves no version, so `make setup`'s --no-deps install from it is
    complete, and two environments made from the locks agree on every shared package."""
    locks = ("requirements.lock", "requirements-test.lock", "requirements-build.lock")
    with ThreadPoolExecutor(2) as pool:
        got = dict(zip(locks, pool.map(lambda lock: resolved(lock, tmp_path / lock.removesuffix(".lock")), locks)))
    for lock in locks:
        expected = pins(lock)
        assert got[lock] == expected, {
            "added": sorted(set(got[lock]) - set(expected)),
            "missing": sorted(set(expected) - set(got[lock])),
            "moved": sorted(k for k in set(got[lock]) & set(expected) if got[lock][k] != expected[k]),
        }
    shared = set(got["requirements.lock"]) & set(got["requirements-test.lock"])
    assert shared == set(got["requirements.lock"])
    assert all(got["requirements.lock"][k] == got["requirements-test.lock"][k] for k in shared)
