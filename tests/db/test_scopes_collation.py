"""Namespace scopes are byte for byte whatever the database's collation (issue #32 item 2).

A token reading `project/a` sees `project/a` and everything under `project/a/`, nothing else: not
`PROJECT/A` nor `projecta`, which a linguistic collation (en_US.UTF-8, the official PostgreSQL image's
default) sorts inside the range ['project/a/', 'project/a0'), while it sorts `project/a/sub` outside.
Each test runs on SQLite, on the tests' PostgreSQL cluster (byte order) and on a second cluster
initdb'd with en_US.UTF-8 (tests/support/postgres.py, started once, only when these tests run).
Embeddings are off: recall and hybrid_search answer in keyword mode, through the same filters.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support import postgres

from vantage_peers.core import sdk
from vantage_peers.core.principal import Principal
from vantage_peers.core.scopes import BYTE_ORDER, ScopeProfile
from vantage_peers.db.dialect import to_postgres
from vantage_peers.domains.memory import store
from vantage_peers.search.vectors import Scope

LINGUISTIC = "postgres-" + postgres.LINGUISTIC
pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres", LINGUISTIC], indirect=True)

NAMESPACES = ("project/a", "project/a/sub", "PROJECT/A", "projecta", "project/ab", "project/a0", "project/a_",
              "project/a%")
INSIDE = {"project/a", "project/a/sub"}


@pytest.fixture
def database_url(backend: str) -> Iterator[str | None]:
    """conftest's, plus the linguistic cluster (skipped where its locale cannot be had)."""
    if backend == "sqlite":
        yield None
        return
    locale = postgres.LINGUISTIC if backend == LINGUISTIC else None
    why = postgres.available() if locale is None else postgres.linguistic_unavailable(locale)
    if why:
        pytest.skip(why)
    url = postgres.fresh_database(locale=locale)
    yield url
    postgres.drop_database(url)


@pytest.fixture
def seeded(tools) -> dict[str, str]:
    """One memory per namespace (stored without a token), all holding the word `alpha`."""
    return {ns: tools.call("store_memory", namespace=ns, type="note", createdBy="seeder",
                           content=f"alpha note kept in {ns}")["memoryId"] for ns in NAMESPACES}


@pytest.fixture
def reader(monkeypatch: pytest.MonkeyPatch, seeded):
    """From here on every call carries a token whose profile reads `project/a` only (as over HTTP:
    the pipeline asks `sdk.current_principal()` for the request's verified token)."""
    profile = ScopeProfile("reader-a", read_prefixes=("project/a",))
    principal = Principal(token="t", client_id="reader-a", scopes=[], kind="oauth", profile=profile)
    monkeypatch.setattr(sdk, "current_principal", lambda: principal)
    return principal


def seen(result) -> set[str]:
    return {item["namespace"] for item in result["items"]}


def test_the_linguistic_cluster_breaks_the_byte_order_range(backend, db):
    """The premise: on that cluster `PROJECT/A` sorts inside ['project/a/', 'project/a0'), `project/a/sub` after."""
    if backend != LINGUISTIC:
        pytest.skip("the premise of the en_US.UTF-8 cluster")
    row = db.read(lambda c: c.one(
        "SELECT datcollate, 'PROJECT/A' >= 'project/a/' AND 'PROJECT/A' < 'project/a0' AS leaks, "
        "'project/a/sub' > 'project/a0' AS misses FROM pg_database WHERE datname = current_database()"))
    assert row["datcollate"] == postgres.LINGUISTIC and row["leaks"] and row["misses"], row


@pytest.mark.parametrize("namespace", ["*", "project/*"])
def test_a_scoped_token_lists_only_its_prefix(tools, reader, namespace):
    assert seen(tools.call("list_memories", namespace=namespace, limit=50)) == INSIDE


@pytest.mark.parametrize("tool", ["text_search", "recall", "hybrid_search"])
def test_a_scoped_token_searches_only_its_prefix(tools, reader, tool):
    result = tools.call(tool, query="alpha", limit=50)
    assert result["mode"] == "keyword"  # embeddings off: recall and hybrid fall back to BM25
    assert seen(result) == INSIDE
    assert seen(tools.call(tool, query="alpha", namespace="project/*", limit=50)) == INSIDE


@pytest.mark.parametrize("tool", ["list_memories", "text_search", "recall", "hybrid_search"])
def test_a_prefix_query_is_byte_for_byte_without_a_token_too(tools, seeded, tool):
    args = {"namespace": "project/a/*", "limit": 50} | ({} if tool == "list_memories" else {"query": "alpha"})
    assert seen(tools.call(tool, **args)) == {"project/a/sub"}
    args["namespace"] = "project/*"
    assert seen(tools.call(tool, **args)) == set(NAMESPACES) - {"PROJECT/A", "projecta"}


def test_the_scoped_range_is_answered_from_an_index(backend, db):
    """The byte-order range keeps an index: on SQLite the plan of the range as it was written before
    (BINARY is its columns' collation), on PostgreSQL the `COLLATE "C"` indexes of
    pg/additions/021_collate_c.sql, on both clusters."""
    # Enough rows in many namespaces that a scan costs more than the index (planner statistics).
    db.write(lambda c: c.execute(
        "WITH RECURSIVE g(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM g WHERE n < 20000) "
        "INSERT INTO memories (id, namespace, type, content, createdBy, createdAt, updatedAt) "
        "SELECT 'mem_bulk' || n, 'project/p' || (n % 500), 'note', 'x', 'x', n, n FROM g"))
    db.write(lambda c: c.execute("ANALYZE memories" if backend != "sqlite" else "ANALYZE"))
    explain = "EXPLAIN QUERY PLAN " if backend == "sqlite" else "EXPLAIN (COSTS OFF) "

    def plan(sql: str, params: list) -> str:
        return "\n".join(str(row[-1]) for row in db.read(lambda c: c.rows(explain + sql, params)))

    for scope in (Scope("all", "", ("project/p7",)), Scope("prefix", "project/p7/", None)):
        where, params = store.scope_sql(scope)
        sql = (f"SELECT * FROM memories WHERE {' AND '.join(f'({w})' for w in where)} AND isLatest = 1 "
               "ORDER BY createdAt DESC, id DESC LIMIT 51")
        assert BYTE_ORDER in sql
        got = plan(sql, params)
        if backend == "sqlite":
            assert got == plan(sql.replace(" " + BYTE_ORDER, ""), params)  # the plan of the range as it was
            assert "by_namespace" in got, got
        else:
            assert 'namespace COLLATE "C" >= %s' in to_postgres(sql)[0]
            assert "by_namespace_c" in got and "Seq Scan" not in got, got
