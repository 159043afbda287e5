"""Schema-driven fuzz over every registered tool, over the wire (our stdio transport, raw JSON-RPC):
every reply is a result, or an error whose message starts with an UPPER_SNAKE code (after the SDK's
'Error executing tool X: ' prefix), or a JSON-RPC error; never silence.

`VP_FUZZ_CASES` (cases per tool, default 10) runs it longer; benchmarks/fuzz.py is the 10,000-call run.
"""

from __future__ import annotations

import os
import random

import pytest
from conftest import make_settings
from support.fuzz_cases import run_fuzz

from vantage_peers.server import create_app

pytestmark = pytest.mark.slow  # fuzzing every tool and the registration endpoint

PER_CALL_BOUND_S = 120  # a hang detector only: far above any call's cost on a loaded CI machine


def test_every_tool_answers_hostile_arguments_with_a_result_or_a_code(tmp_path):
    per_tool = int(os.environ.get("VP_FUZZ_CASES", "10"))
    rng = random.Random(int(os.environ.get("VP_FUZZ_SEED", "8")))
    app = create_app(make_settings(tmp_path / "fuzz.db", orchestrator="fuzzer", instance_id="fuzzer-1"))
    bad: list[str] = []
    try:
        counts = run_fuzz(app, per_tool, rng, PER_CALL_BOUND_S, bad.append)
        print("fuzz class counts:", counts)
        assert sum(counts.values()) == per_tool * len(app.tools)
        # The file is still sound after all that.
        assert app.db.conn.scalar("PRAGMA integrity_check") == "ok"
        assert app.db.conn.query("PRAGMA foreign_key_check") == []
    finally:
        app.db.close()
    assert not bad, "\n".join(bad[:40])
    assert counts.get("ok", 0) > 0 and counts.get("INVALID_ARGUMENT", 0) > 0


def test_registration_endpoint_fuzz_answers_201_400_413_or_429_and_stores_only_capped_clients(tmp_path):
    """#19: random RFC 7591 bodies (huge, wrong types, hostile redirect URIs, deep JSON) to a real
    `serve`: every answer is 201/400/413/429 with a JSON error, and every stored client fits the caps."""
    import json

    import apsw
    from support.http_helpers import serving

    from vantage_peers.http import limits

    rng = random.Random(int(os.environ.get("VP_FUZZ_SEED", "8")))
    uris = ["https://a.example/cb", "http://127.0.0.1:1/cb", "com.example.app:/cb", "javascript:alert(1)",
            "data:text/html,x", "file:///etc/passwd", "vbscript:x", "http://evil.example/cb",
            "http://127.0.0.1:1@evil.example/", "https://a.example/" + "p" * 2100, "", 7, None, ["x"]]
    values = ["n", "n" * 201, "n" * 70_000, 3, None, True, [], {}, ["a"] * 20, "\ud800", "'; DROP TABLE x; --"]
    fields = ["client_name", "redirect_uris", "grant_types", "response_types", "scope", "contacts",
              "client_uri", "logo_uri", "token_endpoint_auth_method", "software_id", "x_extra"]
    cases = int(os.environ.get("VP_FUZZ_CASES", "10")) * 12
    with serving(tmp_path / "reg.db", env={"VP_OAUTH_REGISTER_PER_MINUTE": "100000"}) as server:
        statuses: dict[int, int] = {}
        for _ in range(cases):
            body: dict = {"redirect_uris": [rng.choice(uris) for _ in range(rng.randint(0, 12))]}
            for field in rng.sample(fields, rng.randint(0, 4)):
                body[field] = rng.choice(values)
            if rng.random() < 0.3:  # a valid base with one hostile change at most
                body = {"client_name": "ok", "redirect_uris": [rng.choice(uris[:3])]}
                if rng.random() < 0.5:
                    body[rng.choice(fields)] = rng.choice(values + uris)
            raw = json.dumps(body).encode() if rng.random() > 0.1 else b"[" * 50_000
            r = server.http("POST", "/oauth/register", content=raw, headers={"Content-Type": "application/json"})
            statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
            assert r.status_code in (201, 400, 413, 429), (r.status_code, r.text[:300])
            if r.status_code != 413:
                assert "error" in r.json() or r.status_code == 201
        print("registration fuzz statuses:", statuses)
        assert statuses.get(201) and statuses.get(400)
        conn = apsw.Connection(str(server.db), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            for name, uris_json in conn.execute("SELECT name, redirectUris FROM oauth_clients"):
                assert name is None or len(name) <= limits.MAX_NAME
                stored = json.loads(uris_json)
                assert len(stored) <= limits.MAX_REDIRECT_URIS
                assert all(limits.redirect_uri_problem(u) is None for u in stored), stored
        finally:
            conn.close()
