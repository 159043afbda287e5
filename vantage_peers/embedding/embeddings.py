"""Embedding providers: the local model (search/local.py) or any OpenAI-compatible `/embeddings`
endpoint through the `openai` client.

The client is imported lazily (only a process that embeds pays for it). Retries are ours, not the
client's (`max_retries=0`): the background indexer backs off per job, and a query falls back to
keyword search at once instead of waiting through the client's retry loop.

Responses are read raw and asked for as base64 (`encoding_format="base64"`): one `frombuffer`
per vector instead of the client building a pydantic model holding one Python float per
dimension (≈110 of 172 ms per 64 × 1536 batch). Servers that ignore the format and send float
arrays are read too.
"""

from __future__ import annotations

import base64
import json
import math
import threading
from collections.abc import Sequence
from typing import Any, Protocol

from .embedding_error import EmbeddingError

__all__ = ["EmbeddingError", "Embedder", "embedder_for"]

# text-embedding-3-* accept 8,191 tokens. Without a tokenizer we estimate: ASCII prose and code run
# ≈3 characters per token at worst, while any other character (accents, CJK, emoji) may cost up to
# one token per UTF-8 byte (a byte-level BPE token always covers at least one byte).
MAX_INPUT_TOKENS = 8_000
MAX_INPUT_CHARS = MAX_INPUT_TOKENS * 3  # for pure ASCII text
# When the endpoint still refuses an input as too long (ASCII that tokenizes badly: hex, base64),
# the indexer retries it cut to this many UTF-8 bytes, which no byte-level BPE can exceed in tokens.
SAFE_INPUT_BYTES = 8_000
BATCH_TIMEOUT_S = 30.0  # spec §27.9: an embedding call times out after 30,000 ms
# Endpoints that refuse `input` items with this status refuse the item, not the whole batch; the
# indexer then embeds that batch one item at a time so a single bad memory cannot block the rest.
PER_ITEM_STATUSES = frozenset({400, 413, 422})
# A key is mandatory for the openai client; keyless local servers (Ollama, LM Studio) ignore it.
KEYLESS_PLACEHOLDER = "unused"


class Embedder(Protocol):
    model: str
    dimensions: int | None

    def embed(self, texts: Sequence[str], *, timeout: float) -> list[list[float]]: ...


def prepare(text: str) -> str:
    """The text sent to the model: within the estimated token budget, never empty."""
    if text.isascii():
        text = text[:MAX_INPUT_CHARS]
    else:
        used = 0  # in thirds of a token: an ASCII character costs 1, any other 3 per UTF-8 byte
        for i, ch in enumerate(text):
            code = ord(ch)
            used += 1 if code < 0x80 else 6 if code < 0x800 else 9 if code < 0x10000 else 12
            if used > MAX_INPUT_CHARS:
                text = text[:i]
                break
    return text if text.strip() else "."


def shorten(text: str) -> str:
    """`text` cut to SAFE_INPUT_BYTES of UTF-8 (on a character boundary): under any token limit."""
    return text.encode("utf-8", "surrogatepass")[:SAFE_INPUT_BYTES].decode("utf-8", "ignore")


def check_vectors(vectors: list[list[float]], count: int) -> list[list[float]]:
    """Refuse malformed responses: wrong count, ragged or empty vectors, NaN or infinity."""
    if len(vectors) != count:
        raise EmbeddingError(f"the endpoint returned {len(vectors)} embeddings for {count} inputs")
    dims = {len(v) for v in vectors}
    if len(dims) > 1 or 0 in dims:
        raise EmbeddingError(f"the endpoint returned vectors of inconsistent sizes {sorted(dims)}")
    for vec in vectors:
        if not all(isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) for x in vec):
            raise EmbeddingError("the endpoint returned a vector with non-numeric or non-finite values")
    return vectors


def decode_response(body: Any, count: int) -> list[Any]:
    """The vectors of an `/embeddings` JSON body, in input order: base64 (little-endian float32)
    or float arrays, checked like `check_vectors` (count, sizes, finite values)."""
    import numpy as np

    data = body.get("data") if isinstance(body, dict) else None
    if not isinstance(data, list):
        raise EmbeddingError("the endpoint returned no `data` list")
    try:
        items = sorted(data, key=lambda d: int(d.get("index", 0)))
    except (AttributeError, TypeError, ValueError):
        raise EmbeddingError("the endpoint returned malformed `data` items") from None
    if len(items) != count:
        raise EmbeddingError(f"the endpoint returned {len(items)} embeddings for {count} inputs")
    rows = []
    for item in items:
        emb = item.get("embedding")
        if isinstance(emb, str):
            try:
                raw = base64.b64decode(emb, validate=True)
            except ValueError:
                raise EmbeddingError("the endpoint returned an embedding that is not valid base64") from None
            if len(raw) % 4:
                raise EmbeddingError("the endpoint returned a base64 embedding that is not float32")
            rows.append(np.frombuffer(raw, dtype="<f4"))
        elif isinstance(emb, list):
            return check_vectors([list(d.get("embedding") or []) for d in items], count)
        else:
            raise EmbeddingError("the endpoint returned an embedding that is neither base64 nor a list")
    dims = {len(r) for r in rows}
    if len(dims) > 1 or 0 in dims:
        raise EmbeddingError(f"the endpoint returned vectors of inconsistent sizes {sorted(dims)}")
    matrix = np.vstack(rows)
    if not np.isfinite(matrix).all():
        raise EmbeddingError("the endpoint returned a vector with non-numeric or non-finite values")
    return list(matrix)  # float32 rows: `vectors.pack` stores them without a per-float step


class OpenAIEmbedder:
    """`client.embeddings.create` against OpenAI or any compatible server."""

    def __init__(self, *, model: str, api_key: str | None, base_url: str | None, dimensions: int | None) -> None:
        self.model = model
        self.dimensions = dimensions
        self.base_url = base_url
        self._api_key = api_key or KEYLESS_PLACEHOLDER
        self._client: Any = None
        self._lock = threading.Lock()

    def _get_client(self) -> Any:
        with self._lock:
            if self._client is None:
                import openai  # lazy: importing openai costs ~0.3 s

                self._client = openai.OpenAI(api_key=self._api_key, base_url=self.base_url, max_retries=0)
            return self._client

    def embed(self, texts: Sequence[str], *, timeout: float = BATCH_TIMEOUT_S) -> list[list[float]]:
        if not texts:
            return []
        import openai

        args: dict[str, Any] = {"model": self.model, "input": [prepare(t) for t in texts], "encoding_format": "base64"}
        if self.dimensions:
            args["dimensions"] = self.dimensions
        try:
            # `timeout` per request: `with_options` would build a new client (≈40 ms) on every call.
            raw = self._get_client().embeddings.with_raw_response.create(**args, timeout=timeout)
            body = json.loads(raw.http_response.content)
        except openai.APIStatusError as exc:
            raise EmbeddingError(f"HTTP {exc.status_code}: {_short(exc.message)}", status=exc.status_code) from None
        except openai.APIError as exc:  # connection refused, timeout
            raise EmbeddingError(f"{type(exc).__name__}: {_short(str(exc))}") from None
        except ValueError as exc:  # not JSON
            raise EmbeddingError(f"the endpoint returned a body that is not JSON: {_short(str(exc))}") from None
        return decode_response(body, len(texts))


def _short(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit] + "…"


_cache: dict[tuple[Any, ...], Any] = {}
_cache_lock = threading.Lock()


def embedder_for(settings: Any) -> Embedder | None:
    """The configured provider, or None when embeddings are off (`VP_EMBEDDINGS=none`).

    Building it loads nothing: the local model loads on its first `embed`, in the shared model host
    (`VP_MODEL_HOST=shared`, search/shared_model.py) or in this process (`inprocess`)."""
    if settings.embeddings == "local" and getattr(settings, "embed_model", None):
        return folder_embedder(settings.embed_model)  # in-process: the shared host serves the bundled model
    if settings.embeddings == "local":
        from .model_host import supported

        if getattr(settings, "model_host", "shared") == "shared" and supported():
            from .shared_model import shared_embedder  # one model process per user (#20)

            return shared_embedder()
        from .local import local_embedder

        return local_embedder()
    if settings.embeddings != "openai":
        return None
    key = (settings.embedding_model, settings.openai_api_key, settings.openai_base_url, settings.embedding_dimensions)
    with _cache_lock:
        if key not in _cache:
            _cache[key] = OpenAIEmbedder(
                model=settings.embedding_model, api_key=settings.openai_api_key,
                base_url=settings.openai_base_url, dimensions=settings.embedding_dimensions,
            )
        return _cache[key]


def folder_embedder(folder: str, *, threads: int | None = None) -> Any:
    """One in-process embedder per model folder (`VP_EMBED_MODEL=/path`) and thread count."""
    from pathlib import Path

    from .catalogue import CATALOGUE
    from .local import LocalEmbedder

    key = ("folder", folder, threads)
    with _cache_lock:
        if key not in _cache:
            entry = CATALOGUE.get(folder)  # a catalogue name, else a folder path
            _cache[key] = (LocalEmbedder(entry=entry, threads=threads) if entry is not None
                           else LocalEmbedder(folder=Path(folder), threads=threads))
        return _cache[key]
