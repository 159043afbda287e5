"""Stream markers (spec §26): `__VP_TOOL_RESULT__<minified JSON>__END__` inside a tool's text.

`wrap_tool_result` validates and serializes (raising `TypeError`, as the reference helper does);
`parse_tool_result` finds the first marker in any text and returns the validated payload or None
— it never raises, whatever the text holds.
"""

from __future__ import annotations

import json
from typing import Any

import pydantic

from .schemas import VpToolResult, VpToolResultSchema

MARKER_START = "__VP_TOOL_RESULT__"
MARKER_END = "__END__"
MAX_MARKER_CHARS = 4_000_000  # a marker larger than this is not parsed (a consumer's memory guard)
MAX_TRIES = 64  # candidate (start, end) pairs tried: hostile text cannot make parsing quadratic


def _dump(model: Any) -> dict[str, Any]:
    return VpToolResultSchema.dump_python(model, mode="json", by_alias=True, exclude_none=True)


def validate_payload(payload: Any) -> VpToolResult:
    """The payload as a validated model; raises TypeError naming what is wrong."""
    try:
        return VpToolResultSchema.validate_python(payload, by_alias=True, by_name=True)
    except pydantic.ValidationError as err:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e.get('loc', ())) or 'payload'}: {e.get('msg')}" for e in err.errors()[:5]
        )
        raise TypeError(f"[stream-marker] wrapToolResult: invalid payload — {problems}") from None


def wrap_tool_result(payload: Any) -> str:
    """`__VP_TOOL_RESULT__{…}__END__` for a valid payload (dict or model); TypeError otherwise."""
    model = validate_payload(payload.model_dump(by_alias=True) if isinstance(payload, pydantic.BaseModel)
                             else payload)
    body = json.dumps(_dump(model), ensure_ascii=False, separators=(",", ":"))
    return f"{MARKER_START}{body}{MARKER_END}"


def parse_tool_result(text: Any) -> dict[str, Any] | None:
    """The validated payload of the first well-formed marker in `text` (as a dict), else None.

    Covers the three documented cases: the text is the marker, contains it among other content,
    or holds none. A marker whose JSON or schema is wrong is skipped and the search goes on.
    """
    try:
        if not isinstance(text, str):
            return None
        start, tries = text.find(MARKER_START), 0
        while start != -1 and tries < MAX_TRIES:
            body_at = start + len(MARKER_START)
            end = text.find(MARKER_END, body_at)
            if end == -1:
                return None
            # JSON may itself contain "__END__" inside a string: try each closing delimiter in turn.
            while end != -1 and end - body_at <= MAX_MARKER_CHARS and tries < MAX_TRIES:
                tries += 1
                try:
                    data = json.loads(text[body_at:end])
                    return _dump(VpToolResultSchema.validate_python(data))
                except (ValueError, pydantic.ValidationError):
                    end = text.find(MARKER_END, end + 1)
            start = text.find(MARKER_START, body_at)
        return None
    except Exception:  # noqa: BLE001 - documented contract: parse never raises
        return None
