"""A real `vantage-peers` stdio process driven line by line (JSON-RPC), for the fault tests (#19)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any


def script() -> str:
    local = Path(sys.executable).parent / "vantage-peers"
    return str(local) if local.exists() else shutil.which("vantage-peers")  # type: ignore[return-value]


class StdioProc:
    def __init__(self, db: Path, *, stderr_path: Path | None = None, env: dict[str, str] | None = None) -> None:
        full = {k: v for k, v in os.environ.items() if k != "VP_ORCHESTRATOR"}
        full.update({"VP_DB_PATH": str(db), "VP_SCHEDULER": "off", "VP_EMBEDDINGS": "none", **(env or {})})
        self.stderr_path = stderr_path or db.parent / f"stdio-{os.getpid()}-{id(self)}.err"
        self._err = open(self.stderr_path, "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen([script()], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._err,
                                     env=full, cwd=db.parent)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "faults", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the server closed stdout (exit {self.proc.poll()}): "
                               f"{self.stderr_path.read_text(errors='replace')[-2000:]}")
        return json.loads(line)

    def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self.next_id += 1
        rid = self.next_id
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        while True:
            msg = self.read()
            if msg.get("id") == rid:
                return msg

    def call(self, name: str, **args: Any) -> tuple[bool, str, Any]:
        """(is_error, first text, structured content) of one tools/call."""
        msg = self.request("tools/call", {"name": name, "arguments": args})
        assert "result" in msg, msg
        result = msg["result"]
        text = result["content"][0]["text"] if result.get("content") else ""
        return bool(result.get("isError")), text, result.get("structuredContent")

    def rss_kib(self) -> int:
        for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
        return 0

    def close(self) -> int | None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._err.close()
        return self.proc.returncode
