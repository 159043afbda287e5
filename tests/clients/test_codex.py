"""The real Codex CLI: `codex mcp add` of the stdio server and of the HTTP server with a bearer taken
from an environment variable, then `codex mcp list` (table and JSON) shows both, enabled."""

from __future__ import annotations

import json

import install
from client_env import run
from support.http_helpers import script


def codex(*args: str) -> list[str]:
    return [str(install.binary("codex")), *args]


def test_codex_mcp_add_and_list(sealed_env, tmp_path):
    env = {**sealed_env, "VP_BEARER_TOKEN": "a3" * 32}
    added = run(codex("mcp", "add", "vantage-peers", "--env", "VP_ORCHESTRATOR=alice", "--", script()), env, tmp_path)
    assert added.returncode == 0, added
    http = run(codex("mcp", "add", "vantage-peers-http", "--url", "http://127.0.0.1:8787/mcp",
                     "--bearer-token-env-var", "VP_BEARER_TOKEN"), env, tmp_path)
    assert http.returncode == 0, http

    table = run(codex("mcp", "list"), env, tmp_path)
    assert table.returncode == 0, table
    assert "vantage-peers " in table.stdout and "vantage-peers-http" in table.stdout
    listed = run(codex("mcp", "list", "--json"), env, tmp_path)
    assert listed.returncode == 0, listed
    servers = {s["name"]: s for s in json.loads(listed.stdout)}
    assert set(servers) == {"vantage-peers", "vantage-peers-http"}
    stdio = servers["vantage-peers"]
    assert stdio["enabled"] and stdio["transport"]["type"] == "stdio"
    assert stdio["transport"]["command"] == script() and stdio["transport"]["env"] == {"VP_ORCHESTRATOR": "alice"}
    remote = servers["vantage-peers-http"]
    assert remote["enabled"] and remote["transport"]["type"] == "streamable_http"
    assert remote["transport"]["bearer_token_env_var"] == "VP_BEARER_TOKEN"
    assert remote["auth_status"] == "bearer_token"
    # the config landed in the temporary CODEX_HOME, not the user's
    assert "vantage-peers" in (tmp_path / "home" / ".codex" / "config.toml").read_text()
