"""Keyword search on PostgreSQL: FTS5's MATCH expressions and BM25, over tsvector side tables.

PostgreSQL's own `ts_rank` ranks worse than BM25, so the ranking is FTS5's `bm25()` computed here,
term for term, from data PostgreSQL keeps (db/pg/prelude.sql, filled by db/pgschema.py):
- `<table>_fts(seq, doc tsvector, len)`: one row per searchable row, `doc` tokenized like FTS5's
  `porter unicode61 remove_diacritics 2`, column i's positions labelled A/B/C/D, `len` the row's
  token count; the table's comment names the columns in label order.
- N and the average length come from that table (an index-only scan of its primary key), each
  phrase's document frequency from its GIN index (`count(*) … WHERE doc @@ phrase`; a common word of
  a large analyzed table from PostgreSQL's statistics, `_estimated`), and a word's
  weighted frequency in a row from `ts_rank_cd` (`_sql_ranked`; phrases and prefixes: the row's
  positions from `unnest(doc)`); the score is FTS5's formula (k1 1.2, b 0.75, idf floored at 1e-6,
  per-column weights, phrases as separate terms), negated like `bm25()`.
The MATCH expressions come from `fts.fts_query` (and a store's column filter, e.g. memories'
`nsKey : "n…"*`): quoted phrases, AND/OR, parentheses, `column :` and a trailing `*`. They are
parsed here and rebuilt as a tsquery from lexemes PostgreSQL computed, so user text never reaches
SQL or tsquery syntax.

Components use FTS5's `trigram` tokenizer on SQLite (substring search): `trigram_rows` matches
each phrase as a case-insensitive substring and computes the same BM25 over trigram counts.

Why one file over 400 lines: the MATCH parser, the tsquery builder and the BM25 scorer share one
small AST and must agree term for term with FTS5; split, a change to one would silently skew the
others' scores.
"""

from __future__ import annotations

import math
import re
import struct
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ..db import Connection, Row
from . import budget

K1 = 1.2
B = 0.75
LABELS = "ABCD"
_LEXEME_CACHE = 4096


@dataclass(frozen=True)
class Phrase:
    text: str
    column: str | None = None
    prefix: bool = False


@dataclass
class Node:
    op: str  # "and" | "or" | "phrase"
    children: list[Node] = field(default_factory=list)
    phrase: Phrase | None = None


class MatchSyntax(ValueError):
    """A MATCH expression outside the subset the stores build (a bug, never user text)."""


_TOKEN = re.compile(r'\s*(?:"((?:[^"]|"")*)"|(\()|(\))|(:)|(\*)|([A-Za-z_][A-Za-z0-9_]*))')


def _lex(expr: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(expr):
        if expr[pos:].strip() == "":
            break
        m = _TOKEN.match(expr, pos)
        if m is None:
            raise MatchSyntax(f"cannot parse MATCH expression at {expr[pos:pos + 20]!r}")
        quoted, lp, rp, colon, star, word = m.groups()
        if quoted is not None:
            out.append(("str", quoted.replace('""', '"')))
        elif lp:
            out.append(("(", lp))
        elif rp:
            out.append((")", rp))
        elif colon:
            out.append((":", colon))
        elif star:
            out.append(("*", star))
        else:
            out.append(("word", word))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]]) -> None:
        self.tokens, self.at = tokens, 0

    def peek(self, offset: int = 0) -> tuple[str, str] | None:
        i = self.at + offset
        return self.tokens[i] if i < len(self.tokens) else None

    def take(self) -> tuple[str, str]:
        tok = self.tokens[self.at]
        self.at += 1
        return tok

    def parse_or(self, column: str | None) -> Node:
        parts = [self.parse_and(column)]
        while (tok := self.peek()) is not None and tok == ("word", "OR"):
            self.take()
            parts.append(self.parse_and(column))
        return parts[0] if len(parts) == 1 else Node("or", parts)

    def parse_and(self, column: str | None) -> Node:
        parts = [self.parse_unary(column)]
        while (tok := self.peek()) is not None and tok[0] != ")" and tok != ("word", "OR"):
            if tok == ("word", "AND"):
                self.take()
            parts.append(self.parse_unary(column))
        return parts[0] if len(parts) == 1 else Node("and", parts)

    def parse_unary(self, column: str | None) -> Node:
        tok = self.peek()
        if tok is None:
            raise MatchSyntax("MATCH expression ends early")
        if tok[0] == "word" and tok[1] not in ("AND", "OR", "NOT") and self.peek(1) == (":", ":"):
            self.take()
            self.take()
            return self.parse_unary(tok[1])
        if tok[0] == "(":
            self.take()
            node = self.parse_or(column)
            if self.peek() is None or self.take()[0] != ")":
                raise MatchSyntax("unbalanced parentheses in MATCH expression")
            return node
        if tok[0] == "str":
            self.take()
            prefix = self.peek() == ("*", "*")
            if prefix:
                self.take()
            return Node("phrase", phrase=Phrase(tok[1], column, prefix))
        raise MatchSyntax(f"unexpected {tok[1]!r} in MATCH expression")


def parse(expr: str) -> Node:
    """The tree of an FTS5 MATCH expression built by the stores."""
    parser = _Parser(_lex(expr))
    node = parser.parse_or(None)
    if parser.peek() is not None:
        raise MatchSyntax(f"unexpected {parser.peek()[1]!r} in MATCH expression")  # type: ignore[index]
    return node


def phrases(node: Node) -> list[Phrase]:
    """The phrases of a tree, left to right (FTS5's phrase numbering, one BM25 term each)."""
    if node.op == "phrase":
        return [node.phrase]  # type: ignore[list-item]
    return [p for child in node.children for p in phrases(child)]


# ---- lexemes: PostgreSQL tokenizes and stems the query's phrases exactly like the documents

_cache: OrderedDict[str, tuple[tuple[str, int], ...]] = OrderedDict()
_cache_lock = threading.Lock()


def lexemes(conn: Connection, texts: Sequence[str]) -> dict[str, tuple[tuple[str, int], ...]]:
    """Each text's (lexeme, offset from its first token) sequence, as `vp_search` indexes it."""
    out: dict[str, tuple[tuple[str, int], ...]] = {}
    with _cache_lock:
        for text in texts:
            if text in _cache:
                out[text] = _cache[text]
                _cache.move_to_end(text)
    missing = list(dict.fromkeys(t for t in texts if t not in out))
    if missing:
        found: dict[int, list[tuple[int, str]]] = {}
        for ord_, lexeme, pos in conn.rows(
                "SELECT q.ord, u.lexeme, p.pos FROM unnest(?::text[]) WITH ORDINALITY AS q(txt, ord) "
                "CROSS JOIN LATERAL unnest(to_tsvector('vp_search', vp_fts_words(q.txt))) AS u "
                "CROSS JOIN LATERAL unnest(u.positions) AS p(pos)", [missing]):
            found.setdefault(int(ord_), []).append((int(pos), str(lexeme)))
        with _cache_lock:
            for i, text in enumerate(missing, start=1):
                seq = sorted(found.get(i, []))
                first = seq[0][0] if seq else 0
                value = tuple((lex, pos - first) for pos, lex in seq)
                out[text] = _cache[text] = value
                while len(_cache) > _LEXEME_CACHE:
                    _cache.popitem(last=False)
    return out


def _quote(lexeme: str) -> str:
    return "'" + lexeme.replace("\\", "\\\\").replace("'", "''") + "'"


def _phrase_tsquery(phrase: Phrase, lex: tuple[tuple[str, int], ...], label: str | None) -> str | None:
    if not lex:
        return None  # a phrase with no token (punctuation only) matches nothing, as in FTS5
    parts, last = [], 0
    for i, (lexeme, offset) in enumerate(lex):
        suffix = ":" + ("*" if phrase.prefix and i == len(lex) - 1 else "") + (label or "")
        term = _quote(lexeme) + (suffix if suffix != ":" else "")
        if i:
            parts.append(f"<{offset - last}>" if offset - last != 1 else "<->")
        parts.append(term)
        last = offset
    return "(" + " ".join(parts) + ")"


def tsquery(node: Node, lex: dict[str, tuple[tuple[str, int], ...]], labels: dict[str, str]) -> str | None:
    """The tsquery text of a tree, or None when it can match nothing."""
    if node.op == "phrase":
        phrase = node.phrase
        assert phrase is not None
        label = None
        if phrase.column is not None:
            if phrase.column not in labels:
                raise MatchSyntax(f"no column {phrase.column!r} in this full-text index")
            label = labels[phrase.column]
        return _phrase_tsquery(phrase, lex[phrase.text], label)
    parts = [tsquery(child, lex, labels) for child in node.children]
    if node.op == "and":
        return None if any(p is None for p in parts) else "(" + " & ".join(parts) + ")"  # type: ignore[arg-type]
    kept = [p for p in parts if p is not None]
    return None if not kept else "(" + " | ".join(kept) + ")"


# ---- BM25

# A row's tsvector cut down to the query's lexemes (`?` = their array) before it is unnested: two
# ts_delete passes in C cost far less than a row per lexeme of the whole document.
_ONLY = "ts_delete(m.doc, tsvector_to_array(ts_delete(m.doc, ?::text[])))"

_columns: dict[str, tuple[str, ...]] = {}


def columns_of(conn: Connection, fts: str) -> tuple[str, ...]:
    """The indexed columns of side table `fts`, in label order (its comment, see db/pg/prelude.sql);
    a trigram index (a view) says `trigram` first."""
    if fts not in _columns:
        comment = conn.scalar("SELECT obj_description(to_regclass(?), 'pg_class')", [fts])
        if not comment:
            raise MatchSyntax(f"{fts} is not a full-text side table")
        _columns[fts] = tuple(str(comment).split())
    return _columns[fts]


def idf(rows: int, hits: int) -> float:
    value = math.log((rows - hits + 0.5) / (hits + 0.5))
    return value if value > 0 else 1e-6  # FTS5's floor: a very common phrase still counts a little


class _Term:
    """One phrase of the query, ready for counting in a row's positions."""

    def __init__(self, phrase: Phrase, lex: tuple[tuple[str, int], ...], label: str | None,
                 weights: dict[str, float]) -> None:
        self.lex, self.label, self.prefix = lex, label, phrase.prefix
        self.weights = weights
        self.idf = 0.0

    @property
    def weighted(self) -> bool:
        """False when every column it can hit has weight 0 (it adds nothing: skip its frequency)."""
        if not self.lex:
            return False
        if self.label is not None:
            return self.weights.get(self.label, 1.0) != 0
        return any(w != 0 for w in self.weights.values()) or len(self.weights) < len(LABELS)

    def _at(self, entries: dict[str, dict[int, str]], lexeme: str, last: bool) -> list[dict[int, str]]:
        if last and self.prefix:
            return [v for k, v in entries.items() if k.startswith(lexeme)]
        got = entries.get(lexeme)
        return [got] if got is not None else []

    def frequency(self, entries: dict[str, dict[int, str]]) -> float:
        """FTS5's per-phrase frequency: Σ over its occurrences of the weight of their column."""
        first_lex, _ = self.lex[0]
        starts = self._at(entries, first_lex, len(self.lex) == 1)
        total = 0.0
        for positions in starts:
            for pos, label in positions.items():
                if self.label is not None and label != self.label:
                    continue
                ok = True
                for i, (lexeme, offset) in enumerate(self.lex[1:], start=1):
                    if not any(m.get(pos + offset) == label for m in self._at(entries, lexeme, i == len(self.lex) - 1)):
                        ok = False
                        break
                if ok:
                    total += self.weights.get(label, 1.0)
        return total


def keyword_rows(conn: Connection, *, fts: str, table: str, match: str, limit: int, where: Sequence[str],
                 params: Sequence[Any], source: str, source_args: Sequence[Any], weights: Sequence[float],
                 columns: str) -> list[Row]:
    """`search.keyword.keyword_rows` on PostgreSQL (same arguments, same rows, same `rank`).

    One-word phrases (`_sql_ranked`): the phrases' lexemes (cached per process), the counts not
    remembered, and one ranking statement returning the best `limit` rows (two for MaxScore). Else
    (`_ranked_rows`): the statistics with the matching rows' positions of the query's lexemes, then
    the `columns` of the best `limit` rows (by primary key)."""
    tree = parse(match)
    names = columns_of(conn, fts)
    labels = {name: LABELS[i] for i, name in enumerate(names)}
    weight_of = {LABELS[i]: float(w) for i, w in enumerate(weights)}
    for i in range(len(names)):
        weight_of.setdefault(LABELS[i], 1.0)
    plist = phrases(tree)
    lex = lexemes(conn, [p.text for p in plist])
    query = tsquery(tree, lex, labels)
    if query is None:
        return []
    terms = [_Term(p, lex[p.text], labels.get(p.column) if p.column else None, weight_of) for p in plist]
    return _ranked_rows(conn, fts=fts, table=table, query=query, terms=terms, limit=limit, where=where,
                        params=params, source=source, source_args=source_args, columns=columns)


def _ranked_rows(conn: Connection, *, fts: str, table: str, query: str, terms: list[_Term], limit: int,
                 where: Sequence[str], params: Sequence[Any], source: str, source_args: Sequence[Any],
                 columns: str) -> list[Row]:
    scored = [t for t in terms if t.weighted]
    weights = [_rank_cd_weights(t) for t in scored]
    if scored and all(len(t.lex) == 1 and not t.prefix for t in scored) and None not in weights:
        return _sql_ranked(conn, fts=fts, table=table, query=query, scored=scored, limit=limit, where=where,
                           params=params, source=source, source_args=source_args, columns=columns,
                           weights=weights)  # type: ignore[arg-type]
    counts = "".join(f", (SELECT count(*) FROM {fts} WHERE doc @@ ?::tsquery) AS h{i}" for i in range(len(scored)))
    matching = " AND ".join(f"({c})" for c in ["f.doc @@ ?::tsquery", *where])
    # One statement: the statistics (a one-row CTE) joined to the matching rows' positions of the
    # query's lexemes (or, with only zero-weight phrases, to the matching rows alone).
    if scored:
        hits = (f"SELECT d.seq AS vp_seq, d.id AS vp_id, f.len AS vp_len, u.lexeme AS vp_lexeme, "
                f"u.positions AS vp_positions, u.weights AS vp_weights "
                f"FROM {fts} f JOIN {source} d ON d.seq = f.seq CROSS JOIN LATERAL unnest(%s) AS u "
                f"WHERE {matching} AND (u.lexeme = ANY(?::text[]) OR EXISTS (SELECT 1 FROM unnest(?::text[]) "
                f"AS x(p) WHERE starts_with(u.lexeme, x.p)))")
        wanted = sorted({lexeme for t in scored for lexeme, _ in t.lex})
        prefixes = sorted({t.lex[-1][0] for t in scored if t.prefix})
        if prefixes:  # a prefix can match lexemes not known in advance: every lexeme of the row is read
            hits, pre = hits.replace("unnest(%s)", "unnest(f.doc)"), []
        else:
            hits, pre = hits.replace("unnest(%s)", "unnest(" + _ONLY.replace("m.doc", "f.doc") + ")"), [wanted]
        hit_args: list[Any] = [*source_args, *pre, query, *params, wanted, prefixes]
    else:  # only zero-weight phrases: every match scores 0, as in FTS5
        hits = (f"SELECT d.seq AS vp_seq, d.id AS vp_id, f.len AS vp_len, NULL::text AS vp_lexeme, "
                f"NULL::int2[] AS vp_positions, NULL::text[] AS vp_weights "
                f"FROM {fts} f JOIN {source} d ON d.seq = f.seq WHERE {matching}")
        hit_args = [*source_args, query, *params]
    rows = budget.query(
        conn,
        f"WITH vp_stats AS MATERIALIZED (SELECT count(*) AS n, coalesce(sum(len), 0) AS total{counts} FROM {fts}) "
        f"SELECT vp_stats.*, h.* FROM vp_stats LEFT JOIN LATERAL ({hits}) h ON TRUE",
        [*(_phrase_tsquery(Phrase("", None, t.prefix), t.lex, t.label) for t in scored), *hit_args])
    if not rows:
        return []
    n, total = int(rows[0]["n"]), int(rows[0]["total"])
    for i, term in enumerate(scored):
        term.idf = idf(n, int(rows[0][f"h{i}"]))
    docs: dict[int, tuple[Any, int, dict[str, dict[int, str]]]] = {}
    for r in rows:
        if r["vp_seq"] is None:
            continue
        entry = docs.setdefault(r["vp_seq"], (r["vp_id"], int(r["vp_len"]), {}))
        if r["vp_lexeme"] is not None:
            entry[2][r["vp_lexeme"]] = dict(zip(r["vp_positions"] or (), r["vp_weights"] or (), strict=False))
    avgdl = (total / n) if n else 1.0
    ranked: list[tuple[float, Any, int]] = []
    for seq, (ident, length, entries) in docs.items():
        score = 0.0
        norm = K1 * (1 - B + B * length / avgdl) if avgdl else K1
        for term in scored:
            freq = term.frequency(entries)
            if freq:
                score += term.idf * (freq * (K1 + 1.0)) / (freq + norm)
        ranked.append((-score, ident, seq))
    ranked.sort(key=lambda item: (item[0], item[1]))
    top = ranked[:max(0, limit)]
    if not top:
        return []
    if budget.timed_out():
        return []
    full = {r["vp_key"]: r for r in conn.query(
        f"SELECT {columns}, d.seq AS vp_key FROM {table} d WHERE d.seq = ANY(?::bigint[])", [[s for _, _, s in top]])}
    out = []
    for rank, _, seq in top:
        row = full.get(seq)
        if row is None:
            continue
        row = dict(row)
        row.pop("vp_key", None)
        row["rank"] = rank
        out.append(row)
    return out


# BM25's statistics of a large table, remembered per process for STATS_TTL_S: N and the total length
# (an index-only scan of every row: ≈16 ms at 100k) and a common word's document frequency (a scan of
# its rows: ≈50 ms for a word in most of 100k rows). Within seconds they move by a few rows in
# thousands; a table under LARGE_ROWS rows, or a word in fewer rows than that, is counted every time.
# Within one read transaction (one snapshot) every count is also remembered for the rest of it: a
# bounded recall ranks its words twice (search/bounded.py) and counts each word once.
STATS_TTL_S = 10.0
LARGE_ROWS = 10_000
_stats: weakref.WeakKeyDictionary[Any, dict[Any, tuple[float, Any]]] = weakref.WeakKeyDictionary()
_stats_lock = threading.Lock()
_in_read: weakref.WeakKeyDictionary[Any, dict[Any, Any]] = weakref.WeakKeyDictionary()


def _read_memo(conn: Connection) -> dict[Any, Any] | None:
    """This read transaction's counts (a connection object lives for one transaction), None outside one:
    a write transaction's own rows would change them between two statements."""
    if getattr(conn, "in_tx", None) != "read":
        return None
    try:
        return _in_read.setdefault(conn, {})
    except TypeError:  # not weak-referenceable: nothing remembered
        return None


def _fresh(conn: Connection, key: Any) -> Any:
    owner = getattr(conn, "db", None)
    with _stats_lock:
        seen = _stats.get(owner, {}).get(key) if owner is not None else None
    return seen[1] if seen is not None and time.monotonic() - seen[0] < STATS_TTL_S else None


def _keep(conn: Connection, key: Any, value: Any) -> None:
    owner = getattr(conn, "db", None)
    if owner is not None:
        with _stats_lock:
            _stats.setdefault(owner, {})[key] = (time.monotonic(), value)


# Columns whose every lexeme has a known shape: memories' `nsKey` ('n' || hex(namespace), stemmed or
# not, stays within [n0-9a-f]). A word of another shape can only be in the other columns.
TOKEN_COLUMNS = {"nsKey": re.compile(r"n[0-9a-f]*")}
_ONE_LABELLED = re.compile(r"\('((?:[^'\\]|'')+)':([A-D])\)")


def _count_form(conn: Connection, fts: str, query: str) -> str:
    """The tsquery to count a one-word phrase's rows by: without its label when the word cannot be in
    the table's other columns (they are all TOKEN_COLUMNS and it has not their shape). The GIN index
    then answers without reading each row's document back to check the label (a word in 42k of 100k
    rows: 28 → 10 ms); the count is the same."""
    found = _ONE_LABELLED.fullmatch(query)
    if found is None:
        return query
    word, label = found.group(1).replace("''", "'"), found.group(2)
    others = [name for i, name in enumerate(columns_of(conn, fts)) if LABELS[i] != label]
    if not all(name in TOKEN_COLUMNS and not TOKEN_COLUMNS[name].fullmatch(word) for name in others):
        return query
    return f"({_quote(word)})"


# A word PostgreSQL's statistics put in at least ESTIMATED_ROWS rows of a table of at least LARGE_ROWS
# (ANALYZE keeps the frequencies of a tsvector column's 10 × statistics-target most common lexemes,
# from a sample of 300 × target rows): its document frequency is that fraction of N, not a count. A
# first count of such a word reads every page holding it (≈1.4 µs a row, 15 ms for a query's words in
# 10k rows at 100k); the sampled fraction is within a few % of the count (a few ‰ of its idf).
ESTIMATED_ROWS = LARGE_ROWS / 5
_PLAIN_WORD = re.compile(r"\('((?:[^'\\]|'')+)'\)")


def _common_words(conn: Connection, fts: str) -> tuple[float, dict[str, float]]:
    """(rows ANALYZE counted, {lexeme: fraction of rows}) of side table `fts`, remembered like the counts."""
    key = (fts, "common words")
    found = _fresh(conn, key)
    if found is None:
        rows = budget.query(
            conn, "SELECT c.reltuples AS vp_rows, s.most_common_elems::text::text[] AS vp_words, "
            "s.most_common_elem_freqs AS vp_freqs FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "LEFT JOIN pg_stats s ON s.schemaname = n.nspname AND s.tablename = c.relname AND s.attname = 'doc' "
            "WHERE c.oid = to_regclass(?)", [fts])
        if not rows:
            return 0.0, {}
        words, freqs = rows[0]["vp_words"] or [], rows[0]["vp_freqs"] or []
        found = (float(rows[0]["vp_rows"] or 0), dict(zip(words, map(float, freqs), strict=False)))
        _keep(conn, key, found)
    return found


def _estimated(conn: Connection, fts: str, queries: Sequence[str]) -> dict[str, float]:
    """The fraction of rows each query's word is in, for the one-word queries counted without a label
    (`_count_form`) whose word PostgreSQL's statistics put in ESTIMATED_ROWS rows or more."""
    forms = {q: _PLAIN_WORD.fullmatch(_count_form(conn, fts, q)) for q in queries}
    if not any(forms.values()):
        return {}
    analyzed, words = _common_words(conn, fts)
    if analyzed < LARGE_ROWS:
        return {}
    out = {}
    for q, form in forms.items():
        share = words.get(form.group(1).replace("''", "'")) if form is not None else None
        if share is not None and share * analyzed >= ESTIMATED_ROWS:
            out[q] = share
    return out


def statistics(conn: Connection, fts: str, phrase_queries: Sequence[str | None]) -> tuple[float, float, list[float]]:
    """(N, total length, each phrase's document frequency) of side table `fts` for BM25; the counts
    not remembered are made in one statement (a common word of a large table: `_estimated`)."""
    memo = _read_memo(conn)
    memo = {} if memo is None else memo
    known: dict[Any, Any] = {}
    for key in [(fts, None), *((fts, q) for q in phrase_queries)]:
        value = memo.get(key)
        known[key] = _fresh(conn, key) if value is None else value
    missing = list(dict.fromkeys(key for key, value in known.items() if value is None))
    shares = _estimated(conn, fts, [q for _, q in missing if q is not None]) if missing else {}
    missing = [key for key in missing if key[1] not in shares]
    if missing:
        parts, args = [], []
        for i, (_, q) in enumerate(missing):
            if q is None:
                parts.append(f"(SELECT count(*) FROM {fts}) AS n{i}, (SELECT coalesce(sum(len), 0) FROM {fts}) AS t{i}")
            else:
                parts.append(f"(SELECT count(*) FROM {fts} WHERE doc @@ ?::tsquery) AS n{i}")
                args.append(_count_form(conn, fts, q))
        rows = budget.query(conn, "SELECT " + ", ".join(parts), args)
        for i, key in enumerate(missing):
            row = rows[0] if rows else {}
            known[key] = (float(row.get(f"n{i}") or 0), float(row.get(f"t{i}") or 0)) if key[1] is None \
                else float(row.get(f"n{i}") or 0)
            if not rows:
                continue  # cut by the budget: nothing is remembered
            memo[key] = known[key]
    n, total = known[(fts, None)]
    for key in missing:
        if rows and n >= LARGE_ROWS and (key[1] is None or known[key] >= LARGE_ROWS / 5):
            _keep(conn, key, known[key])
    for q, share in shares.items():
        known[(fts, q)] = memo[(fts, q)] = float(round(share * n))
    return n, total, [known[(fts, q)] for q in phrase_queries]


# bounded.py's window on PostgreSQL: rows at least as new as a seq. A statement holding it reads a few
# thousand rows of the side table's key, each joined to its document by its key (never a hash join
# over the whole document table, which the planner prefers from ≈2,000 rows on), as is a statement
# whose words match at most NESTED_ROWS rows.
WINDOW = "f.seq >= ?"
NESTED_ROWS = 20_000


def _matching(fts: str, source: str, where: Sequence[str], nested: bool) -> str:
    """The rows matching the tsquery (the parameter after the source's): seq, id, len and doc. Nested:
    each side-table row fetches its document by key (OFFSET 0 keeps the planner from hashing the
    whole document table instead); the filters stay outside, where the window reaches the key scan."""
    matching = " AND ".join(f"({c})" for c in ["f.doc @@ ?::tsquery", *where])
    joined = (f"CROSS JOIN LATERAL (SELECT * FROM {source} d WHERE d.seq = f.seq OFFSET 0) d" if nested
              else f"JOIN {source} d ON d.seq = f.seq")
    return f"SELECT f.seq, d.id, f.len, f.doc FROM {fts} f {joined} WHERE {matching}"


def _rank_cd_weights(term: _Term) -> tuple[list[float], float] | None:
    """The `ts_rank_cd` weights ({D, C, B, A}, at most 1) and the scale that make it the term's FTS5
    frequency, or None when a scaled weight is not exact in float4 (the score would drift)."""
    if term.label is not None:
        raw = {label: term.weights.get(label, 1.0) if label == term.label else 0.0 for label in LABELS}
    else:
        raw = {label: term.weights.get(label, 0.0) for label in LABELS}
    scale = max(1.0, *raw.values())
    out = [raw[label] / scale for label in reversed(LABELS)]
    if min(out) < 0 or any(struct.unpack("f", struct.pack("f", w))[0] != w for w in out):
        return None
    return out, scale


def _sql_ranked(conn: Connection, *, fts: str, table: str, query: str, scored: list[_Term], limit: int,
                where: Sequence[str], params: Sequence[Any], source: str, source_args: Sequence[Any],
                columns: str, weights: list[tuple[list[float], float]]) -> list[Row]:
    """Every phrase one word (most questions): the same BM25 computed by the server, which returns only
    the best `limit` rows, in one statement. Phrases and prefixes need positions: `_ranked_rows`.

    A word's frequency is `ts_rank_cd(weights, doc, 'word')`: for a one-word query every occurrence is
    a cover of its own, worth its label's weight, so the rank is FTS5's Σ of column weights over the
    word's occurrences (exact for weights exact in float4; ≈0.3 µs a row against ≈5 µs for unnesting
    the row's tsvector).

    A query whose words are in more than NESTED_ROWS rows (inside bounded.py's window or not) is
    first ranked over the rows holding one of its rarest words (MaxScore): a word adds less than
    idf × (k1 + 1) to a row, so when the `limit`-th score found exceeds what the other words can add
    together, no row lacking the rare words can enter the top and the answer is exact; else every
    row (of the window) is ranked."""
    phrase_queries = [_phrase_tsquery(Phrase("", None, False), t.lex, t.label) for t in scored]
    n, total, dfs = statistics(conn, fts, phrase_queries)
    idfs = [idf(int(n), int(df)) for df in dfs]
    rank = _Ranking(fts=fts, table=table, terms=[(t.lex[0][0], *w) for t, w in zip(scored, weights, strict=True)],
                    idfs=idfs, avgdl=total / n if n else 0.0, limit=limit, where=where, params=params,
                    source=source, source_args=source_args, columns=columns)
    if sum(dfs) <= NESTED_ROWS:
        return rank(conn, query, nested=True)
    # Over bounded.py's window too: its rows are mostly the common words' (low idf), and the rows
    # holding a rarer word usually fill the top by themselves (2,600 window rows ranked → ≈100).
    nested = WINDOW in where
    rare, rows = [], 0.0
    for i in sorted(range(len(scored)), key=lambda i: dfs[i]):
        if rows + dfs[i] > NESTED_ROWS:
            break
        rare.append(i)
        rows += dfs[i]
    rest = [i for i in range(len(scored)) if i not in rare]
    # Inside a window the rare words' rows are those of the window's share of the key: when fewer
    # than `limit` are to be expected there, the first pass cannot fill the top (it ranked 0–90 rows
    # for 2–12 ms before the full statement ran anyway). An estimate either way: the answer is exact.
    if rare and rest and (not nested or rows * _window_share(conn, fts, where, params) >= limit):
        found = rank(conn, f"({query}) & (" + " | ".join(str(phrase_queries[i]) for i in rare) + ")", nested=True)
        bound = sum(idfs[i] * (K1 + 1.0) for i in rest)
        if len(found) >= limit > 0 and -found[limit - 1]["rank"] > bound * (1 + 1e-9):
            return found
    return rank(conn, query, nested=nested)


@dataclass
class _Ranking:
    """One BM25 statement of `_sql_ranked`: its words (lexeme, ts_rank_cd weights, scale) and statistics."""

    fts: str
    table: str
    terms: list[tuple[str, list[float], float]]
    idfs: list[float]
    avgdl: float
    limit: int
    where: Sequence[str]
    params: Sequence[Any]
    source: str
    source_args: Sequence[Any]
    columns: str

    def __call__(self, conn: Connection, query: str, *, nested: bool) -> list[Row]:
        if nested:
            found = self._side_first(conn, query)
            if found is not None:
                return found
        freqs, score, rank_args = self._scoring()
        sql = (
            f"WITH vp_match AS ({_matching(self.fts, self.source, self.where, nested)}), "
            f"vp_top AS (SELECT m.seq, m.id, -coalesce({score}, 0) AS vp_rank FROM vp_match m CROSS JOIN LATERAL "
            f"(SELECT {freqs}, ?::float8 * (1 - ?::float8 + ?::float8 * m.len / ?::float8) AS norm OFFSET 0) AS x "
            "ORDER BY vp_rank, m.id LIMIT ?) "
            f"SELECT {self.columns}, vp_top.vp_rank FROM vp_top JOIN {self.table} d ON d.seq = vp_top.seq "
            "ORDER BY vp_top.vp_rank, vp_top.id"
        )
        return _ranks(budget.query(conn, sql, [*self.source_args, query, *self.params, *rank_args, int(self.limit)]))

    def _scoring(self) -> tuple[str, str, list[Any]]:
        """The per-row frequencies, the BM25 sum over them, and their arguments (idfs first)."""
        count = range(len(self.terms))
        # A row holds few of the query's words: `@@` (a binary search of the row's lexemes) skips
        # ts_rank_cd for the others (≈12 % of a window's ranking, 5 words).
        freqs = ", ".join(f"CASE WHEN m.doc @@ ?::tsquery THEN ?::float8 * ts_rank_cd(?::float4[], m.doc, ?::tsquery) "
                          f"ELSE 0 END AS f{i}" for i in count)
        score = " + ".join(f"CASE WHEN x.f{i} > 0 THEN ?::float8 * (x.f{i} * ?::float8) / (x.f{i} + x.norm) ELSE 0 END"
                           for i in count)
        args: list[Any] = []
        for value in self.idfs:
            args += [value, K1 + 1.0]
        for lexeme, arr, scale in self.terms:
            args += [_quote(lexeme), scale, arr, _quote(lexeme)]
        return freqs, score, [*args, K1, B, B, self.avgdl or None]

    def _side_first(self, conn: Connection, query: str) -> list[Row] | None:
        """The same rows, ranked in the side table alone first: only the best HEAD_FACTOR × limit (and
        any tied with the last of them) fetch their document and meet the filters, instead of every
        matching row (≈35 % of a window's statement). Exact when `limit` rows pass the filters, or
        when every ranked row was in the head; None (rank the usual way) when neither holds."""
        split = _by_table(self.where, self.params)
        if split is None:
            return None
        side, side_args, doc, doc_args = split
        freqs, score, rank_args = self._scoring()
        filters = "".join(f" AND ({c})" for c in doc)
        sql = (
            f"WITH vp_ranked AS MATERIALIZED (SELECT m.seq, -coalesce({score}, 0) AS vp_rank FROM "
            f"(SELECT f.seq, f.len, f.doc FROM {self.fts} f WHERE "
            + " AND ".join(f"({c})" for c in ["f.doc @@ ?::tsquery", *side]) + ") m CROSS JOIN LATERAL "
            f"(SELECT {freqs}, ?::float8 * (1 - ?::float8 + ?::float8 * m.len / ?::float8) AS norm OFFSET 0) AS x), "
            "vp_cut AS (SELECT vp_rank FROM vp_ranked ORDER BY vp_rank OFFSET ? LIMIT 1), "
            "vp_head AS (SELECT seq, vp_rank FROM vp_ranked WHERE NOT EXISTS (SELECT 1 FROM vp_cut) "
            "OR vp_rank <= (SELECT vp_rank FROM vp_cut)), "
            "vp_top AS (SELECT h.seq, d.id, h.vp_rank FROM vp_head h CROSS JOIN LATERAL "
            f"(SELECT * FROM {self.source} d WHERE d.seq = h.seq OFFSET 0) d WHERE TRUE{filters} "
            "ORDER BY h.vp_rank, d.id LIMIT ?) "
            f"SELECT {self.columns}, vp_top.vp_rank, (SELECT count(*) FROM vp_head) AS vp_head_rows, "
            "(SELECT count(*) FROM vp_ranked) AS vp_all_rows "
            f"FROM vp_top JOIN {self.table} d ON d.seq = vp_top.seq ORDER BY vp_top.vp_rank, vp_top.id"
        )
        # Argument order follows the text: ranked (score, query, side, frequencies), cut, source, filters, limit.
        idf_args = rank_args[:2 * len(self.idfs)]
        rest = rank_args[2 * len(self.idfs):]
        head = max(int(self.limit) * HEAD_FACTOR + HEAD_MARGIN, 1)
        rows = budget.query(conn, sql, [*idf_args, query, *side_args, *rest, head - 1, *self.source_args, *doc_args,
                                        int(self.limit)])
        if len(rows) < self.limit and (not rows or rows[0]["vp_head_rows"] != rows[0]["vp_all_rows"]):
            return None if not budget.timed_out() else []
        for row in rows:
            row.pop("vp_head_rows", None)
            row.pop("vp_all_rows", None)
        return _ranks(rows)


# `_side_first`'s head: how many of the best rows (× the limit asked, plus a margin) meet the filters.
HEAD_FACTOR = 2
HEAD_MARGIN = 20


def _ranks(rows: Sequence[Row]) -> list[Row]:
    out = []
    for row in rows:
        row = dict(row)
        row["rank"] = float(row.pop("vp_rank"))
        out.append(row)
    return out


def _bound(node: Node, lex: dict[str, tuple[tuple[str, int], ...]], labels: dict[str, str],
           counts: dict[str, float]) -> float:
    """An upper bound on the rows a tree matches, from its one-word phrases' document frequencies
    (`counts`, keyed like BM25's); infinite where nothing is known (prefixes, several words)."""
    if node.op == "phrase":
        phrase = node.phrase
        assert phrase is not None
        key = _count_key(phrase, lex, labels)
        return counts.get(key, math.inf) if key is not None else math.inf
    found = [_bound(child, lex, labels, counts) for child in node.children]
    return min(found) if node.op == "and" else sum(found)


def _count_key(phrase: Phrase, lex: dict[str, tuple[tuple[str, int], ...]], labels: dict[str, str]) -> str | None:
    """The tsquery BM25 counts a one-word phrase by (`statistics`), None for other phrases."""
    words = lex.get(phrase.text, ())
    if phrase.prefix or len(words) != 1 or (phrase.column is not None and phrase.column not in labels):
        return None
    return _phrase_tsquery(Phrase("", None, False), words, labels.get(phrase.column) if phrase.column else None)


# A probe reads its word's newest rows backwards along the key, testing each: about 0.15 µs a row,
# N × rows / df of them. Fetching all df matching rows through the GIN index and sorting them costs
# about 1.5 µs a row. The backward scan wins above df ≈ sqrt(BITMAP_FACTOR × rows × N).
BITMAP_FACTOR = 0.1


def floors(conn: Connection, *, fts: str, matches: Sequence[str], rows: int) -> list[int | None]:
    """Per MATCH expression, the `seq` of its `rows`-th newest matching row when more than `rows` match,
    else None — in one statement (search/bounded.py's probe).

    The one-word phrases' document frequencies come first (`statistics`: the counts BM25 needs next
    anyway, remembered for this read): an expression that cannot match more than `rows` rows is not
    probed. Each other expression is its own subquery with its tsquery as a parameter: a backward scan
    of the key for a word in many rows (it stops after `rows` + 1 matches), its matches through the
    GIN index, sorted, for a word in a few thousand (a backward scan would test most of the table)."""
    labels = {name: LABELS[i] for i, name in enumerate(columns_of(conn, fts))}
    trees = [parse(m) for m in matches]
    lex = lexemes(conn, [p.text for tree in trees for p in phrases(tree)])
    queries = [tsquery(tree, lex, labels) for tree in trees]
    keys = list(dict.fromkeys(k for tree in trees for p in phrases(tree)
                              if (k := _count_key(p, lex, labels)) is not None))
    n, _, dfs = statistics(conn, fts, keys)
    counts = dict(zip(keys, dfs, strict=True))
    bounds = [_bound(tree, lex, labels, counts) for tree in trees]
    out: list[int | None] = [None] * len(matches)
    probed = [i for i, q in enumerate(queries) if q is not None and bounds[i] > rows]
    if not probed:
        return out
    remembered = _Floors.of(conn)
    newest = span(conn, fts)[1] if remembered is not None else None
    for i in list(probed):
        floor = remembered.get((fts, queries[i], rows), newest, rows) if remembered is not None else None
        if floor is not None:
            out[i] = floor
            probed.remove(i)
    if not probed:
        return out
    crossover = math.sqrt(BITMAP_FACTOR * rows * max(n, 1.0))
    parts = []
    for i in probed:
        source = (f"(SELECT seq FROM {fts} WHERE doc @@ ?::tsquery OFFSET 0) AS vp_m"
                  if bounds[i] <= crossover else f"{fts} WHERE doc @@ ?::tsquery")
        parts.append(f"SELECT {i} AS vp_i, ARRAY(SELECT seq FROM {source} ORDER BY seq DESC "
                     "OFFSET ? LIMIT 2) AS vp_seqs")
    for row in budget.query(conn, " UNION ALL ".join(parts), [x for i in probed for x in (queries[i], max(0, int(rows) - 1))]):
        seqs = row["vp_seqs"] or []
        i = int(row["vp_i"])
        out[i] = int(seqs[0]) if len(seqs) == 2 else None
        if out[i] is not None and remembered is not None and newest is not None:
            remembered.put((fts, queries[i], rows), newest, out[i])
    return out


class _Floors:
    """A common word's probe answer, remembered per database. Its window floor only moves as rows are
    added: it is reused while at most FLOOR_DRIFT × `rows` rows were added since (the window then holds
    at most that many more rows of the word than `rows`), and dropped when the newest row is older than
    when it was probed (rows deleted). A probe of a word in 5–10 % of 100k rows reads 20–40k rows of the
    key (≈5 ms); the reuse costs a look at the newest row."""

    SIZE = 4096
    _by_db: weakref.WeakKeyDictionary[Any, _Floors] = weakref.WeakKeyDictionary()
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.entries: OrderedDict[tuple[str, str, int], tuple[int, int]] = OrderedDict()

    @classmethod
    def of(cls, conn: Connection) -> _Floors | None:
        owner = getattr(conn, "db", None)
        if owner is None:
            return None
        with cls._lock:
            try:
                return cls._by_db.setdefault(owner, cls())
            except TypeError:  # not weak-referenceable: nothing remembered
                return None

    def get(self, key: tuple[str, str, int], newest: int | None, rows: int) -> int | None:
        with self._lock:
            seen = self.entries.get(key)
            if seen is None or newest is None:
                return None
            probed_at, floor = seen
            if not probed_at <= newest <= probed_at + FLOOR_DRIFT * rows:
                del self.entries[key]
                return None
            self.entries.move_to_end(key)
            return floor

    def put(self, key: tuple[str, str, int], newest: int, floor: int) -> None:
        with self._lock:
            self.entries[key] = (newest, floor)
            self.entries.move_to_end(key)
            while len(self.entries) > self.SIZE:
                self.entries.popitem(last=False)


FLOOR_DRIFT = 0.25


def span(conn: Connection, fts: str) -> tuple[int | None, int | None]:
    """The side table's oldest and newest `seq` (two ends of its key), read once per read transaction."""
    memo = _read_memo(conn)
    if memo is not None and ("span", fts) in memo:
        return memo[("span", fts)]
    rows = budget.query(conn, f"SELECT min(seq) AS vp_oldest, max(seq) AS vp_newest FROM {fts}")
    row = rows[0] if rows else {}
    ends = tuple(int(v) if v is not None else None for v in (row.get("vp_oldest"), row.get("vp_newest")))
    if memo is not None:
        memo[("span", fts)] = ends
    return ends  # type: ignore[return-value]


def _by_table(where: Sequence[str], params: Sequence[Any]) -> tuple[list[str], list[Any], list[str], list[Any]] | None:
    """`where` and its `params` split by table: (the side table's clauses, their arguments, the
    document's clauses, theirs). The window is the clause on the side table; every other is on the
    document. None with numbered placeholders: the arguments cannot be split by clause."""
    if any(re.search(r"\?\d", c) for c in where):
        return None
    side: list[str] = []
    doc: list[str] = []
    side_args: list[Any] = []
    doc_args: list[Any] = []
    at = 0
    for clause in where:
        n = clause.count("?")
        clauses, args = (side, side_args) if clause == WINDOW else (doc, doc_args)
        clauses.append(clause)
        args.extend(params[at:at + n])
        at += n
    return side, side_args, doc, doc_args


def _window_share(conn: Connection, fts: str, where: Sequence[str], params: Sequence[Any]) -> float:
    """The share of the side table's key range inside the window (`WINDOW`'s bound among `params`):
    the share of any word's rows there, were they spread evenly over time; 1.0 when unknown."""
    split = _by_table(where, params)
    if split is None or not split[1]:
        return 1.0
    oldest, newest = span(conn, fts)
    floor = split[1][0]
    if oldest is None or newest is None or not isinstance(floor, int) or newest <= oldest:
        return 1.0
    return min(1.0, max(0.0, (newest - floor + 1) / (newest - oldest + 1)))


# ---- trigram (components): substring matches, BM25 over trigram counts

def _occurrences(text: str, needle: str) -> int:
    count, start = 0, text.find(needle)
    while start >= 0:
        count += 1
        start = text.find(needle, start + 1)
    return count


def _trigram_sql(node: Node, cols: Sequence[str], args: list[Any]) -> str:
    if node.op == "phrase":
        needle = node.phrase.text.casefold()  # type: ignore[union-attr]
        if len(needle) < 3:
            return "FALSE"  # no trigram: FTS5's trigram tokenizer matches nothing
        tests = []
        for col in cols:
            tests.append(f"strpos(lower(coalesce(d.{col}, '')), ?) > 0")
            args.append(needle)
        return "(" + " OR ".join(tests) + ")"
    joiner = " AND " if node.op == "and" else " OR "
    return "(" + joiner.join(_trigram_sql(child, cols, args) for child in node.children) + ")"


def trigram_rows(conn: Connection, *, table: str, text_columns: Sequence[str], match: str, limit: int,
                 where: Sequence[str], params: Sequence[Any], weights: Sequence[float], columns: str) -> list[Row]:
    """Substring search over `text_columns` of `table`, ranked by BM25 over trigrams like FTS5's `trigram`."""
    tree = parse(match)
    args: list[Any] = []
    cond = _trigram_sql(tree, text_columns, args)
    lengths = " + ".join(f"greatest(length(coalesce({c}, '')) - 2, 0)" for c in text_columns)
    stats = budget.query(conn, f"SELECT count(*) AS n, coalesce(sum({lengths}), 0) AS total FROM {table}")
    if not stats:
        return []
    n, total = int(stats[0]["n"]), int(stats[0]["total"])
    plist = [p for p in phrases(tree) if len(p.text) >= 3]
    hits = []
    for p in plist:
        a: list[Any] = []
        sql = _trigram_sql(Node("phrase", phrase=p), text_columns, a).replace("d.", "")
        hits.append((sql, a))
    found = budget.query(conn, "SELECT " + ", ".join(f"(SELECT count(*) FROM {table} WHERE {sql}) AS h{i}"
                                                     for i, (sql, _) in enumerate(hits)),
                         [x for _, a in hits for x in a]) if hits else [{}]
    if not found:
        return []
    idfs = [idf(n, int(found[0][f"h{i}"])) for i in range(len(hits))]
    rows = budget.query(conn, f"SELECT {columns}, d.seq AS vp_key FROM {table} d WHERE {cond}"
                        + "".join(f" AND ({c})" for c in where), [*args, *params])
    avgdl = (total / n) if n else 1.0
    ranked = []
    for row in rows:
        texts = [str(row.get(c) or "").casefold() for c in text_columns]
        length = sum(max(len(t) - 2, 0) for t in texts)
        norm = K1 * (1 - B + B * length / avgdl) if avgdl else K1
        score = 0.0
        for p, weight_idf in zip(plist, idfs, strict=True):
            needle = p.text.casefold()
            freq = sum((weights[i] if i < len(weights) else 1.0) * _occurrences(t, needle)
                       for i, t in enumerate(texts))
            if freq:
                score += weight_idf * (freq * (K1 + 1.0)) / (freq + norm)
        row = dict(row)
        row.pop("vp_key", None)
        row["rank"] = -score
        ranked.append(row)
    ranked.sort(key=lambda r: (r["rank"], r["id"]))
    return ranked[:limit]
