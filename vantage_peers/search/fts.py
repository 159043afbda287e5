"""Turn user text into an FTS5 MATCH expression that can never be a syntax error.

Every whitespace-separated token becomes a quoted string (inner quotes doubled), so FTS operators
(`AND`, `OR`, `NOT`, `NEAR`, `col:`, `*`, `^`, parentheses) in user text are plain words.

The any-word (`or`) query drops English stopwords: in an OR list "with" or "the" match nearly
every row and outrank the words that carry the question. The all-words (`and`) query keeps them
(they narrow nothing there, and a quoted phrase stays exact). At most MAX_TOKENS tokens are used;
`query_tokens` says how many a text holds, so callers can report a cut instead of hiding it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from typing import Any, Literal

_WORD = re.compile(r"\w", re.UNICODE)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_EDGE = re.compile(r"^\W+|\W+$", re.UNICODE)
# A query of 32 KiB (MAX_QUERY_BYTES) holds a few thousand words; FTS5 evaluates an OR over 256
# quoted terms in milliseconds, and no question needs more.
MAX_TOKENS = 256

# English function words (the classic Lucene/SMART core, plus question words and auxiliaries).
STOPWORDS = frozenset(["a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at", "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could", "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has", "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in", "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not", "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own", "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them", "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until", "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why", "will", "with", "would", "you", "your", "yours", "yourself", "yourselves"])


# FTS5's porter stems "deploy", "deployed", "deploys" to "deploi" (step 1c turns a final y into i)
# but "deployment" to "deploy" (step 4 strips "ment" after 1c ran). A query word ending in a
# vowel + y (or that plus one of those suffixes) is searched as itself OR its other form, so the
# whole family matches whichever word the query uses. Letters only: identifiers are left alone.
_Y_STEM = re.compile(r"([a-z]*[aeiou]y)(s|ed|ing)?", re.ASCII)
_Y_SUFFIXED = re.compile(r"([a-z]*[aeiou]y)(ment|ments|er|ers|able|ance|ence|al|ant|ent|ism|ist|ive|ous|ize)",
                         re.ASCII)


def _quoted(raw: str) -> str:
    return '"' + raw.replace('"', '""') + '"'


def _term(raw: str) -> str:
    """One query token as an FTS5 term: the quoted token, or a group with its other porter form."""
    word = raw.lower()
    other = None
    if (m := _Y_SUFFIXED.fullmatch(word)) is not None:
        other = m.group(1)
    elif (m := _Y_STEM.fullmatch(word)) is not None and len(m.group(1)) > 3:
        other = m.group(1) + "ment"
    return _quoted(raw) if other is None else f"({_quoted(raw)} OR {_quoted(other)})"


def _tokens(text: str) -> list[str]:
    # NUL ends a C string inside FTS5's parser, leaving a quote unterminated: drop control chars.
    return [raw for raw in _CONTROL.sub(" ", text).split() if _WORD.search(raw)]  # punctuation-only: no match


def is_stopword(raw: str) -> bool:
    return _EDGE.sub("", raw).lower() in STOPWORDS


def query_tokens(text: str) -> int:
    """How many searchable tokens `text` holds (compare with MAX_TOKENS)."""
    return len(_tokens(text))


def or_terms(text: str) -> list[str]:
    """The terms of the any-word query for `text` (stopwords dropped unless there is nothing else)."""
    tokens = _tokens(text)
    content = [t for t in tokens if not is_stopword(t)]
    tokens = content or tokens  # a question made only of stopwords still searches them
    tokens = list(dict.fromkeys(tokens))  # a repeated word adds nothing to an OR
    return [_term(raw) for raw in tokens[:MAX_TOKENS]]


def fts_query(text: str, mode: Literal["and", "or"] = "and") -> str | None:
    """The MATCH expression for `text`, or None when it holds nothing searchable."""
    if mode == "or":
        return " OR ".join(or_terms(text)) or None
    tokens = _tokens(text)[:MAX_TOKENS]
    if not tokens:
        return None
    terms = [_term(raw) for raw in tokens]
    # FTS5 reads "a b" as a AND b, but not "(a OR b) c": say AND when a term is a group.
    return (" AND " if any(t.startswith("(") for t in terms) else " ").join(terms)


def ranked(rows: Iterable[dict[str, Any]], shape: Callable[[dict[str, Any]], dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows carrying `rank` (bm25, lower is better) and `snippet` as documents with `score` and `snippet`."""
    out = []
    for row in rows:
        rank, snip = row.pop("rank"), row.pop("snippet", None)
        doc = shape(row)
        doc["score"] = round(-rank, 6)
        if snip is not None:
            doc["snippet"] = snip
        out.append(doc)
    return out
