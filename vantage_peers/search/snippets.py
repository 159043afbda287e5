"""Search snippets computed in Python, at a cost bounded by a window of the text.

FTS5's `snippet()` scores every fragment against every phrase match inside the returned document:
its cost grows with the square of the matches in it (a 416 KB memory of repeated words took 15 s
for `limit: 1`). Here a C-speed regex finds at most `MAX_MATCHES` candidate matches in the first
`SCAN_CHARS` characters, the best fragment (most distinct query terms) is chosen among them, and
only that fragment is tokenized. The output looks like FTS5's: about `TOKENS` words, `[` `]`
around matches, `…` where text was left out.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Sequence
from typing import Any

SCAN_CHARS = 200_000  # candidate matches are looked for in this prefix only
MAX_MATCHES = 64  # candidates considered when choosing the fragment
MAX_TERMS = 32
TOKENS = 12
_QUOTED = re.compile(r'"((?:[^"]|"")*)"')
_NS_TOKEN = re.compile(r"n[0-9A-F]{2,}")  # memories' namespace token inside a MATCH expression
_WORD = re.compile(r"\w+")
_SEEN_MAX = 4096  # words whose term a Highlighter remembers
_SUFFIXES = ("ations", "ation", "ings", "ing", "edly", "ed", "ers", "er", "es", "ly", "s")


def fold(word: str) -> str:
    """Case and diacritics folded, as unicode61 remove_diacritics does."""
    decomposed = unicodedata.normalize("NFKD", word.casefold())
    return "".join(ch for ch in decomposed if not unicodedata.combining(ch))


def stem(word: str) -> str:
    """A light English stem, so a porter-stemmed match ("running" for "run") is still highlighted."""
    for suffix in _SUFFIXES:
        if len(word) - len(suffix) >= 3 and word.endswith(suffix):
            word = word[: -len(suffix)]
            if len(word) > 3 and word[-1] == word[-2] and word[-1] not in "aeiouls":  # "running" -> "run"
                word = word[:-1]
            return word
    return word


def words_of(match: str) -> list[str]:
    """The lower-cased words of the quoted strings of an FTS5 MATCH expression (namespace tokens left out)."""
    words: list[str] = []
    for quoted in _QUOTED.findall(match):
        text = quoted.replace('""', '"')
        if _NS_TOKEN.fullmatch(text):
            continue
        for word in _WORD.findall(text):
            if word.lower() not in words:
                words.append(word.lower())
        if len(words) >= MAX_TERMS:
            break
    return words[:MAX_TERMS]


class Highlighter:
    """Snippets for one query's terms."""

    def __init__(self, words: Sequence[str]) -> None:
        terms = [f for f in (fold(w) for w in words) if f]
        self.terms = {t: stem(t) for t in terms}
        self.stems = set(self.terms.values())
        # Candidates: words *starting* with the first letters of a term, as sent or folded (the regex
        # cannot fold diacritics); each candidate is then checked in Python. Anchored at a word start,
        # with a bounded tail, so a megabyte-long "word" costs linear time, never a backtracking blow-up.
        heads = sorted({re.escape(h[:3]) for h in [*words, *terms] if h}, key=len, reverse=True)
        self.pattern = re.compile(r"(?<!\w)(?:" + "|".join(heads) + r")\w{0,60}", re.IGNORECASE) if heads else None
        self._seen: dict[str, str | None] = {}  # word -> its term: near-misses repeat within a text and across hits

    def term(self, word: str) -> str | None:
        try:
            return self._seen[word]
        except KeyError:
            pass
        folded = fold(word)
        if folded in self.terms:
            found: str | None = folded
        else:
            s = stem(folded)
            found = s if s in self.stems else None
        if len(self._seen) < _SEEN_MAX:
            self._seen[word] = found
        return found

    def hits(self, text: str, most: int = MAX_MATCHES) -> list[tuple[int, str]]:
        """(offset, term) of up to `most` matching words within the first SCAN_CHARS characters."""
        found: list[tuple[int, str]] = []
        if self.pattern is None:
            return found
        for tried, m in enumerate(self.pattern.finditer(text, 0, min(len(text), SCAN_CHARS))):
            term = self.term(m.group())
            if term is not None:
                found.append((m.start(), term))
                if len(found) >= most:
                    break
            if tried >= 50 * MAX_MATCHES:  # many near-misses ("run" finds "rune", "runway"…): stop looking
                break
        return found

    def first_hit(self, text: str) -> int | None:
        found = self.hits(text, 1)
        return found[0][0] if found else None

    def snippet(self, text: str | None, tokens: int = TOKENS, *,
                found: list[tuple[int, str]] | None = None) -> str | None:
        """The best fragment of `text`; `found`: its `hits(text)` when the caller has them already."""
        if not text:
            return None
        hits = self.hits(text) if found is None else found
        if not hits:
            return self._fragment(text, 0, tokens)
        best, best_score = 0, -1
        span = tokens * 12  # characters a fragment of `tokens` words roughly covers
        for i, (start, _) in enumerate(hits):
            distinct = {t for s, t in hits[i:i + tokens] if s - start <= span}
            if len(distinct) > best_score:
                best, best_score = i, len(distinct)
        return self._fragment(text, hits[best][0], tokens)

    def _fragment(self, text: str, anchor: int, tokens: int) -> str:
        """About `tokens` words from shortly before `anchor`, matches in brackets."""
        lead = 2 if anchor else 0
        back = max(0, anchor - 64)
        before = list(_WORD.finditer(text, back, anchor))[-lead:] if lead else []
        start = before[0].start() if before else anchor
        words = []
        for m in _WORD.finditer(text, start, min(len(text), start + tokens * 64)):
            words.append(m)
            if len(words) >= tokens:
                break
        if not words:
            return text[:tokens * 8]
        out, pos = [], words[0].start()
        for m in words:
            out.append(text[pos:m.start()])
            out.append(f"[{m.group()}]" if self.term(m.group()) else m.group())
            pos = m.end()
        body = "".join(out)
        # Both searches stop at the first word character they meet: cheap whatever the text's size.
        head = "…" if _WORD.search(text, 0, words[0].start()) else ""
        tail = "…" if _WORD.search(text, words[-1].end()) else ""
        return head + body + tail


def add_snippets(rows: Iterable[dict[str, Any]], match: str, columns: str | Sequence[str], *,
                 terms: bool = False) -> None:
    """Set `row["snippet"]` from the first of `columns` holding a query term (else the first non-empty one);
    with `terms`, also `row["matchedTerms"]`: the query terms found there (folded, first seen first)."""
    cols = [columns] if isinstance(columns, str) else list(columns)
    hl = Highlighter(words_of(match))
    for row in rows:
        texts = [row[c] for c in cols if isinstance(row.get(c), str) and row[c]]
        chosen = next((t for t in texts if hl.first_hit(t) is not None), texts[0] if texts else None)
        found = hl.hits(chosen) if chosen else []  # once for the snippet and the matched terms
        row["snippet"] = hl.snippet(chosen, found=found)
        if terms:
            row["matchedTerms"] = list(dict.fromkeys(t for _, t in found))
