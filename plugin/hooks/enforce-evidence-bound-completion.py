#!/usr/bin/env python3
"""enforce-evidence-bound-completion (PreToolUse: complete_task, update_task to review/done).

A completion note must be at least 40 characters and hold at least one verifiable proof token:
a URL, a commit SHA (7-40 hex characters), a PR/issue number (#546), a VantagePeers or Convex id,
a test ratio (311/314), a counted artifact (18 tests, 7 files, 2900 rows) or a file path
(analysis/report.md). Claim words alone ("done", "merged", "PASS", "all good", "fixed") are not
evidence. Opt-out: `// allow-no-evidence: <reason>` in the call's text.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import re

    from _vp_hook import Block, has_opt_out, main, strings, tool_input, tool_name
except Exception:  # noqa: BLE001 - fail open
    sys.exit(0)

HOOK = "enforce-evidence-bound-completion"
MIN_CHARS = 40
CLOSING_STATUSES = {"review", "done"}
COUNTED = (r"tests?|specs?|files?|rows?|lines?|commits?|checks?|cases?|assertions?|screenshots?|pages?|"
           r"endpoints?|migrations?|records?|items?|issues?|tasks?|PRs?|fichiers?|lignes?|fixtures?|suites?")
PROOF_TOKENS = (
    ("URL", re.compile(r"\bhttps?://[^\s<>()\[\]]+", re.I)),
    ("commit SHA", re.compile(r"\b(?=[0-9a-fA-F]*[0-9])[0-9a-fA-F]{7,40}\b")),
    ("PR/issue number", re.compile(r"(?<![\w&#])#\d+\b")),
    ("VantagePeers id", re.compile(r"\b[a-z]{2,5}_(?=[0-9A-Za-z]*[0-9])[0-9A-Za-z]{8,}\b")),
    ("Convex id", re.compile(r"\b[jkm](?=[0-9a-z]*[0-9])[0-9a-z]{15,}\b")),
    ("test ratio", re.compile(r"\b\d+/\d+\b")),
    ("counted artifact", re.compile(r"\b\d+\s+(?:" + COUNTED + r")\b", re.I)),
    ("file name", re.compile(r"\b[\w-]+\.(?:md|py|ts|tsx|js|jsx|json|ya?ml|toml|sql|png|jpe?g|svg|html|css|txt|"
                             r"csv|log|sh|go|rs|java|rb|pdf|lock)\b", re.I)),
)
CLAIM_WORDS = ("done", "merged", "pass", "passed", "passes", "all good", "fixed", "ok", "complete",
               "completed", "finished", "shipped", "works", "lgtm", "green")


MAX_SCAN_CHARS = 20_000  # a proof token is looked for in the first 20,000 characters


PATH_END = re.compile(r"[\w-]\.[A-Za-z0-9]{1,8}$")


def has_file_path(text: str) -> bool:
    """A word with a directory and an extension: analysis/report.md, qa/screenshots/x.png."""
    for word in text.split():
        word = word.strip("`'\"()[]<>,;:!?").rstrip(".")
        if "/" in word.strip("/") and "://" not in word and PATH_END.search(word):
            return True
    return False


def proof_tokens(note: str) -> list[str]:
    head = note[:MAX_SCAN_CHARS]
    found = [kind for kind, pattern in PROOF_TOKENS if pattern.search(head)]
    return found + ["file path"] if has_file_path(head) else found


def claim_only(note: str) -> list[str]:
    """The claim words of a note made only of claim words (and punctuation), else []."""
    rest = note.lower()
    found = []
    for word in sorted(CLAIM_WORDS, key=len, reverse=True):
        pattern = re.compile(r"\b" + re.escape(word) + r"\b")
        if pattern.search(rest):
            found.append(word)
            rest = pattern.sub(" ", rest)
    return found if found and not re.search(r"\w", rest) else []


def check(event: dict) -> Block | None:
    name, args = tool_name(event), tool_input(event)
    if name == "update_task":
        status = args.get("status")
        if not (isinstance(status, str) and status.strip().lower() in CLOSING_STATUSES):
            return None
    elif name != "complete_task":
        return None
    if has_opt_out(list(strings(args)), "allow-no-evidence"):
        return None
    note = args.get("completionNote")
    note = note.strip() if isinstance(note, str) else ""
    what = "complete_task" if name == "complete_task" else f'update_task to status "{args["status"].strip()}"'
    problems = []
    if not note:
        problems.append(f"{what} has no completionNote.")
    else:
        claims = claim_only(note[:MAX_SCAN_CHARS])
        if claims:
            problems.append(f'"{note[:60]}" is a claim, not evidence.')
        elif not proof_tokens(note):
            problems.append("The completionNote holds no verifiable proof token.")
        if len(note) < MIN_CHARS:
            problems.append(f"The completionNote is {len(note)} characters; at least {MIN_CHARS} are required.")
    if not problems:
        return None
    return Block(
        HOOK, " ".join(problems),
        f"write a completionNote of at least {MIN_CHARS} characters with at least one proof token: a URL "
        "(PR, deploy, dashboard), a commit SHA (7-40 hex), a PR/issue number (#546), a task/memory/message "
        "id, a test ratio (311/314), a counted artifact (18 tests, 7 files) or a file path "
        "(analysis/report.md). Example: 'PR #546 merged, build passes, commit acc0092'. Only when the "
        "work truly left no artifact, add '// allow-no-evidence: <reason>' to the note.")


if __name__ == "__main__":
    sys.exit(main(check))
