"""A real PostgreSQL server for tests and benchmarks: `initdb` and `pg_ctl` in a temporary folder.

PostgreSQL refuses to run as root, so when the tests run as root the server runs as the system
user `postgres` (Debian's package creates it), else as `microctx-pg` (created here with
`useradd --system` when missing). The binaries come from PATH or Debian's
/usr/lib/postgresql/N/bin. Nothing is skipped silently: when the server cannot start, the
caller's test fails saying why (`PostgresUnavailable`).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from pathlib import Path


def _sbin(tool: str) -> str:
    """`tool` from PATH, else from /usr/sbin or /sbin, which a plain PATH may lack (`env -i`, cron)."""
    return shutil.which(tool) or next((p for p in (f"/usr/sbin/{tool}", f"/sbin/{tool}") if os.path.exists(p)), tool)


RUNUSER, USERADD = _sbin("runuser"), _sbin("useradd")

FALLBACK_USER = "microctx-pg"


class PostgresUnavailable(Exception):
    pass


def _binary(name: str) -> str:
    found = shutil.which(name) or next(iter(sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"), reverse=True)), None)
    if not found:
        raise PostgresUnavailable(
            f"`{name}` not found on PATH or in /usr/lib/postgresql/*/bin: install the Debian package `postgresql`"
        )
    return found


def system_user(name: str) -> pwd.struct_passwd:
    """The system user `name`, created (no home, no login shell) when missing; root only."""
    try:
        return pwd.getpwnam(name)
    except KeyError:
        pass
    done = subprocess.run(
        [USERADD, "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name], capture_output=True, text=True
    )
    if done.returncode != 0:
        raise OSError(f"cannot create the system user {name}: {done.stderr.strip()}")
    return pwd.getpwnam(name)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class PostgresServer:
    """`with PostgresServer() as pg: pg.new_database()` -> a postgresql:// URL of an empty database."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="microctx-pg-"))
        self.port = free_port()
        self.user: pwd.struct_passwd | None = None

    def _run(self, *argv: str) -> subprocess.CompletedProcess:
        prefix = [RUNUSER, "-u", self.user.pw_name, "--"] if self.user is not None else []
        return subprocess.run(prefix + list(argv), capture_output=True, text=True, timeout=120)

    def start(self) -> PostgresServer:
        if os.geteuid() == 0:
            try:
                self.user = pwd.getpwnam("postgres")
            except KeyError:
                try:
                    self.user = system_user(FALLBACK_USER)
                except OSError as exc:
                    raise PostgresUnavailable(str(exc)) from None
            os.chown(self.folder, self.user.pw_uid, self.user.pw_gid)
        data, log = self.folder / "data", self.folder / "server.log"
        done = self._run(_binary("initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        if done.returncode != 0:
            raise PostgresUnavailable(f"initdb failed: {(done.stderr or done.stdout).strip()[-800:]}")
        options = f"-p {self.port} -k {self.folder} -c listen_addresses=127.0.0.1 -c fsync=off -c max_connections=200"
        done = self._run(_binary("pg_ctl"), "-D", str(data), "-o", options, "-l", str(log), "-w", "-t", "60", "start")
        if done.returncode != 0:
            tail = log.read_text()[-800:] if log.exists() else ""
            raise PostgresUnavailable(f"pg_ctl start failed: {(done.stderr or done.stdout).strip()[-400:]} {tail}")
        return self

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        import psycopg

        name = "t_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as connection:
            connection.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def stop(self) -> None:
        if (self.folder / "data" / "postmaster.pid").exists():
            self._run(_binary("pg_ctl"), "-D", str(self.folder / "data"), "-m", "immediate", "-w", "stop")
        shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> PostgresServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
