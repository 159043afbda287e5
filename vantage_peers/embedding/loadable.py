"""The embedder of a model that made vectors on file, when this process can still load it (#35).

While a switch to another model runs (search/vector_switch.py), a query is embedded by the *old*
model so that it can be compared with the old index. Each embedder says where it comes from
(`source_of`, recorded with the vectors); `embedder_of` rebuilds it from that record, and only if
the model it builds has exactly the recorded id (same prefixes) — else None, and the caller answers
from keywords. The bundled model is always loadable; a catalogue model only when its files are
still cached (never downloaded for this); a folder model while its folder holds the files; a model
of an OpenAI-compatible server when the same server is configured.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .embedding_error import EmbeddingError
from .embeddings import OpenAIEmbedder, folder_embedder


def source_of(embedder: Any) -> str | None:
    """Where `embedder`'s model comes from, as JSON text (no key or secret in it)."""
    if isinstance(embedder, OpenAIEmbedder):
        return json.dumps({"kind": "openai", "base_url": embedder.base_url, "dimensions": embedder.dimensions})
    source = getattr(embedder, "source", None)
    if source is None:
        from .local import MODEL

        source = {"kind": "bundled"} if getattr(embedder, "model", None) == MODEL else None
    return json.dumps(source, sort_keys=True) if source else None


def embedder_of(model: str, source: str | None, settings: Any) -> Any:
    """An embedder producing `model`'s vectors in this process, or None when it cannot be had here."""
    from .local import MODEL

    found: dict[str, Any] = json.loads(source) if source else ({"kind": "bundled"} if model == MODEL else {})
    kind = found.get("kind")
    embedder: Any = None
    if kind == "bundled":
        from .local import local_embedder

        embedder = local_embedder()
    elif kind == "catalogue":
        from .catalogue import CATALOGUE, present

        entry = CATALOGUE.get(str(found.get("name")))
        if entry is not None and all(ok for _, ok in present(entry)):
            embedder = folder_embedder(entry.name)
    elif kind == "folder":
        from .local import folder_files

        path = Path(str(found.get("path")))
        try:
            folder_files(path)
        except EmbeddingError:  # the folder or its files are gone: not loadable
            return None
        embedder = folder_embedder(str(path))
    elif kind == "openai" and found.get("base_url") and found.get("base_url") == getattr(settings, "openai_base_url", None):
        embedder = OpenAIEmbedder(model=model, api_key=getattr(settings, "openai_api_key", None),
                                  base_url=str(found["base_url"]), dimensions=found.get("dimensions"))
    return embedder if embedder is not None and embedder.model == model else None
