"""Query and document prefixes (#35): text some models want before what they embed.

e5 wants `query: ` before a query and `passage: ` before a document; bge-small-en-v1.5 wants
`Represent this sentence for searching relevant passages: ` before a query only. A catalogue entry
carries its model card's prefixes (embedding/catalogue.py); a folder model may declare them in an
optional `vantage-peers.json` beside its `model.onnx` (the folder's root):

    {"query_prefix": "query: ", "document_prefix": "passage: "}

Vectors made with other prefixes are not comparable, so prefixes are part of the model id
(`model_id`: `<name>+prefix:<8 hex>`, a digest of both): the index records it, and a change of
prefixes is a change of model (a switch, `vantage-peers reindex`).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

from .embedding_error import EmbeddingError

FOLDER_FILE = "vantage-peers.json"


@dataclass(frozen=True)
class Prefixes:
    query: str = ""
    document: str = ""

    def digest(self) -> str:
        return hashlib.sha256(json.dumps([self.query, self.document]).encode()).hexdigest()[:8]


NONE = Prefixes()


def model_id(name: str, prefixes: Prefixes) -> str:
    """`name` alone without prefixes (ids recorded before prefixes stay valid), else with their digest."""
    return name if prefixes == NONE else f"{name}+prefix:{prefixes.digest()}"


def folder_prefixes(folder: Path) -> Prefixes:
    """The prefixes `vantage-peers.json` in `folder` declares (none when there is no such file)."""
    path = folder / FOLDER_FILE
    if not path.is_file():
        return NONE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise EmbeddingError(f"{path} is not readable JSON ({exc})") from None
    if not isinstance(data, dict) or not all(isinstance(data.get(k, ""), str) for k in ("query_prefix", "document_prefix")):
        raise EmbeddingError(f"{path}: query_prefix and document_prefix must be strings")
    return Prefixes(query=data.get("query_prefix", ""), document=data.get("document_prefix", ""))


def apply(prefix: str, texts: list[str]) -> list[str]:
    return [prefix + t for t in texts] if prefix else texts
