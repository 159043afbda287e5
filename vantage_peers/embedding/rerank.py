"""Optional reranking of `recall`'s fused head by a cross-encoder (`VP_RERANK_MODEL`, #35).

A cross-encoder reads the query and one candidate together and answers a relevance logit; it is
more accurate than comparing two vectors but costs one model run per candidate, so only the fused
top `VP_RERANK_TOP_K` (default 30) are rescored and reordered; the rest keep their fused order.
The model is a name from `catalogue.RERANKERS` (fetched from the hub at its pinned commit on first
use, checked by SHA-256, then used offline — like VP_EMBED_MODEL's names) or a folder holding
`model.onnx` (or `onnx/model.onnx`) and `tokenizer.json`; it loads in-process on first use. Off by
default. A reranker that fails — a missing folder, a download refused — leaves the fused order as it
was (the answer says nothing is lost).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import catalogue
from .embedding_error import EmbeddingError
from .local import MAX_CHARS, folder_files, threads

MAX_PAIR_TOKENS = 512
DEFAULT_TOP_K = 30


class CrossEncoder:
    def __init__(self, folder: Path | None = None, *, entry: catalogue.Entry | None = None,
                 threads_: int | None = None) -> None:
        self.folder, self.entry = folder, entry
        self.name = entry.name if entry is not None else f"folder:{folder.name if folder else ''}"
        self._threads = threads_
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._inputs: set[str] = set()

    def _load(self) -> None:
        if self._session is not None:
            return
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer

            graph, tokenizer_file = self._files()
            tokenizer = Tokenizer.from_file(str(tokenizer_file))
            tokenizer.enable_truncation(MAX_PAIR_TOKENS)
            tokenizer.no_padding()
            options = ort.SessionOptions()
            options.intra_op_num_threads = self._threads or threads()
            options.inter_op_num_threads = 1
            session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        except EmbeddingError:
            raise
        except Exception as exc:  # noqa: BLE001 - a broken folder: the caller keeps the fused order
            raise EmbeddingError(f"the reranker could not be loaded ({type(exc).__name__}: {exc})") from None
        self._inputs = {i.name for i in session.get_inputs()}
        self._tokenizer, self._session = tokenizer, session

    def _files(self) -> tuple[Path, Path]:
        """(ONNX graph, tokenizer.json): a catalogue entry's are fetched on first use (ModelFileError,
        an EmbeddingError, when refused)."""
        if self.entry is not None:
            snapshot = catalogue.fetch(self.entry)
            return snapshot / catalogue.graph_file(self.entry), snapshot / "tokenizer.json"
        assert self.folder is not None
        return folder_files(self.folder)

    def score(self, query: str, docs: Sequence[str]) -> list[float]:
        """One relevance score per doc (higher is better), in `docs` order."""
        import numpy as np

        if not docs:
            return []
        with self._lock:
            self._load()
            encoded = self._tokenizer.encode_batch([(query[:MAX_CHARS], d[:MAX_CHARS] or ".") for d in docs])
            width = max(len(e.ids) for e in encoded)
            ids = np.zeros((len(docs), width), dtype=np.int64)
            mask = np.zeros_like(ids)
            types = np.zeros_like(ids)
            for row, e in enumerate(encoded):
                n = len(e.ids)
                ids[row, :n], mask[row, :n], types[row, :n] = e.ids, 1, e.type_ids
            feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
            logits = self._session.run(None, {k: v for k, v in feed.items() if k in self._inputs})[0]
        scores = np.asarray(logits, dtype=np.float32).reshape(len(docs), -1)[:, -1]
        if not np.isfinite(scores).all():
            raise EmbeddingError("the reranker produced a non-finite score")
        return [float(s) for s in scores]


_cache: dict[str, CrossEncoder] = {}
_cache_lock = threading.Lock()


def reranker_for(settings: Any) -> CrossEncoder | None:
    """The configured cross-encoder (one per name or folder per process), or None when reranking is off."""
    chosen = getattr(settings, "rerank_model", None)
    if not chosen:
        return None
    with _cache_lock:
        if chosen not in _cache:
            entry = catalogue.RERANKERS.get(chosen)
            _cache[chosen] = CrossEncoder(entry=entry) if entry is not None else CrossEncoder(Path(chosen))
        return _cache[chosen]
