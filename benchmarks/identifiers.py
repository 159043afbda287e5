"""A codename / identifier retrieval set, generated deterministically (no external data).

Agents search their memory by exact handles: task ids (`tsk_…`), ticket and PR numbers
(`PR-1234`), made-up project codenames, acronyms (`OKLCH`), `snake_case_name`s, file paths. A
fuzzy vector must never outrank the one memory that holds the handle. This set holds:

- 60 *target* memories, each mentioning one handle inside an ordinary engineering sentence;
- 600 *distractors*: the same kind of sentences about the same topics with other handles, and
  near-misses of the targets (`PR-1235` beside `PR-1234`, `tsk_9f3a…` sharing a prefix) so the
  vector side, which sees them as nearly identical, has plenty of wrong neighbours;
- one query per target: the handle alone (what an agent types), judged relevant to its target.

BEIR-shaped like the shared collections: (docs, queries, qrels) from `build()`.
"""

from __future__ import annotations

import random
from typing import Any

TOPICS = [
    "the deploy pipeline", "the billing export", "the login page", "the search index", "the nightly backup",
    "the colour tokens", "the rate limiter", "the mobile build", "the onboarding flow", "the audit log",
    "the webhook retries", "the cache warmer", "the CSV importer", "the dark theme", "the email digest",
]
VERBS = [
    "fixed a race in", "reverted the change to", "reviewed", "added tests for", "profiled", "documented",
    "rewrote", "found a regression in", "paired on", "shipped a flag for",
]
TAILS = [
    "after the incident on Tuesday.", "because the staging run kept timing out.", "so the release can go out.",
    "as discussed in the planning call.", "before the freeze.", "and left notes for the next shift.",
]
CODENAMES = [
    "Bluefinch", "Quillmoor", "Tarragon", "Vexhollow", "Marrowind", "Octavine", "Pellucid", "Zephyrine",
    "Grisbane", "Hollowell", "Kestrelune", "Lumenfall", "Nettlebrook", "Orrisgate", "Saffronet",
]
ACRONYMS = ["OKLCH", "HSTS", "CORS", "SPIFFE", "WCAG", "ICU", "LRU", "CRDT", "SCIM", "JWKS", "DKIM", "OIDC"]
WORDS = ["retry", "budget", "ledger", "cursor", "shard", "token", "quota", "window", "bucket", "digest",
         "anchor", "lease", "epoch", "marker", "offset", "sweep"]


def _handles(rng: random.Random) -> list[tuple[str, str]]:
    """(kind, handle) pairs for the targets: every kind the issue names, several of each."""
    out: list[tuple[str, str]] = []
    for _ in range(12):
        out.append(("task", "tsk_" + "".join(rng.choice("0123456789abcdef") for _ in range(12))))
    for _ in range(12):
        out.append(("pr", f"PR-{rng.randint(1000, 9999)}"))
    for name in rng.sample(CODENAMES, 12):
        out.append(("codename", name))
    for name in rng.sample(ACRONYMS, 12):
        out.append(("acronym", name))
    for _ in range(12):
        a, b, c = rng.sample(WORDS, 3)
        out.append(("snake", f"{a}_{b}_{c}"))
    return out


def _near_miss(kind: str, handle: str, rng: random.Random) -> str:
    if kind == "task":
        return handle[:8] + "".join(rng.choice("0123456789abcdef") for _ in range(8))
    if kind == "pr":
        return f"PR-{int(handle[3:]) + rng.choice([-2, -1, 1, 2])}"
    if kind == "snake":
        parts = handle.split("_")
        parts[rng.randrange(3)] = rng.choice(WORDS)
        return "_".join(parts)
    if kind == "codename":
        return rng.choice(CODENAMES)  # another codename in the same sentence shape
    return rng.choice(ACRONYMS)


def _sentence(rng: random.Random, handle: str) -> str:
    return f"{rng.choice(['Ana', 'Bo', 'Chen', 'Dee', 'Eli'])} {rng.choice(VERBS)} {rng.choice(TOPICS)} " \
           f"({handle}) {rng.choice(TAILS)}"


def build(seed: int = 20) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, dict[str, int]]]:
    rng = random.Random(seed)
    handles = _handles(rng)
    docs: list[dict[str, Any]] = []
    queries: list[dict[str, Any]] = []
    qrels: dict[str, dict[str, int]] = {}
    targets = {h for _, h in handles}
    for i, (kind, handle) in enumerate(handles):
        doc_id = f"t{i}"
        docs.append({"_id": doc_id, "title": "", "text": _sentence(rng, handle)})
        queries.append({"_id": f"q{i}", "text": handle, "kind": kind})
        qrels[f"q{i}"] = {doc_id: 1}
    for j in range(600):
        kind, handle = handles[j % len(handles)]
        other = _near_miss(kind, handle, rng)
        if other in targets:  # a distractor never holds a target's handle
            other = f"{other}x" if kind != "task" else other[:-1] + "z"
        docs.append({"_id": f"d{j}", "title": "", "text": _sentence(rng, other)})
    rng.shuffle(docs)
    return docs, queries, qrels
