"""Named local models (`VP_EMBED_MODEL=<name>`, #35): a short catalogue, fetched once into the user
cache and checked by SHA-256, usable offline afterwards.

Each entry pins its source (a hub repository and revision), the files the loader needs (the ONNX
graph and `tokenizer.json`) with their SHA-256 where published, the dimension, the pooling, and the
licence. Files are fetched by `huggingface_hub.hf_hub_download` (embedding/hub_files.py) from
`HF_ENDPOINT` (default https://huggingface.co) into the hub cache layout under `cache_root()`, so a
loopback server speaking the hub's `/resolve/` protocol can stand in for the hub in tests. Once every
file of an entry is in the cache a start makes no request at all (`try_to_load_from_cache`), with or
without a network.

Every file is checked each time the model is opened: against the hub's own content id (the name of the
blob it was stored under), and against the entry's pinned SHA-256 or, for an entry without one, the
SHA-256 recorded at its first download (`.sha256/` beside the hub folders), so a file changed or
truncated later is refused. Fully pinned (commit and both hashes): `bge-small-en-v1.5`. `gte-small` and
`e5-small-v2` follow `main` (no commit with published hashes of their ONNX files was found) and are
hashed at their first download. A mismatch raises `ModelFileError` with code MODEL_HASH_MISMATCH and
removes the file from the cache (its snapshot link and its blob); a file that cannot be had raises
MODEL_UNAVAILABLE with the cause (unknown revision, missing file, hub unreachable, `HF_HUB_OFFLINE`).

The model id stored with the vectors is the entry's name (with its prefixes, embedding/prefixes.py),
never its revision: `bge-small-en-v1.5` moved from `main` to a commit whose ONNX file has the hash
recorded by projects that fetch it from `main`, so an index built before keeps its model id and stays
current.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from . import hub_files
from .embedding_error import EmbeddingError

DEFAULT_ENDPOINT = "https://huggingface.co"
DOWNLOAD_TIMEOUT_S = 60.0  # per request for the file's metadata (the hub library's own timeouts for the body)
RECORDS = ".sha256"  # hashes recorded at first download, per repository / commit / file


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
    revision: str  # a commit (pinned) or a branch
    files: Mapping[str, str | None]  # path in the repository -> SHA-256 (None: recorded at first download)
    dimensions: int
    pooling: str  # "mean" | "cls"
    licence: str
    size_mb: int
    query_prefix: str = ""  # what the model card asks to prepend to a query (embedding/prefixes.py)
    document_prefix: str = ""  # ... and to a stored document
    extra: Mapping[str, str] = field(default_factory=dict)


# bge-small-en-v1.5: the commit and both hashes agree across several public projects that verify them
# (also for Xenova/bge-small-en-v1.5's copy of the same files); projects fetching the ONNX file from
# `main` record the same hash, so vectors made before the pin (at `main`) are this model's vectors.
BGE_SMALL_REVISION = "5c38ec7c405ec4b44b94cc5a9bb96e735b38267a"

CATALOGUE: dict[str, Entry] = {
    e.name: e for e in (
        Entry("bge-small-en-v1.5", "BAAI/bge-small-en-v1.5", BGE_SMALL_REVISION,
              {"onnx/model.onnx": "828e1496d7fabb79cfa4dcd84fa38625c0d3d21da474a00f08db0f559940cf35",
               "tokenizer.json": "d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66"},
              384, "cls", "MIT", 133,
              query_prefix="Represent this sentence for searching relevant passages: "),
        Entry("gte-small", "thenlper/gte-small", "main",
              {"onnx/model.onnx": None, "tokenizer.json": None}, 384, "mean", "MIT", 133),
        Entry("e5-small-v2", "intfloat/e5-small-v2", "main",
              {"onnx/model.onnx": None, "tokenizer.json": None}, 384, "mean", "MIT", 133,
              query_prefix="query: ", document_prefix="passage: "),
    )
}


# Cross-encoders for VP_RERANK_MODEL (embedding/rerank.py). ms-marco-MiniLM-L-6-v2: Xenova's int8
# ONNX export, pinned to the commit and the graph's SHA-256 (23,143,499 bytes) a public project
# verifies; its tokenizer.json is checked against the hash recorded at its first download.
MS_MARCO_REVISION = "a09144355adeed5f58c8ed011d209bf8ee5a1fec"

RERANKERS: dict[str, Entry] = {
    e.name: e for e in (
        Entry("ms-marco-MiniLM-L-6-v2", "Xenova/ms-marco-MiniLM-L-6-v2", MS_MARCO_REVISION,
              {"onnx/model_quantized.onnx": "e9d8ebf845c413e981c175bfe49a3bfa9b3dcce2a3ba54875ee5df5a58639fbe",
               "tokenizer.json": None}, 1, "logit", "Apache-2.0", 23),
    )
}


def graph_file(entry: Entry) -> str:
    """The entry's ONNX graph: its one `.onnx` file."""
    return next(rel for rel in entry.files if rel.endswith(".onnx"))


def cache_root() -> Path:
    """VP_MODEL_CACHE, else the platform's user cache folder (platformdirs) / models."""
    override = os.environ.get("VP_MODEL_CACHE")
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("vantage-peers")) / "models"


def _cache_dir(cache: Path | None) -> Path:
    return (cache or cache_root()).expanduser().resolve()


def _record_path(cache_dir: Path, entry: Entry, snapshot: Path, rel: str) -> Path:
    return cache_dir / RECORDS / entry.repo.replace("/", "--") / snapshot.name / f"{rel}.sha256"


def _write_atomic(path: Path, text: str) -> None:
    """Concurrent first downloads write the same digest: each writes its own file and renames it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".part-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as out:
            out.write(text)
        os.replace(tmp, path)
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def _verify(entry: Entry, rel: str, path: Path, snapshot: Path, cache_dir: Path) -> None:
    """Refuse (and remove from the cache) a file that is not the hub's, the pinned or the recorded one."""
    digest, hub_id = hub_files.content_check(path)
    record = _record_path(cache_dir, entry, snapshot, rel)
    pinned = entry.files[rel]
    expected = pinned or (record.read_text().strip() if record.is_file() else None)
    if hub_id is not None or (expected is not None and digest != expected):
        hub_files.discard(path)
        against = f"the hub's content id {hub_id}" if hub_id is not None else f"expected {expected}"
        raise ModelFileError(f"{entry.name}: {rel} has SHA-256 {digest}, not {against}; removed from the cache "
                             f"({cache_dir})", code="MODEL_HASH_MISMATCH")
    if pinned is None and expected is None:
        _write_atomic(record, digest + "\n")


def fetch(entry: Entry, *, endpoint: str | None = None, cache: Path | None = None,
          timeout: float = DOWNLOAD_TIMEOUT_S) -> Path:
    """The local folder of `entry` (its snapshot in the cache), downloaded on first use and verified
    every time it is opened."""
    cache_dir = _cache_dir(cache)
    paths = {rel: hub_files.cached(entry.repo, entry.revision, rel, cache_dir) for rel in entry.files}
    if any(p is None for p in paths.values()):  # first use, or a file refused before: ask the hub
        base = (endpoint or os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")
        try:
            # Every file again, not only the missing ones: a branch may have moved since, and all of them
            # must come from one commit (those already cached at it are linked, not fetched).
            paths = {rel: hub_files.download(entry.repo, entry.revision, rel, cache_dir, endpoint=base,
                                             timeout=timeout) for rel in entry.files}
        except hub_files.HubError as exc:
            raise ModelFileError(f"{entry.name}: {exc}", code="MODEL_UNAVAILABLE") from None
    found = {rel: p for rel, p in paths.items() if p is not None}
    snapshots = {hub_files.snapshot_of(p, rel) for rel, p in found.items()}
    if len(snapshots) != 1:
        raise ModelFileError(f"{entry.name}: its files come from different commits ({sorted(s.name for s in snapshots)})",
                             code="MODEL_UNAVAILABLE")
    snapshot = snapshots.pop()
    for rel, path in found.items():
        _verify(entry, rel, path, snapshot, cache_dir)
    return snapshot


def present(entry: Entry, cache: Path | None = None) -> list[tuple[str, bool]]:
    """(path, present) of `entry`'s files in the cache (doctor); never touches the network."""
    cache_dir = _cache_dir(cache)
    out: list[tuple[str, bool]] = []
    for rel in entry.files:
        path = hub_files.cached(entry.repo, entry.revision, rel, cache_dir)
        where = path or hub_files.repo_folder(cache_dir, entry.repo) / "snapshots" / entry.revision / rel
        out.append((str(where), path is not None))
    return out
