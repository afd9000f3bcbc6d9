"""The locked environment: every dependency pyproject.toml declares is pinned in the lock files
`make setup` installs from (requirements.lock; requirements-test.lock adds the test extra), each
package at one version in both, so `make setup` twice installs identical versions."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

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
    assert "pip install --quiet -r requirements.lock" in makefile and "--no-deps -e ." in makefile
    assert "'.[test]'" not in makefile  # the demo's setup never installs the test extra
