"""Our stdio transport answers every JSON-RPC line, through the real console script."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
from pathlib import Path

import pytest

from vantage_peers.core import limits
from vantage_peers.transport import recover_id, triage


def _script() -> str:
    return str(Path(sys.executable).parent / "vantage-peers")


class Wire:
    """Raw lines to and from a spawned `vantage-peers` stdio server."""

    def __init__(self, tmp_path: Path) -> None:
        env = {**os.environ, "VP_DB_PATH": str(tmp_path / "wire.db"), "VP_ORCHESTRATOR": "alice",
               "VP_SCHEDULER": "off"}
        self.proc = subprocess.Popen([_script()], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, env=env, cwd=tmp_path)

    def send(self, line: bytes | str) -> None:
        self.proc.stdin.write(line.encode() if isinstance(line, str) else line)
        self.proc.stdin.write(b"\n")
        self.proc.stdin.flush()

    def reply(self, timeout: float = 60.0) -> dict:
        # Generous: an unanswered request fails here instead of hanging the suite.
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        assert ready, "no answer: the request was dropped"
        line = self.proc.stdout.readline()
        assert line, "the server closed stdout without answering"
        return json.loads(line)

    def request(self, rid, method, params=None) -> dict:
        self.send(json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params or {}}))
        return self.reply()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.mark.slow
def test_every_line_gets_an_answer_with_its_id(tmp_path):
    wire = Wire(tmp_path)
    try:
        init = wire.request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                              "clientInfo": {"name": "raw", "version": "1"}})
        assert init["id"] == 0 and "result" in init
        wire.send('{"jsonrpc":"2.0","method":"notifications/initialized"}')

        wire.send('{"jsonrpc": "2.0", "id": 7, "method": "tools/list"')  # truncated JSON
        r = wire.reply()
        assert r["id"] == 7 and r["error"]["code"] == -32700

        wire.send("this is not json at all")
        r = wire.reply()
        assert r["id"] is None and r["error"]["code"] == -32700

        wire.send(b'{"jsonrpc":"2.0","id":8,"method":"tools/list","params":{"x":"\xff\xfe"}}')  # invalid UTF-8
        r = wire.reply()
        assert r["id"] == 8 and r["error"]["code"] == -32700

        wire.send('{"id": 9, "hello": "world"}')  # JSON, not JSON-RPC
        r = wire.reply()
        assert r["id"] == 9 and r["error"]["code"] == -32600

        # A lone surrogate is valid JSON: it reaches the tool, which answers INVALID_ARGUMENT.
        wire.send('{"jsonrpc":"2.0","id":10,"method":"tools/call","params":{"name":"send_message",'
                  '"arguments":{"channel":"bob","content":"bad \\ud800 text"}}}')
        r = wire.reply()
        assert r["id"] == 10 and r["result"]["isError"]
        assert "INVALID_ARGUMENT" in r["result"]["content"][0]["text"]

        # 200-deep arguments: an INVALID_ARGUMENT tool result; 200-deep params of another method: -32600.
        wire.send('{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"name":"store_memory",'
                  f'"arguments":{{"content":"x","metadata":{{"a":{_deep(200)}}}}}}}}}')
        r = wire.reply()
        assert r["id"] == 11 and r["result"]["isError"]
        assert r["result"]["content"][0]["text"].startswith("INVALID_ARGUMENT: arguments are nested deeper")
        wire.send(f'{{"jsonrpc":"2.0","id":"s12","method":"tools/list","params":{{"x":{_deep(200)}}}}}')
        r = wire.reply()
        assert r["id"] == "s12" and r["error"]["code"] == -32600

        # Deeper than Python's JSON decoder recurses: still a parse error carrying the id.
        wire.send(f'{{"jsonrpc":"2.0","id":13,"method":"tools/list","params":{{"x":{_deep(100_000)}}}}}')
        r = wire.reply()
        assert r["id"] == 13 and r["error"]["code"] in (-32700, -32600)

        # The server is alive and serves normally afterwards.
        r = wire.request(14, "tools/call", {"name": "whoami", "arguments": {}})
        assert r["id"] == 14 and not r["result"].get("isError")
        assert r["result"]["structuredContent"]["orchestratorId"] == "alice"
    finally:
        wire.close()


def test_triage_without_a_process():
    msg, reply = triage(b'{"jsonrpc":"2.0","id":1,"method":"ping"}')
    assert msg is not None and reply is None
    msg, reply = triage(b'{"jsonrpc":"2.0","method":"notifications/bogus", "params": 5}')
    assert msg is None and reply is None  # malformed notification: no reply, by JSON-RPC
    msg, reply = triage(b'[1, 2]')  # batches are not part of MCP
    assert msg is None and json.loads(reply)["error"]["code"] == -32600
    big = b'{"jsonrpc":"2.0","id":"big","method":"tools/call","params":{"name":"x","arguments":{"c":"' + \
        b"a" * (limits.MAX_REQUEST_BYTES + 10) + b'"}}}'
    msg, reply = triage(big)
    out = json.loads(reply)
    assert out["id"] == "big" and out["result"]["content"][0]["text"].startswith("INVALID_ARGUMENT")
    assert recover_id(b'{"id": "a\\"b", "x": [') == 'a"b'
    assert recover_id(b'{"method": "x"') is None
