"""Gitignore-style path patterns: validation, matching files (pathspec), and whether two patterns overlap.

Matching a file against patterns is pathspec's `GitIgnoreSpec`. Whether two *patterns* can match a
common path is not something pathspec answers, so `overlaps` first asks pathspec whether either
pattern, read as a path, matches the other (`src/` vs `src/app.py`), then decides the general case
(`src/*.py` vs `src/a.*`) on the patterns' gitignore meaning rewritten as anchored globs: a pattern
with no inner slash matches at any depth (`**/` in front), and a pattern matches a directory's
contents too (`/**` behind). Character classes count as any one character (an overlap is reported
when in doubt: a false conflict costs a question, a missed one costs a broken commit).
"""

from __future__ import annotations

import functools
import itertools
import posixpath

import pathspec

from ...errors import InvalidArgument

MAX_PATTERNS = 200
MAX_PATTERN_CHARS = 1_000
_STARS = ("star", "any")


def clean(pattern: object, field: str = "paths") -> str:
    """One pattern, normalised (`./a` -> `a`), or INVALID_ARGUMENT saying what is wrong with it."""
    if not isinstance(pattern, str) or not pattern.strip():
        raise InvalidArgument(f"{field} holds an empty or non-string pattern; give repo-relative globs like 'src/api/**'")
    p = pattern.strip()
    if len(p) > MAX_PATTERN_CHARS:
        raise InvalidArgument(f"{field}: a pattern is longer than {MAX_PATTERN_CHARS} characters")
    if "\x00" in p or any(ord(ch) < 32 for ch in p):
        raise InvalidArgument(f"{field}: a pattern holds a control character")
    if p.startswith("!") or p.startswith("#"):
        raise InvalidArgument(f"{field}: {p[:60]!r} is a negation or a comment; reserve the paths you want, "
                              "not exceptions")
    while p.startswith("./"):
        p = p[2:]
    if p in ("", ".", "/"):
        p = "**"
    if ".." in p.split("/"):
        raise InvalidArgument(f"{field}: {p[:60]!r} leaves the repository ('..'); give a repo-relative pattern")
    try:
        pathspec.GitIgnoreSpec.from_lines([p])
    except Exception as exc:  # noqa: BLE001 - pathspec raises several types for a malformed pattern
        raise InvalidArgument(f"{field}: {p[:60]!r} is not a valid gitignore pattern ({exc})") from None
    return p


def clean_all(patterns: object, field: str = "paths") -> list[str]:
    if isinstance(patterns, str):
        patterns = [patterns]
    if not isinstance(patterns, list) or not patterns:
        raise InvalidArgument(f"{field} must be a non-empty array of glob patterns, e.g. [\"src/api/**\"]")
    if len(patterns) > MAX_PATTERNS:
        raise InvalidArgument(f"{field} holds more than {MAX_PATTERNS} patterns; reserve a directory instead")
    return list(dict.fromkeys(clean(p, field) for p in patterns))


def meaning(pattern: str) -> str:
    """The gitignore pattern a reservation stands for: a plain path (no wildcard) names that file or
    directory from the repo root (`README.md` is not every README.md); a glob keeps gitignore's
    reading (`*.py` matches at any depth)."""
    if not pattern.startswith("/") and not any(ch in pattern for ch in "*?[\\"):
        return "/" + pattern
    return pattern


@functools.lru_cache(maxsize=4096)
def spec(pattern: str) -> pathspec.GitIgnoreSpec:
    return pathspec.GitIgnoreSpec.from_lines([meaning(pattern)])


def matches(pattern: str, path: str) -> bool:
    """Does the gitignore `pattern` match the repo-relative file `path`?"""
    return spec(pattern).match_file(path)


def _anchored(pattern: str) -> list[str]:
    p = pattern
    if p.startswith("/"):
        p = p[1:]
    elif "/" not in p.rstrip("/"):
        p = "**/" + p
    if p.endswith("/"):
        return [p + "**"]
    return [p, p + "/**"]


def _expand_dirs(p: str) -> list[str]:
    """`**/` means zero or more directories: the pattern with each one as nothing or as `**` + `/`."""
    parts = p.split("**/")
    if len(parts) > 5:  # more than four `**/`: read each as "anything" (over-reports, never misses)
        return ["**".join(parts)]
    out = []
    for choice in itertools.product(("", "**/"), repeat=len(parts) - 1):
        out.append(parts[0] + "".join(c + part for c, part in zip(choice, parts[1:], strict=True)))
    return out


def _tokens(p: str) -> tuple[tuple[str, str], ...]:
    out: list[tuple[str, str]] = []
    i = 0
    while i < len(p):
        ch = p[i]
        if ch == "*":
            if p.startswith("**", i):
                out.append(("any", ""))
                i += 2
            else:
                out.append(("star", ""))
                i += 1
            while i < len(p) and p[i] == "*":  # `***` reads like `**`
                out[-1] = ("any", "")
                i += 1
            continue
        if ch == "?":
            out.append(("one", ""))
        elif ch == "[":
            end = p.find("]", i + 2)
            if end == -1:
                out.append(("lit", ch))
            else:
                out.append(("one", ""))
                i = end
        elif ch == "\\" and i + 1 < len(p):
            i += 1
            out.append(("lit", p[i]))
        else:
            out.append(("lit", ch))
        i += 1
    return tuple(out)


def _fits(star: tuple[str, str], single: tuple[str, str]) -> bool:
    """Can the star-like token produce the character the single token stands for?"""
    return star[0] == "any" or single != ("lit", "/")


def _same_char(a: tuple[str, str], b: tuple[str, str]) -> bool:
    if a[0] == "lit" and b[0] == "lit":
        return a[1] == b[1]
    other = b if a[0] == "one" else a
    return other != ("lit", "/")


def _intersect(a: tuple[tuple[str, str], ...], b: tuple[tuple[str, str], ...]) -> bool:
    @functools.cache
    def go(i: int, j: int) -> bool:
        if i == len(a) and j == len(b):
            return True
        if i < len(a) and a[i][0] in _STARS:
            if go(i + 1, j):
                return True
            if j < len(b) and b[j][0] not in _STARS and _fits(a[i], b[j]) and go(i, j + 1):
                return True
        if j < len(b) and b[j][0] in _STARS:
            if go(i, j + 1):
                return True
            if i < len(a) and a[i][0] not in _STARS and _fits(b[j], a[i]) and go(i + 1, j):
                return True
        if i < len(a) and j < len(b) and a[i][0] not in _STARS and b[j][0] not in _STARS:
            return _same_char(a[i], b[j]) and go(i + 1, j + 1)
        return False

    return go(0, 0)


@functools.lru_cache(maxsize=65536)
def overlaps(a: str, b: str) -> bool:
    """Can some path match both gitignore patterns?"""
    if a == b or matches(a, b.lstrip("/")) or matches(b, a.lstrip("/")):
        return True
    a, b = meaning(a), meaning(b)
    left = [_tokens(x) for p in _anchored(a) for x in _expand_dirs(posixpath.normpath(p) if "//" in p else p)]
    right = [_tokens(x) for p in _anchored(b) for x in _expand_dirs(posixpath.normpath(p) if "//" in p else p)]
    return any(_intersect(x, y) for x in left for y in right)
