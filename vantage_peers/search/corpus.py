"""What the embedding worker needs to know about one embedded table (a *corpus*).

Every corpus has the same kind of job queue — a table with `seq`, a unique key column pointing at
the source row (ON DELETE CASCADE), `attempts`, `nextAttemptAt`, `leaseOwner`, `leaseUntil`,
`lastError`, `createdAt`, filled by triggers on the source table in the write's own transaction —
and its own vector table (`VecTable`: vec0 on SQLite, pgvector on PostgreSQL). The embedding worker (memory domain) serves them all
in one scheduler job; `vantage-peers reindex` and `doctor` cover them all.

A domain registers its corpus from its `register(app)` with `app.add_corpus(corpus)`; the worker,
`reindex` and `doctor` take the corpora from the app (`app.corpora`). This package knows no domain.
"""

from __future__ import annotations

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
