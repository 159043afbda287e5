"""The six primitives as HTML, from plain documents (the shapes the tools return).

Pure functions of (docs, lang): the resource handlers feed them query results, the docs script
feeds them sample rows for screenshots, and the hostile-content test feeds them attack strings.
"""

from __future__ import annotations

from typing import Any

from .html import class_token, esc, footer, iso, root, when
from .i18n import count, label, status_label

Doc = dict[str, Any]


def _badge(status: Any, lang: str) -> str:
    return f'<span class="vp-badge vp-status-{class_token(status)}">{esc(status_label(lang, status))}</span>'


def _chip(value: Any, aria: str | None = None) -> str:
    extra = f' aria-label="{esc(aria)}: {esc(value)}"' if aria else ""
    return f'<span class="vp-chip"{extra}>{esc(value)}</span>'


def _empty(text: str) -> str:
    return f'<p class="vp-empty">{esc(text)}</p>'


def tasks_table(items: list[Doc], lang: str) -> str:
    heads = "".join(f'<th scope="col">{esc(label(lang, k))}</th>' for k in ("title", "status", "priority", "assignedTo"))
    rows = "".join(
        f"<tr><td>{esc(t.get('title'))}</td><td>{_badge(t.get('status'), lang)}</td>"
        f"<td>{esc(t.get('priority'))}</td><td>{esc(t.get('assignedTo'))}</td></tr>"
        for t in items
    )
    table = (f'<table class="vp-table" aria-label="{esc(label(lang, "tasks"))}"><thead><tr>{heads}</tr></thead>'
             f"<tbody>{rows}</tbody></table>") if items else _empty(label(lang, "no_tasks"))
    return root("tasks-table", lang, label(lang, "tasks"), table + footer(count(lang, "task", len(items))))


def messages_feed(items: list[Doc], lang: str) -> str:
    bubbles = []
    for m in sorted(items, key=lambda d: (d.get("createdAt") or 0, d.get("_id") or "")):  # chronological
        channel = _chip(m.get("channel"), label(lang, "channel")) if m.get("channel") else ""
        bubbles.append(
            f'<li class="vp-bubble" aria-label="{esc(label(lang, "from"))} {esc(m.get("from"))}">'
            f'<div class="vp-meta"><span class="vp-sender">{esc(m.get("from"))}</span>'
            f'<time datetime="{esc(iso(m.get("createdAt")))}">{esc(when(m.get("createdAt")))}</time>{channel}</div>'
            f'<p class="vp-content" dir="auto">{esc(m.get("content"))}</p></li>'
        )
    body = (f'<ul class="vp-feed" role="feed" aria-label="{esc(label(lang, "messages"))}">{"".join(bubbles)}</ul>'
            if bubbles else _empty(label(lang, "no_messages")))
    return root("messages-feed", lang, label(lang, "messages"), body + footer(count(lang, "message", len(items))))


def _sublist(lang: str, key: str, values: Any) -> str:
    if not values:
        return ""
    lis = "".join(f"<li>{esc(v)}</li>" for v in values)
    return (f'<div class="vp-{key}"><strong>{esc(label(lang, key))}</strong>'
            f'<ul class="vp-sublist" aria-label="{esc(label(lang, key))}">{lis}</ul></div>')


def diary_entry(items: list[Doc], lang: str) -> str:
    cards = "".join(
        f'<article class="vp-card" aria-label="{esc(label(lang, "diary"))} {esc(d.get("date"))}">'
        f'<h3><time datetime="{esc(d.get("date"))}">{esc(d.get("date"))}</time> '
        f'{_chip(d.get("orchestrator"), label(lang, "orchestrator"))}</h3>'
        f'<p class="vp-content" dir="auto">{esc(d.get("content"))}</p>'
        f'{_sublist(lang, "highlights", d.get("highlights"))}{_sublist(lang, "blockers", d.get("blockers"))}</article>'
        for d in items
    )
    body = cards or _empty(label(lang, "no_entries"))
    return root("diary-entry", lang, label(lang, "diary"), body + footer(count(lang, "entry", len(items))))


def _progress(lang: str, value: Any) -> str:
    if not isinstance(value, int | float) or isinstance(value, bool):
        return ""
    pct = max(0.0, min(100.0, float(value)))
    shown = f"{pct:.0f}"
    return (f'<div class="vp-progress" role="progressbar" aria-valuemin="0" aria-valuemax="100" '
            f'aria-valuenow="{shown}" aria-label="{esc(label(lang, "progress"))}">'
            f'<div class="vp-progress-bar" style="width:{shown}%"></div></div>')


def mission_timeline(items: list[Doc], lang: str) -> str:
    entries = []
    for m in items:
        meta = [_badge(m.get("status"), lang)]
        if m.get("project"):
            meta.append(_chip(m.get("project"), label(lang, "project")))
        if m.get("pilot"):
            meta.append(f'<span>{esc(label(lang, "pilot"))}: {esc(m.get("pilot"))}</span>')
        if m.get("priority"):
            meta.append(_chip(m.get("priority"), label(lang, "priority")))
        entries.append(f'<li class="vp-mission"><h3>{esc(m.get("name"))}</h3>'
                       f'<div class="vp-meta">{"".join(meta)}</div>{_progress(lang, m.get("progress"))}</li>')
    body = (f'<ol class="vp-timeline" aria-label="{esc(label(lang, "missions"))}">{"".join(entries)}</ol>'
            if entries else _empty(label(lang, "no_missions")))
    return root("mission-timeline", lang, label(lang, "missions"), body + footer(count(lang, "mission", len(items))))


def briefing_note(items: list[Doc], lang: str) -> str:
    cards = []
    for n in items:
        people = "".join(_chip(p) for p in n.get("participants") or [])
        people_html = (f'<div class="vp-meta" aria-label="{esc(label(lang, "participants"))}">{people}</div>'
                       if people else "")
        content = f'<p class="vp-content" dir="auto">{esc(n.get("content"))}</p>' if n.get("content") else ""
        cards.append(f'<article class="vp-card" aria-label="{esc(n.get("title"))}">'
                     f'<div class="vp-meta">{_chip(n.get("topic"), label(lang, "topic"))}</div>'
                     f'<h3>{esc(n.get("title"))}</h3>{people_html}{content}</article>')
    body = "".join(cards) or _empty(label(lang, "no_notes"))
    return root("briefing-note", lang, label(lang, "briefings"), body + footer(count(lang, "note", len(items))))


def memory_quote(items: list[Doc], lang: str) -> str:
    quotes = []
    for m in items:
        score = m.get("score")
        score_html = (f'<span aria-label="{esc(label(lang, "score"))}">{esc(label(lang, "score"))}: {score:.3f}</span>'
                      if isinstance(score, int | float) and not isinstance(score, bool) else "")
        quotes.append(f'<li><blockquote class="vp-quote"><div class="vp-meta">'
                      f'{_chip(m.get("namespace"), label(lang, "namespace"))}{_chip(m.get("type"), label(lang, "type"))}'
                      f'{score_html}</div><p class="vp-content" dir="auto">{esc(m.get("content"))}</p></blockquote></li>')
    body = (f'<ul class="vp-list" aria-label="{esc(label(lang, "memories"))}">{"".join(quotes)}</ul>'
            if quotes else _empty(label(lang, "no_quotes")))
    return root("memory-quote", lang, label(lang, "memories"), body + footer(count(lang, "quote", len(items))))


RENDERERS = {
    "tasks-table": tasks_table,
    "messages-feed": messages_feed,
    "diary-entry": diary_entry,
    "mission-timeline": mission_timeline,
    "briefing-note": briefing_note,
    "memory-quote": memory_quote,
}
