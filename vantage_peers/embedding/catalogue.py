"""Named local models (`VP_EMBED_MODEL=<name>`, #35): a short catalogue, fetched once into the user
cache and checked by SHA-256, usable offline afterwards.

Each entry pins its source (a hub repository and revision), the files the loader needs (the ONNX
graph and `tokenizer.json`), the dimension, the pooling, and the licence. Files are fetched from
`<endpoint>/<repo>/resolve/<revision>/<file>` — the hub's own URL scheme, `HF_ENDPOINT` (default
https://huggingface.co) — with the standard library, so a loopback server can stand in for the hub
in tests. The published hashes of these files could not be read from here: an entry without a hash
is verified against the hash recorded at its first download (`hashes.json` beside the files), so a
file changed or truncated later is refused; an entry with a hash is verified against it from the first
download. A mismatch raises `ModelFileError` with code MODEL_HASH_MISMATCH and keeps nothing.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .embedding_error import EmbeddingError

DEFAULT_ENDPOINT = "https://huggingface.co"
DOWNLOAD_TIMEOUT_S = 60.0


class ModelFileError(EmbeddingError):
    """A named model's file could not be fetched (MODEL_UNAVAILABLE) or is not the pinned one
    (MODEL_HASH_MISMATCH)."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Entry:
    name: str
    repo: str
    revision: str
    files: Mapping[str, str | None]  # path in the repository -> SHA-256 (None: recorded at first download)
    dimensions: int
    pooling: str  # "mean" | "cls"
    licence: str
    size_mb: int
    query_prefix: str = ""  # what the model card asks to prepend to a query (embedding/prefixes.py)
    document_prefix: str = ""  # ... and to a stored document
    extra: Mapping[str, str] = field(default_factory=dict)


CATALOGUE: dict[str, Entry] = {
    e.name: e for e in (
        Entry("bge-small-en-v1.5", "BAAI/bge-small-en-v1.5", "main",
              {"onnx/model.onnx": None, "tokenizer.json": None}, 384, "cls", "MIT", 133,
              query_prefix="Represent this sentence for searching relevant passages: "),
        Entry("gte-small", "thenlper/gte-small", "main",
              {"onnx/model.onnx": None, "tokenizer.json": None}, 384, "mean", "MIT", 133),
        Entry("e5-small-v2", "intfloat/e5-small-v2", "main",
              {"onnx/model.onnx": None, "tokenizer.json": None}, 384, "mean", "MIT", 133,
              query_prefix="query: ", document_prefix="passage: "),
    )
}


def cache_root() -> Path:
    """VP_MODEL_CACHE, else the platform's user cache folder (platformdirs) / models."""
    override = os.environ.get("VP_MODEL_CACHE")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("vantage-peers")) / "models"


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _download(url: str, target: Path, timeout: float) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".part-", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout) as resp:  # noqa: S310 - https or the configured endpoint
            while block := resp.read(1 << 20):
                out.write(block)
        os.replace(tmp, target)
    except OSError as exc:
        raise ModelFileError(f"could not fetch {url}: {exc}", code="MODEL_UNAVAILABLE") from None
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def fetch(entry: Entry, *, endpoint: str | None = None, cache: Path | None = None,
          timeout: float = DOWNLOAD_TIMEOUT_S) -> Path:
    """The local folder of `entry`, downloaded on first use and verified every time it is opened."""
    base = (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
    folder = (cache or cache_root()) / entry.name / entry.revision
    record_path = folder / "hashes.json"
    recorded: dict[str, str] = json.loads(record_path.read_text()) if record_path.exists() else {}
    for rel, pinned in entry.files.items():
        path = folder / rel
        fresh = not path.exists()
        if fresh:  # never re-fetched once present: offline from then on
            _download(f"{base}/{entry.repo}/resolve/{entry.revision}/{rel}", path, timeout)
        digest = _sha256(path)
        expected = pinned or recorded.get(rel)
        if expected is not None and digest != expected:
            if fresh:
                path.unlink(missing_ok=True)  # keep nothing that failed its check
            raise ModelFileError(f"{entry.name}: {rel} has SHA-256 {digest}, expected {expected}",
                                 code="MODEL_HASH_MISMATCH")
        recorded[rel] = digest
    record_path.write_text(json.dumps(recorded, indent=1, sort_keys=True))
    return folder


def present(entry: Entry, cache: Path | None = None) -> list[tuple[str, bool]]:
    """(path, present) of `entry`'s files in the cache (doctor)."""
    folder = (cache or cache_root()) / entry.name / entry.revision
    return [(str(folder / rel), (folder / rel).is_file()) for rel in entry.files]
