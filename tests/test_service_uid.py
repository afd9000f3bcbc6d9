"""The service as its own system user: a researcher under another uid can submit, not read the answers.

The service runs as `microctx-svc` (created with `useradd --system` when missing) from a copy
of this checkout's package in a world-readable temporary folder; its answer file and state sit
in a folder only it can enter. A researcher process under `microctx-researcher` then tries to
read the answer file and the state (both refused by the kernel) and submits over HTTP (scored).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

import pytest
from postgres import RUNUSER, system_user
from service_support import ROOT, ServiceProcess, body, submission

SERVICE_USER, RESEARCHER = "microctx-svc", "microctx-researcher"

RESEARCHER_SCRIPT = r"""
import json, sys, httpx
answers, state, url, token, document = sys.argv[1:6]
seen = {}
for name, path in (("answers", answers), ("state", state)):
    try:
        open(path, "rb").read(1)
        seen[name] = "read"
    except PermissionError:
        seen[name] = "refused"
reply = httpx.post(url + "/v1/submissions", content=open(document, "rb").read(),
                   headers={"Authorization": "Bearer " + token}, timeout=60)
seen["status"] = reply.status_code
seen["reply"] = sorted(reply.json())
print(json.dumps(seen))
"""


def _need_root() -> None:
    if os.geteuid() != 0:
        if os.environ.get("CI"):
            pytest.fail("the uid test needs root (to create the system users and switch to them); CI runs as root")
        pytest.skip("needs root: it creates two system users and runs processes as them")


def _as(user: str) -> list[str]:
    return [RUNUSER, "-u", user, "--"]


def _python_for(user: str) -> str:
    """An interpreter of this Python version that `user` may run (the venv's may sit under /root)."""
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    for candidate in (sys.executable, shutil.which(f"python{version}"), f"/usr/bin/python{version}"):
        if candidate and subprocess.run(
            [*_as(user), candidate, "-c", "import sys; print(sys.version_info[:2])"], capture_output=True, text=True
        ).stdout.strip() == str(sys.version_info[:2]):
            return candidate
    pytest.fail(
        f"no Python {version} that the user {user} may run (the venv's interpreter is {sys.executable}): "
        f"install python{version} system-wide"
    )


NEEDED = (
    "import microctx.service.server, microctx.service.app, microctx.grading.slices, psycopg, alembic.command, httpx; "
    "httpx.Client().close()"  # httpx imports its transport (httpcore, h11) only here
)
CLOSURE = (
    NEEDED
    + "; import json, sys; print(json.dumps(sorted({m.__file__ for m in list(sys.modules.values()) if getattr(m, '__file__', None)})))"
)


def _libraries(user: str, code: Path, folder: Path) -> list[str]:
    """Where `user` finds the service's libraries: this environment's site-packages when it may
    read them, else a copy of just the packages the service imports (a venv under /root, or in a
    0700 folder, is out of reach of other users)."""
    site = list(dict.fromkeys(sysconfig.get_paths()[k] for k in ("purelib", "platlib")))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(code), *site])}
    if subprocess.run([*_as(user), _python_for(user), "-c", NEEDED], env=env, capture_output=True).returncode == 0:
        return site
    files = json.loads(
        subprocess.run([sys.executable, "-c", CLOSURE], env=env, capture_output=True, text=True, check=True).stdout
    )
    for root in map(Path, site):
        tops = {Path(f).relative_to(root).parts[0] for f in files if Path(f).is_relative_to(root)}
        tops |= {p.name for p in root.glob("*.dist-info")} | {f"{t}.libs" for t in tops if (root / f"{t}.libs").is_dir()}
        for top in tops:
            source, target = root / top, folder / top
            if source.is_dir() and not target.exists():
                shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "tests"))
            elif source.is_file():
                shutil.copyfile(source, target)
    subprocess.run(["chmod", "-R", "a+rX", str(folder)], check=True)
    return [str(folder)]


@pytest.fixture
def world(s8f):
    """A world-readable folder with the package copy and the public corpus, and the service's private folder."""
    _need_root()
    service_user, researcher = system_user(SERVICE_USER), system_user(RESEARCHER)
    base = Path(tempfile.mkdtemp(prefix="microctx-uid-"))
    base.chmod(0o755)
    shutil.copytree(ROOT / "microctx", base / "code" / "microctx", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copyfile(s8f.public, base / "public.json")
    private = base / "service"
    private.mkdir(mode=0o700)
    shutil.copyfile(s8f.answers, private / "answers.json")
    (private / "answers.json").chmod(0o600)
    for path in (private, private / "answers.json"):
        os.chown(path, service_user.pw_uid, service_user.pw_gid)
    for path in (base / "code", base / "public.json"):
        subprocess.run(["chmod", "-R", "a+rX", str(path)], check=True)
    paths = [str(base / "code"), *_libraries(SERVICE_USER, base / "code", base / "libraries")]
    env = {"PYTHONPATH": os.pathsep.join(paths), "HOME": str(private), "MICROCTX_LEDGER": str(private / "ledger.sqlite")}
    yield base, private, env, researcher
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.slow
def test_a_researcher_uid_can_submit_but_not_read_the_answers(world, s8f_answers):
    base, private, env, researcher = world
    python = _python_for(SERVICE_USER)
    state = f"sqlite:///{private / 'state.db'}"
    added = subprocess.run(
        [*_as(SERVICE_USER), python, "-m", "microctx", "serve", "admin", "add-team", "lab", "--state", state],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=120,
    )
    assert added.returncode == 0, added.stderr
    token = added.stdout.strip().splitlines()[-1]
    document = base / "submission.json"
    document.write_bytes(body(submission(s8f_answers)))
    document.chmod(0o644)
    with ServiceProcess(
        private / "answers.json",
        base / "public.json",
        state,
        log=base / "serve.log",
        prefix=tuple(_as(SERVICE_USER)),
        python=python,
        env=env,
    ) as running:
        assert (private / "state.db").stat().st_uid == pwd_uid(SERVICE_USER)  # the state is the service user's
        seen = subprocess.run(
            [
                *_as(RESEARCHER),
                _python_for(RESEARCHER),
                "-c",
                RESEARCHER_SCRIPT,
                str(private / "answers.json"),
                str(private / "state.db"),
                running.url,
                token,
                str(document),
            ],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": env["PYTHONPATH"]},
            timeout=120,
        )
    assert seen.returncode == 0, seen.stderr
    result = json.loads(seen.stdout)
    assert result["answers"] == "refused" and result["state"] == "refused"
    assert result["status"] == 201 and "receipt" in result["reply"] and "score" in result["reply"]
    assert researcher.pw_uid != pwd_uid(SERVICE_USER) != 0


def pwd_uid(name: str) -> int:
    import pwd

    return pwd.getpwnam(name).pw_uid
