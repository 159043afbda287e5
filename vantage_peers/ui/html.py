"""HTML building blocks of the `ui://` primitives: escaping, the scoped stylesheet, the error box.

Every string that comes from data or from the request goes through `esc` (HTML-escaped, quotes
included, so it is safe in text and in quoted attributes). Bidirectional-override controls and
C0 control characters are dropped from displayed text: they cannot create markup, but an RLO in a
title could make a row read as something else.
"""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from typing import Any

from .i18n import label

_HIDDEN = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def esc(value: Any) -> str:
    text = "" if value is None else str(value)
    return html.escape(_HIDDEN.sub("", text), quote=True)


def class_token(value: Any) -> str:
    """A value used inside a class name (status badges): only [a-z0-9_-] survive, else 'other'."""
    token = re.sub(r"[^a-z0-9_-]", "", str(value or "").lower())
    return token or "other"


def when(ms: Any) -> str:
    """Unix ms as `YYYY-MM-DD HH:MM UTC` (empty for a missing or absurd value)."""
    try:
        return datetime.fromtimestamp(int(ms) / 1000, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")
    except (TypeError, ValueError, OverflowError, OSError):
        return ""


def iso(ms: Any) -> str:
    try:
        return datetime.fromtimestamp(int(ms) / 1000, tz=UTC).isoformat().replace("+00:00", "Z")
    except (TypeError, ValueError, OverflowError, OSError):
        return ""


STYLE = """<style>
.vp-root{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;font-size:14px;line-height:1.45;
color:#1f2328;background:#fff;max-width:760px;box-sizing:border-box;padding:12px}
.vp-root *{box-sizing:border-box}
.vp-heading{font-size:15px;font-weight:600;margin:0 0 8px}
.vp-table{border-collapse:collapse;width:100%}
.vp-table th,.vp-table td{text-align:left;padding:6px 8px;border-bottom:1px solid #d0d7de;vertical-align:top}
.vp-table th{font-weight:600;background:#f6f8fa}
.vp-badge,.vp-chip{display:inline-block;padding:1px 8px;border-radius:999px;font-size:12px;font-weight:600;
border:1px solid transparent;white-space:nowrap}
.vp-chip{background:#eaeef2;color:#24292f}
.vp-status-todo{background:#ddf4ff;color:#0a3069;border-color:#54aeff}
.vp-status-in_progress{background:#fff8c5;color:#4d2d00;border-color:#d4a72c}
.vp-status-review{background:#fbefff;color:#512a97;border-color:#c297ff}
.vp-status-blocked{background:#ffebe9;color:#82071e;border-color:#ff8182}
.vp-status-done{background:#dafbe1;color:#044f1e;border-color:#4ac26b}
.vp-status-brainstorm,.vp-status-plan{background:#ddf4ff;color:#0a3069;border-color:#54aeff}
.vp-status-execute{background:#fff8c5;color:#4d2d00;border-color:#d4a72c}
.vp-status-validate{background:#fbefff;color:#512a97;border-color:#c297ff}
.vp-status-complete{background:#dafbe1;color:#044f1e;border-color:#4ac26b}
.vp-status-other,.vp-status-cancelled{background:#eaeef2;color:#24292f;border-color:#afb8c1}
.vp-footer{margin-top:8px;color:#57606a;font-size:12px}
.vp-empty{color:#57606a;font-style:italic}
.vp-feed,.vp-list,.vp-timeline{list-style:none;margin:0;padding:0}
.vp-bubble{border:1px solid #d0d7de;border-radius:12px;padding:8px 12px;margin:0 0 8px;background:#f6f8fa}
.vp-meta{display:flex;flex-wrap:wrap;gap:6px;align-items:center;font-size:12px;color:#57606a;margin-bottom:4px}
.vp-sender{font-weight:600;color:#1f2328}
.vp-content{white-space:pre-wrap;overflow-wrap:anywhere;margin:0}
.vp-card{border:1px solid #d0d7de;border-radius:8px;padding:10px 12px;margin:0 0 10px}
.vp-card h3{font-size:14px;margin:0 0 6px}
.vp-sublist{margin:6px 0 0 18px;padding:0}
.vp-timeline{border-left:3px solid #d0d7de;margin-left:6px}
.vp-mission{position:relative;padding:0 0 12px 16px}
.vp-mission::before{content:"";position:absolute;left:-8px;top:4px;width:13px;height:13px;border-radius:50%;
background:#0969da;border:2px solid #fff}
.vp-progress{height:8px;background:#eaeef2;border-radius:4px;overflow:hidden;margin-top:6px;max-width:320px}
.vp-progress-bar{height:100%;background:#1a7f37}
.vp-quote{border-left:4px solid #8c959f;margin:0 0 10px;padding:4px 12px;background:#f6f8fa}
.vp-error{border:1px solid #ff8182;background:#ffebe9;color:#82071e;border-radius:8px;padding:10px 12px}
</style>"""


def root(primitive: str, lang: str, heading: str, body: str) -> str:
    """The fragment: stylesheet + one labelled region (`lang` set so screen readers speak it right)."""
    return (f'{STYLE}<section class="vp-root vp-{primitive}" lang="{lang}" role="region" '
            f'aria-label="{esc(heading)}"><h2 class="vp-heading">{esc(heading)}</h2>{body}</section>')


def footer(text: str) -> str:
    return f'<p class="vp-footer" role="status" aria-live="polite">{esc(text)}</p>'


def error_box(primitive: str, lang: str, message: str) -> str:
    """The error boundary: a read always succeeds, with this box when the query or a parameter fails."""
    title = label(lang, "error")
    return (f'{STYLE}<div class="vp-root vp-error vp-{primitive}" lang="{lang}" role="alert" aria-live="assertive">'
            f'<strong>{esc(title)}</strong><p class="vp-content">{esc(message)}</p></div>')
