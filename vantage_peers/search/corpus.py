"""What the embedding worker needs to know about one embedded table (a *corpus*).

Every corpus has the same kind of job queue — a table with `seq`, a unique key column pointing at
the source row (ON DELETE CASCADE), `attempts`, `nextAttemptAt`, `leaseOwner`, `leaseUntil`,
`lastError`, `createdAt`, filled by triggers on the source table in the write's own transaction —
and its own vec0 table (`VecTable`). The worker in `domains/memory/indexer.py` serves them all in
one scheduler job; `vantage-peers reindex` and `doctor` cover them all.

Memories are the built-in corpus. Any other domain declares one as `CORPUS` in a module
`vantage_peers.domains.<name>.embedding`, found the way tools modules are.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import pkgutil
from dataclasses import dataclass

from .vectors import VecTable


@dataclass(frozen=True)
class Corpus:
    name: str  # plural, for counts and messages: "memories", "fix patterns"
    source: str  # the table whose rows are embedded (integer key `seq`)
    text_sql: str  # SQL expression over a source row: the text sent to the model
    jobs: str  # the job-queue table
    key: str  # its column holding the source row's seq
    vec: VecTable
    meta_sql: tuple[str, ...]  # SQL expressions over a source row, in `vec.columns` order


@functools.cache
def discovered() -> tuple[Corpus, ...]:
    """`CORPUS` of every `vantage_peers.domains.<name>.embedding` module, by domain name (scanned once)."""
    from .. import domains

    found: list[Corpus] = []
    for info in sorted(pkgutil.iter_modules(domains.__path__), key=lambda i: i.name):
        module_name = f"{domains.__name__}.{info.name}.embedding"
        if info.ispkg and importlib.util.find_spec(module_name) is not None:
            corpus = getattr(importlib.import_module(module_name), "CORPUS", None)
            if isinstance(corpus, Corpus):
                found.append(corpus)
    return tuple(found)
