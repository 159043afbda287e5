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
import unicodedata
from types import ModuleType
from typing import TYPE_CHECKING

from ...core.errors import InvalidArgument

if TYPE_CHECKING:
    import pathspec

MAX_PATTERNS = 200
MAX_PATTERN_CHARS = 1_000
_STARS = ("star", "any")


def _resolve(text: str, *, escape: str | None) -> tuple[list[str], bool]:
    """The segments of a `/`-separated path with `.`, empty segments (`//`) and `..` resolved, and
    whether it names a directory (a trailing `/`, `/.` or `/..`). `..` above the root raises
    INVALID_ARGUMENT naming `escape` (the field), or is dropped when `escape` is None (the guard's
    files, which git never gives with `..`)."""
    out: list[str] = []
    for seg in text.split("/"):
        if seg in ("", "."):
            continue
        if seg == "..":
            if escape is not None and not out:
                raise InvalidArgument(f"{escape}: {text[:60]!r} leaves the repository ('..' above its root); "
                                      "give a pattern inside the repository, relative to its root")
            if escape is not None and "**" in out[-1]:
                raise InvalidArgument(f"{escape}: {text[:60]!r} has '..' after '**', which names no one directory; "
                                      "write the directory you mean")
            if out:
                out.pop()
            continue
        out.append(seg)
    last = text.rsplit("/", 1)[-1]
    return out, text.endswith("/") or (last in (".", "..") and bool(out))


def _base(text: str, fold_case: bool) -> str:
    # Backslashes are path separators (an agent on Windows writes src\app.py), not gitignore's escape:
    # `src\app.py` read as an escape is `srcapp.py`, a reservation protecting nothing. A literal `*`,
    # `?` or `[` is written as a class (`[*]`). NFC: macOS writes decomposed names that name the same file.
    text = unicodedata.normalize("NFC", text.strip()).replace("\\", "/")
    return text.lower() if fold_case else text


def normalise(pattern: object, *, fold_case: bool = False, field: str = "paths") -> str:
    """THE normalisation of a path pattern (reserve, check, release, task files): one canonical
    spelling per meaning, or INVALID_ARGUMENT saying what is wrong with it.

    `\\` -> `/`; `./` anywhere, `//` and `..` segments resolved inside the repository (`..` above
    its root is refused); a trailing `/` kept (gitignore: a directory and its contents); the
    gitignore anchoring kept (a slash at the start or in the middle anchors at the repo root, so
    `./*.py` is `/*.py`, and `/src/app.py` is `src/app.py`); `''`, `.` and `/` are `**`; lower case
    when `fold_case` (a repository on a case-insensitive file system, `repo.case_insensitive`).
    """
    if not isinstance(pattern, str) or not pattern.strip():
        raise InvalidArgument(f"{field} holds an empty or non-string pattern; give repo-relative globs like 'src/api/**'")
    raw = pattern.strip()
    if len(raw) > MAX_PATTERN_CHARS:
        raise InvalidArgument(f"{field}: a pattern is longer than {MAX_PATTERN_CHARS} characters")
    if any(ord(ch) < 32 for ch in raw):
        raise InvalidArgument(f"{field}: a pattern holds a control character")
    p = _base(raw, fold_case)
    if p.startswith("!") or p.startswith("#"):
        raise InvalidArgument(f"{field}: {p[:60]!r} is a negation or a comment; reserve the paths you want, "
                              "not exceptions")
    anchored = p.startswith("/") or "/" in p.rstrip("/")
    segments, directory = _resolve(p, escape=field)
    if not segments:
        return "**"
    body = "/".join(segments) + ("/" if directory else "")
    if body.startswith("!") or body.startswith("#"):
        raise InvalidArgument(f"{field}: {raw[:60]!r} names {body[:60]!r}, which gitignore reads as a negation or a "
                              "comment; write the leading character as a class ([!] or [#])")
    if anchored and "/" not in body.rstrip("/") and _is_glob(body) and body != "**":
        body = "/" + body  # `./*.py`: the root's .py files, not every .py file
    try:
        _pathspec().GitIgnoreSpec.from_lines([body])
    except Exception as exc:  # noqa: BLE001 - pathspec raises several types for a malformed pattern
        raise InvalidArgument(f"{field}: {body[:60]!r} is not a valid gitignore pattern ({exc})") from None
    return body


def normalise_all(patterns: object, *, fold_case: bool = False, field: str = "paths") -> list[str]:
    """A list argument of patterns, each `normalise`d, duplicates (after normalisation) dropped."""
    if isinstance(patterns, str):
        patterns = [patterns]
    if not isinstance(patterns, list) or not patterns:
        raise InvalidArgument(f"{field} must be a non-empty array of glob patterns, e.g. [\"src/api/**\"]")
    if len(patterns) > MAX_PATTERNS:
        raise InvalidArgument(f"{field} holds more than {MAX_PATTERNS} patterns; reserve a directory instead")
    return list(dict.fromkeys(normalise(p, fold_case=fold_case, field=field) for p in patterns))


def normalise_file(path: str, *, fold_case: bool = False) -> str:
    """A repo-relative file as the git guard gets it, in the spelling `normalise` gives patterns
    (`\\`, `./`, `//`, `..`, NFC, case). Never raises: a name git reports is checked, not refused."""
    segments, _ = _resolve(_base(path, fold_case), escape=None)
    return "/".join(segments)


@functools.lru_cache(maxsize=4096)
def held(key: str, fold_case: bool = False) -> str:
    """A stored pattern as it is compared: normalised again (rows granted before normalisation
    covered `src/./a.py`, or before case folding), else as it is."""
    try:
        return normalise(key, fold_case=fold_case)
    except InvalidArgument:
        return key.lower() if fold_case else key


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


def meaning(pattern: str) -> str:
    """The gitignore pattern a reservation stands for: a plain path (no wildcard) names that file or
    directory from the repo root (`README.md` is not every README.md); a glob keeps gitignore's
    reading (`*.py` matches at any depth)."""
    if not pattern.startswith("/") and not any(ch in pattern for ch in "*?[\\"):
        return "/" + pattern
    return pattern


def _pathspec() -> ModuleType:
    """pathspec, imported when a pattern is first read (#34: not at every server start)."""
    import pathspec

    return pathspec


@functools.lru_cache(maxsize=4096)
def spec(pattern: str) -> pathspec.GitIgnoreSpec:
    return _pathspec().GitIgnoreSpec.from_lines([meaning(pattern)])


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
