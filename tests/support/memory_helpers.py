"""A real OpenAI-compatible embedding server on 127.0.0.1 for the memory tests.

`FakeEmbeddingServer` answers `POST /v1/embeddings` like OpenAI does (float or base64 encoding,
`dimensions`), checks the `Authorization: Bearer <key>` header, counts calls and inputs, and can be
switched to failing (`mode = "503"`) or stopped and restarted on the same port.

Vectors are deterministic: each word maps to a concept (synonyms share one), each concept to a
fixed pseudo-random unit vector, and a text to the normalized sum of its concepts. So "automobile"
and "car" embed close together although they share no keyword.
"""

from __future__ import annotations

import base64
import hashlib
import json
import math
import random
import re
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

API_KEY = "test-key-123"
MODEL = "fake-embed-1"
DIMS = 256

SYNONYMS = [
    {"car", "automobile", "vehicle", "sedan"},
    {"database", "datastore", "persistence", "storage"},
    {"deploy", "release", "ship", "rollout"},
    {"bug", "defect", "fault", "regression"},
    {"fast", "quick", "speedy", "rapid"},
]
_CONCEPT = {word: min(group) for group in SYNONYMS for word in group}
_WORD = re.compile(r"[a-z0-9]+")


def concept_vector(concept: str, dims: int) -> list[float]:
    rng = random.Random(hashlib.sha256(concept.encode()).digest())
    vec = [rng.gauss(0.0, 1.0) for _ in range(dims)]
    norm = math.sqrt(sum(x * x for x in vec)) or 1.0
    return [x / norm for x in vec]


def embed_text(text: str, dims: int = DIMS) -> list[float]:
    total = [0.0] * dims
    for word in _WORD.findall(text.lower()):
        for i, x in enumerate(concept_vector(_CONCEPT.get(word, word), dims)):
            total[i] += x
    norm = math.sqrt(sum(x * x for x in total))
    if norm == 0:
        return concept_vector("<empty>", dims)
    return [x / norm for x in total]


class FakeEmbeddingServer:
    def __init__(self, *, api_key: str = API_KEY, dims: int = DIMS) -> None:
        self.api_key = api_key
        self.dims = dims
        self.mode = "ok"  # "ok" | "503" | "400-on:<word>"
        # Refuse (400) any input longer than this many UTF-8 bytes: a pessimistic stand-in for the
        # model's token limit (a byte-level BPE token covers at least one byte).
        self.max_input_bytes: int | None = None
        self.delay = 0.0  # seconds to wait before answering (a hung endpoint)
        # Answer an all-zero vector for inputs containing this text (what some OpenAI-compatible
        # servers return for `(((` or an empty-ish string).
        self.zero_on: str | None = None
        self.calls = 0
        self.inputs: list[str] = []
        self.auth_failures = 0
        self.models: list[str] = []
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self.port = 0
        self.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> None:
        handler = self._handler()
        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        self.port = self._server.server_address[1]
        threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def _respond(self, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        inputs = body.get("input")
        if isinstance(inputs, str):
            inputs = [inputs]
        if not isinstance(inputs, list) or not inputs:
            return 400, {"error": {"message": "input must be a non-empty string or array", "type": "invalid_request"}}
        if self.mode == "503":
            return 503, {"error": {"message": "upstream unavailable", "type": "server_error"}}
        if self.mode.startswith("400-on:") and any(self.mode[7:] in str(t) for t in inputs):
            return 400, {"error": {"message": "input rejected", "type": "invalid_request"}}
        if self.max_input_bytes is not None and any(len(str(t).encode()) > self.max_input_bytes for t in inputs):
            return 400, {"error": {"message": "maximum context length exceeded", "type": "invalid_request_error"}}
        dims = int(body.get("dimensions") or self.dims)
        with self._lock:
            self.inputs.extend(inputs)
            self.models.append(body.get("model", ""))
        data = []
        for i, text in enumerate(inputs):
            vec = embed_text(str(text), dims)
            if self.zero_on is not None and self.zero_on in str(text):
                vec = [0.0] * dims
            if body.get("encoding_format") == "base64":
                emb: Any = base64.b64encode(struct.pack(f"<{dims}f", *vec)).decode()
            else:
                emb = vec
            data.append({"object": "embedding", "index": i, "embedding": emb})
        return 200, {"object": "list", "data": data, "model": body.get("model"),
                     "usage": {"prompt_tokens": 1, "total_tokens": 1}}

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:  # noqa: N802 - http.server naming
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length)
                with fake._lock:
                    fake.calls += 1
                if fake.delay:
                    time.sleep(fake.delay)
                if self.path.rstrip("/") != "/v1/embeddings":
                    status, body = 404, {"error": {"message": "not found"}}
                elif self.headers.get("Authorization") != f"Bearer {fake.api_key}":
                    with fake._lock:
                        fake.auth_failures += 1
                    status, body = 401, {"error": {"message": "invalid api key", "type": "invalid_request_error"}}
                else:
                    try:
                        status, body = fake._respond(json.loads(raw or b"{}"))
                    except ValueError:
                        status, body = 400, {"error": {"message": "bad json"}}
                payload = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        return Handler


def embedding_settings(path, server: FakeEmbeddingServer, **overrides: Any):
    from conftest import make_settings

    values = {"embeddings": "openai", "openai_api_key": server.api_key, "openai_base_url": server.url,
              "embedding_model": MODEL, **overrides}
    return make_settings(path, **values)


def run_embeddings(app, **kwargs: Any) -> dict[str, Any]:
    """Run the scheduler's embedding job function once (directly, no thread)."""
    fn = dict(app.jobs)["embeddings"]
    if kwargs:
        from vantage_peers.domains.memory import indexer
        from vantage_peers.domains.memory.services import services

        svc = services(app)
        return indexer.embed_pending(app.db, svc.embedder, owner=svc.owner, corpora=app.corpora, **kwargs)
    return fn()


# -- helpers run in child processes (module-level so `spawn` can import them) ------------------------
def child_store(path: str, writer: str, count: int) -> None:
    """Open the file independently and store `count` memories, one transaction each."""
    from vantage_peers.db import migrate, open_target
    from vantage_peers.domains.memory import store

    db = open_target(path)
    migrate(db)
    for i in range(count):
        db.write(lambda c, i=i: store.store_memory(
            c, namespace="shared/concurrency", type="note", content=f"concurrent note {writer} number {i}",
            created_by=writer))
    db.close()


def child_embed(path: str, base_url: str, owner: str) -> dict[str, Any]:
    """Run embedding workers against the fake server until no job is left."""
    from vantage_peers.db import Database
    from vantage_peers.domains.memory import indexer
    from vantage_peers.embedding.embeddings import OpenAIEmbedder

    db = Database(path)
    embedder = OpenAIEmbedder(model=MODEL, api_key=API_KEY, base_url=base_url, dimensions=None)
    total = {"embedded": 0}
    while True:
        result = indexer.embed_pending(db, embedder, owner=owner, batch=8, budget_s=30)
        total["embedded"] += result["embedded"]
        if result["embedded"] == 0:
            break
    db.close()
    return total


def kill_cli_reindex(env: dict[str, str], shown: str, cwd: str) -> str:
    """Run `vantage-peers reindex` in a child process with `env`, SIGKILL it once its progress output
    shows `shown` (e.g. "256/600"), and return what it wrote to stderr."""
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-m", "vantage_peers.cli", "reindex"], env=env, cwd=cwd,
                            stderr=subprocess.PIPE, stdout=subprocess.DEVNULL)
    seen = bytearray()

    def read() -> None:
        while chunk := proc.stderr.read1(4096):  # type: ignore[union-attr]
            seen.extend(chunk)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    while shown.encode() not in seen and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    reader.join(10)
    return seen.decode(errors="replace")
