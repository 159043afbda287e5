"""The scope guard's seams in-process: resources, the store filter, and stdio's local trust."""

from __future__ import annotations

import anyio
import pytest
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.mcpserver.exceptions import ResourceError

from vantage_peers.http import profiles
from vantage_peers.http.asgi import build_http_app
from vantage_peers.http.principal import Principal, namespace_read_filter
from vantage_peers.server import create_app
from vantage_peers.settings import Settings


def principal(profile: profiles.ScopeProfile) -> AuthenticatedUser:
    return AuthenticatedUser(Principal(token="t", client_id="c", scopes=[], kind="oauth", profile=profile))


def test_resources_over_http_need_an_identity_and_stdio_is_untouched(tmp_path):
    app = create_app(Settings(db_path=tmp_path / "r.db", scheduler=False, bearer_secret_master="m" * 64))

    @app.mcp.resource("test://hello")
    def hello() -> str:
        return "hello"

    build_http_app(app, host="127.0.0.1", port=1)

    async def read(user):
        token = auth_context_var.set(user)
        try:
            return list(await app.mcp.read_resource("test://hello"))
        finally:
            auth_context_var.reset(token)

    generic = profiles.ScopeProfile("client-generic")
    with pytest.raises(ResourceError, match="FORBIDDEN: profile client-generic"):
        anyio.run(read, principal(generic))
    agent = profiles.ScopeProfile("cedar-agent", "", ("cedar",), ("project/cedar",), ())
    assert anyio.run(read, principal(agent))[0].content == "hello"
    assert anyio.run(read, None)[0].content == "hello"  # no principal: stdio / in-process, local trust
    app.db.close()


def test_store_filter_follows_the_principal():
    assert namespace_read_filter("namespace") is None
    token = auth_context_var.set(principal(profiles.ScopeProfile("p", "", (), ("project/a", "global"), ())))
    try:
        where, params = namespace_read_filter("m.namespace")
        assert where.count("m.namespace = ?") == 2
        assert params == ["project/a", "project/a/", "project/a0", "global", "global/", "global0"]
    finally:
        auth_context_var.reset(token)
    token = auth_context_var.set(principal(profiles.MASTER_PROFILE))
    try:
        assert namespace_read_filter("namespace") is None
    finally:
        auth_context_var.reset(token)
    assert profiles.sql_filter((), "ns") == ("0", [])
    assert profiles.within("project/a/b", "project/a") and not profiles.within("project/ab", "project/a")
    assert profiles.within("x", "*") and profiles.within("project/a/b", "project/a/*")


def test_migration_007_upgrades_an_older_file_without_touching_its_data(tmp_path):
    from vantage_peers.db import Database, current_version, latest_version, migrate

    db = Database(tmp_path / "old.db")
    migrate(db, target=5)
    db.write(lambda c: c.execute("INSERT INTO meta (key, value) VALUES ('kept', 'yes')"))
    assert current_version(db) == 5
    migrate(db)
    assert current_version(db) == latest_version() >= 7
    assert db.read(lambda c: c.scalar("SELECT value FROM meta WHERE key = 'kept'")) == "yes"
    tables = {r["name"] for r in db.read(lambda c: c.query("SELECT name FROM sqlite_master WHERE type='table'"))}
    assert {"oauth_clients", "oauth_access_tokens", "oauth_refresh_tokens", "oauth_scope_profiles",
            "userBearerTokens", "credentialsAuditLog"} <= tables
    db.close()


def test_deployment_tools_are_master_only_over_http(tmp_path):
    from vantage_peers.http.guard import ScopeForbidden, ScopeGuard

    app = create_app(Settings(db_path=tmp_path / "d.db", scheduler=False))
    guard = ScopeGuard(app)
    args = {"name": "prod", "deploymentUrl": "https://evil.example", "deployKeyEnvVar": "DEPLOY_KEY_PROD"}
    everyone = profiles.ScopeProfile("ops", "", ("ops",), ("*",), ("*",))
    for tool in ("add_deployment", "remove_deployment"):
        token = auth_context_var.set(principal(everyone))
        try:
            with pytest.raises(ScopeForbidden, match=f"{tool} is reserved for the master bearer"):
                guard(tool, dict(args))
        finally:
            auth_context_var.reset(token)
        token = auth_context_var.set(principal(profiles.MASTER_PROFILE))
        try:
            assert guard(tool, dict(args)) is None  # the master passes untouched
        finally:
            auth_context_var.reset(token)
        assert guard(tool, dict(args)) is None  # stdio: local trust
    app.db.close()
