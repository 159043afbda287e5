"""The scope guard's seams in-process: resources, the store filter, and stdio's local trust."""

from __future__ import annotations

import anyio
import pytest
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.mcpserver.exceptions import ResourceError

from vantage_peers.core import scopes as profiles
from vantage_peers.core.principal import Principal
from vantage_peers.domains.memory.store import scope_of, scope_sql
from vantage_peers.http.asgi import build_http_app
from vantage_peers.http.profiles import MASTER_PROFILE
from vantage_peers.pipeline.policy import ScopeForbidden, read_prefixes, resolve
from vantage_peers.pipeline.settings import Settings
from vantage_peers.server import create_app


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
    def token(profile):
        return Principal(token="t", client_id="c", scopes=[], kind="oauth", profile=profile)

    assert read_prefixes(None) is None and scope_of(None, visible=None) is None
    visible = read_prefixes(token(profiles.ScopeProfile("p", "", (), ("project/a", "global"), ())))
    where, params = scope_sql(scope_of(None, visible=visible), "m.namespace")
    assert where[0].count("m.namespace = ?") == 2
    assert params == ["project/a", "project/a/", "project/a0", "global", "global/", "global0"]
    where, params = scope_sql(scope_of("project/a/x", visible=visible), "m.namespace")
    assert params[0] == "project/a/x" and params[1:] == ["project/a", "project/a/", "project/a0", "global",
                                                         "global/", "global0"]
    assert read_prefixes(token(MASTER_PROFILE)) is None
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
    app = create_app(Settings(db_path=tmp_path / "d.db", scheduler=False))
    args = {"name": "prod", "deploymentUrl": "https://evil.example", "deployKeyEnvVar": "DEPLOY_KEY_PROD"}
    everyone = profiles.ScopeProfile("ops", "", ("ops",), ("*",), ("*",))
    for tool in ("add_deployment", "remove_deployment"):
        declared = app.registered[tool].policy
        with pytest.raises(ScopeForbidden, match=f"{tool} is reserved for the master bearer"):
            resolve(tool, declared, dict(args), principal(everyone).access_token, app.settings)
        master = principal(MASTER_PROFILE).access_token
        actor, _ = resolve(tool, declared, dict(args), master, app.settings)
        assert actor.master  # the master passes
    app.db.close()
