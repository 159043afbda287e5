"""Questions in queries and in memories (#20). Pure text; knows nothing of the stores.

A memory that only asks ("Cool! What did it look like?", "Have you been to the lake?") does not
hold an answer, yet it shares the question's words and — with a small model — sits close to any
question in vector space: on LoCoMo such turns filled the top 5 ahead of the turn that answers.
- `is_question(query)`: the query is a question (ends with "?", or starts with a question word or
  an auxiliary verb: "when did …", "is the cache …").
- `only_asks(text)`: the memory, short (≤ SHORT_CHARS once its leading stamp "(1:56 pm on 8 May,
  2023)" / "[2026-11-30]", a "Name:" speaker label and a trailing "[…]" attachment note are set
  aside), ends with a question mark. Long texts that end with a question (an abstract closing on
  a rhetorical one) carry statements too and do not count.
"""

from __future__ import annotations

import re

SHORT_CHARS = 200  # a note, a chat turn; not a document
_STAMP = re.compile(r"^\s*[(\[][^)\]]{0,60}\d[^)\]]{0,60}[)\]]\s*")
_LABEL = re.compile(r"^[A-Z][\w .'-]{0,40}:\s")
_ASKING = re.compile(
    r"^\s*(?:what|when|where|who|whom|whose|which|why|how|is|are|was|were|do|does|did|has|have|had|can|could"
    r"|would|will|should|shall)\b", re.IGNORECASE)


def is_question(query: str) -> bool:
    """Is the query a question?"""
    return query.rstrip().endswith("?") or bool(_ASKING.match(query))


def body(text: str) -> str:
    """`text` without a leading stamp, a leading speaker label and a trailing `[…]` note, stripped."""
    out = _STAMP.sub("", text[: SHORT_CHARS * 4], count=1)
    out = _LABEL.sub("", out, count=1).rstrip()
    if out.endswith("]"):
        start = out.rfind("[")
        if start > 0:
            out = out[:start].rstrip()
    return out.strip()


def only_asks(text: str) -> bool:
    """Is the memory a short question (see the module docstring)?"""
    if len(text) > SHORT_CHARS * 4:
        return False  # a long text: its body cannot be short
    core = body(text)
    return core.endswith("?") and len(core) <= SHORT_CHARS
