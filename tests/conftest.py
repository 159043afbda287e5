"""Shared fixtures: a temp DB file, the app, and a synchronous in-memory MCP client; the test lanes.

Lanes (issue #33, CONTRIBUTING.md): every test carrying none of `slow`, `postgres`, `clients` or
`browser` gets `fast`, so `uv run pytest -m fast` is the quick lane. `postgres`, `clients` and `browser`
are added here from what a test is; `slow` is written on the tests themselves.
"""

from __future__ import annotations

import functools
import hashlib
import inspect
import json
import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from anyio.from_thread import start_blocking_portal
from mcp import Client

from vantage_peers.db import Database, open_database
from vantage_peers.pipeline.app import App
from vantage_peers.pipeline.settings import Settings
from vantage_peers.server import create_app


class ToolError(Exception):
    """A tool call that came back with is_error=True; str() is the message the agent reads."""


class Tools:
    """Call MCP tools through the SDK's in-memory client, synchronously."""

    def __init__(self, portal, client: Client) -> None:
        self.portal = portal
        self.client = client
        listed = portal.call(client.list_tools).tools
        self.listed = {t.name: t for t in listed}
        self._wrapped = {
            t.name
            for t in listed
            if t.output_schema
            and set(t.output_schema.get("properties", {})) == {"result"}
            and not t.output_schema.get("additionalProperties")
        }

    def raw(self, name: str, /, **args: Any):
        return self.portal.call(self.client.call_tool, name, args)

    def call(self, name: str, /, **args: Any) -> Any:
        result = self.raw(name, **args)
        text = "\n".join(getattr(c, "text", "") for c in result.content)
        if result.is_error:
            raise ToolError(text)
        data = result.structured_content
        if data is None:
            return json.loads(text) if text else None
        if name in self._wrapped:
            return data["result"]
        return data

    def pages(self, name: str, /, **args: Any) -> tuple[list[dict[str, Any]], int]:
        """Follow `nextCursor` to the end of a list tool: (every item, number of pages)."""
        items: list[dict[str, Any]] = []
        pages, cursor = 0, None
        while True:
            page = self.call(name, **args, **({"cursor": cursor} if cursor else {}))
            assert "nextCursor" not in page or page["nextCursor"], "nextCursor must be absent, not null/empty"
            items.extend(page["items"])
            pages += 1
            assert pages < 10_000
            cursor = page.get("nextCursor")
            if not cursor:
                return items, pages

    def error(self, name: str, /, **args: Any) -> str:
        with pytest.raises(ToolError) as info:
            self.call(name, **args)
        return str(info.value)


def make_settings(path: Path, **overrides: Any) -> Settings:
    # Embeddings off unless a test asks for them (`embeddings="local"` or the fake endpoint).
    base = Settings.from_env({"VP_EMBEDDINGS": "none"}, dotenv=False)
    return base.model_copy(update={"db_path": path, "scheduler": False, **overrides})


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    """Only a path: nothing is there until something opens it (`db`/`app` start it from the template)."""
    return tmp_path / "vp.db"


LANES = ("slow", "postgres", "clients", "browser")
_CLIENTS = Path(__file__).resolve().parent / "clients"
_BROWSER = re.compile(r"\bchromium\b|playwright")


def pytest_addoption(parser: pytest.Parser, pluginmanager: pytest.PytestPluginManager) -> None:
    if not pluginmanager.has_plugin("xdist"):
        # pyproject's addopts carries xdist's `-n`/`--dist`: with `-p no:xdist` they are accepted and ignored.
        group = parser.getgroup("xdist (off)")
        # (`_addoption`: lowercase short options are pytest's own; xdist registers `-n` the same way)
        group._addoption("-n", "--numprocesses", dest="numprocesses", default=None, help="ignored: xdist is off")
        group.addoption("--dist", dest="dist", default="no", help="ignored: xdist is off")


@functools.cache
def _mentions_browser(function: Any) -> bool:
    try:
        return bool(_BROWSER.search(inspect.getsource(function)))
    except (OSError, TypeError):
        return False


def _uses_browser(item: pytest.Item) -> bool:
    """The test function's own source names chromium or Playwright (read only in modules that do)."""
    function = getattr(item, "function", None)
    module = getattr(item, "module", None)
    if function is None or module is None or not _module_mentions_browser(module.__file__):
        return False
    return _mentions_browser(function)


@functools.cache
def _module_mentions_browser(path: str) -> bool:
    return bool(_BROWSER.search(Path(path).read_text(encoding="utf-8")))


@pytest.hookimpl(tryfirst=True)  # before `-m` deselects
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """`postgres`: a test parametrized onto PostgreSQL (`backend=postgres`, or any parameter "postgres");
    `clients`: everything under tests/clients; `browser`: a test that drives chromium or Playwright;
    `fast`: every test with none of the lane markers."""
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and any(isinstance(v, str) and v == "postgres" for v in callspec.params.values()):
            item.add_marker(pytest.mark.postgres)
        if _CLIENTS in item.path.parents:
            item.add_marker(pytest.mark.clients)
        if _uses_browser(item):
            item.add_marker(pytest.mark.browser)
        if not any(item.get_closest_marker(lane) for lane in LANES):
            item.add_marker(pytest.mark.fast)
    _heaviest_files_first(items)


# Rough cost of one test by lane, for ordering only (a slow test takes tens of seconds, a fast one < 1 s).
_WEIGHTS = {"clients": 60, "browser": 40, "slow": 20, "postgres": 3}


def _heaviest_files_first(items: list[pytest.Item]) -> None:
    """Order whole files by their estimated cost, heaviest first, keeping each file's own order.

    xdist's `--dist loadfile` hands files to workers in collection order; starting the long files
    first keeps one of them from being the tail that a single worker runs while the others idle."""
    cost: dict[Path, int] = {}
    for item in items:
        weight = max((w for lane, w in _WEIGHTS.items() if item.get_closest_marker(lane)), default=1)
        cost[item.path] = cost.get(item.path, 0) + weight
    rank = {path: i for i, path in enumerate(sorted(cost, key=lambda path: (-cost[path], str(path))))}
    items.sort(key=lambda item: rank[item.path])  # stable: a file's tests keep their order


@functools.cache
def _template_name(journal_mode: str) -> str:
    """The SQLite template's name: it changes with the schema, any migration, or the journal mode."""
    from vantage_peers.db.migrate import schema_sql, steps

    digest = hashlib.sha256(schema_sql().encode())
    for _number, name, sql in steps():
        digest.update(name.encode() + b"\0" + sql.encode())
    return f"vp-template-{journal_mode}-{digest.hexdigest()[:16]}.db"


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file migrated to the latest version once per session (per xdist worker): `db`, `app` and
    `eapp` start from a copy of it instead of migrating a new file through every step (issue #33)."""
    from vantage_peers.db import current_version, latest_version

    settings = make_settings(Path("template.db"))
    path = tmp_path_factory.getbasetemp() / _template_name(settings.journal_mode)
    if not path.exists():
        building = path.with_suffix(".building")
        database = open_database(settings.model_copy(update={"db_path": building}))
        try:
            assert current_version(database) == latest_version()
        finally:
            database.close()
        assert not Path(f"{building}-wal").exists(), "closing the last connection checkpoints the WAL"
        os.replace(building, path)
    return path


def _from_template(settings: Settings, template: Path) -> None:
    """Copy the migrated template to `settings.db_path` when the test's fixture would create that file
    through the normal path (SQLite, nothing there yet, the template's journal mode)."""
    path = Path(settings.db_path)
    if settings.database_url or template.name != _template_name(settings.journal_mode):
        return
    if any(Path(f"{path}{suffix}").exists() for suffix in ("", "-wal", "-shm", "-journal")):
        return
    shutil.copyfile(template, path)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked `backends` run once on the SQLite file and once on PostgreSQL (issue #25)."""
    if "backend" in metafunc.fixturenames and metafunc.definition.get_closest_marker("backends"):
        # `sqlite_only`: a test of SQLite itself (its query plans, PRAGMAs) inside a module that runs on both.
        only = metafunc.definition.get_closest_marker("sqlite_only")
        metafunc.parametrize("backend", ["sqlite"] if only else ["sqlite", "postgres"], indirect=True)


@pytest.fixture
def backend(request: pytest.FixtureRequest) -> str:
    return getattr(request, "param", "sqlite")


@pytest.fixture
def database_url(backend: str) -> Iterator[str | None]:
    """None on SQLite; on PostgreSQL a fresh, migrated database on the session's server, dropped after."""
    if backend == "sqlite":
        yield None
        return
    from support import postgres

    why = postgres.available()
    if why:
        pytest.skip(why)
    url = postgres.fresh_database()
    yield url
    postgres.drop_database(url)


@pytest.fixture
def db_target(db_path: Path, database_url: str | None) -> str:
    """What a child process opens (`vantage_peers.db.open_target`): the PostgreSQL URL or the file."""
    return database_url or str(db_path)


@pytest.fixture
def settings(db_path: Path, database_url: str | None) -> Settings:
    return make_settings(db_path, database_url=database_url)


@pytest.fixture
def db(settings: Settings, sqlite_template: Path) -> Iterator[Database]:
    """A migrated Database on the test's temp file (`db_path`), closed after the test."""
    _from_template(settings, sqlite_template)
    database = open_database(settings)
    yield database
    database.close()


@pytest.fixture
def app(settings: Settings, sqlite_template: Path) -> Iterator[App]:
    _from_template(settings, sqlite_template)
    application = create_app(settings)
    yield application
    application.db.close()


def open_tools(app: App):
    """Context manager yielding a `Tools` bound to `app`."""
    import contextlib

    @contextlib.contextmanager
    def cm():
        with start_blocking_portal() as portal, portal.wrap_async_context_manager(Client(app.mcp)) as client:
            yield Tools(portal, client)

    return cm()


@pytest.fixture
def tools(app: App) -> Iterator[Tools]:
    with open_tools(app) as t:
        yield t


# Embedding fixtures: a real OpenAI-compatible server on 127.0.0.1 and an app that uses it.
@pytest.fixture
def server():
    from support.memory_helpers import FakeEmbeddingServer

    fake = FakeEmbeddingServer()
    yield fake
    fake.stop()


@pytest.fixture
def eapp(db_path: Path, server, database_url: str | None, sqlite_template: Path) -> Iterator[App]:
    from support.memory_helpers import embedding_settings

    settings = embedding_settings(db_path, server, database_url=database_url)
    _from_template(settings, sqlite_template)
    application = create_app(settings)
    yield application
    application.db.close()


@pytest.fixture
def etools(eapp: App) -> Iterator[Tools]:
    with open_tools(eapp) as t:
        yield t


@pytest.fixture(scope="session", autouse=True)
def model_host_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """#20: every shared model host a test starts lives in this session's temp folder and is killed at
    the end, so no process outlives pytest (idle ones exit on their own after a minute anyway). Tests
    that strip VP_* from a child's environment land in $XDG_RUNTIME_DIR/vantage-peers: hosts started
    there during the session are killed too."""
    import os

    from support.model_hosts import hosts, stop

    base = tmp_path_factory.mktemp("mh")
    base.chmod(0o700)
    saved = {k: os.environ.get(k) for k in ("VP_MODEL_HOST_DIR", "XDG_RUNTIME_DIR", "VP_MODEL_HOST_IDLE_S")}
    # else the <tmp>/vantage-peers-<uid> fallback would be shared; under xdist each worker gets its own
    # too, so one worker's end-of-session cleanup cannot kill a host another worker's test is using
    if not saved["XDG_RUNTIME_DIR"] or os.environ.get("PYTEST_XDIST_WORKER"):
        (base / "xdg").mkdir(mode=0o700)
        os.environ["XDG_RUNTIME_DIR"] = str(base / "xdg")
    runtime = Path(os.environ["XDG_RUNTIME_DIR"]) / "vantage-peers"
    before = set(hosts(runtime))
    os.environ.update({"VP_MODEL_HOST_DIR": str(base / "host"),
                       "VP_MODEL_HOST_IDLE_S": saved["VP_MODEL_HOST_IDLE_S"] or "60"})
    yield base / "host"
    stop(list(hosts(tmp_path_factory.getbasetemp())) + [pid for pid in hosts(runtime) if pid not in before])
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
