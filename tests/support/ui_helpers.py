"""Seeding one row of every primitive's data through the tools, and an HTML structure probe."""

from __future__ import annotations

from html.parser import HTMLParser
from typing import Any


def seed_all(tools: Any, text: str = "plain text", n: int = 1) -> dict[str, list[str]]:
    """n rows per primitive, every user-visible string = `text` (or a variant)."""
    ids: dict[str, list[str]] = {k: [] for k in ("task", "message", "diary", "mission", "note", "memory")}
    for i in range(n):
        ids["task"].append(tools.call("create_task", title=f"{text} {i}", assignedTo="sigma", priority="high",
                                      createdBy="pi"))
        ids["message"].append(tools.call("send_message", channel="fleet", content=f"{text} {i}", **{"from": "pi"})
                              ["messageId"])
        ids["diary"].append(tools.call("write_diary", date=f"2026-06-{i + 1:02d}", content=f"{text} {i}",
                                       orchestrator="sigma", highlights=[text], blockers=[text]))
        ids["mission"].append(tools.call("create_mission", name=f"{text} {i}", project="vp", status="execute",
                                         priority="high", pilot="tau", agents=["tau"], createdBy="pi",
                                         progress=40))
        ids["note"].append(tools.call("create_briefing_note", title=f"{text} {i}", topic="deployment",
                                      participants=[text, "pi"], content=f"{text} {i}", createdBy="pi"))
        ids["memory"].append(tools.call("store_memory", namespace="sigma", type="feedback",
                                        content=f"{text} {i}", createdBy="pi")["memoryId"])
    return ids


class Structure(HTMLParser):
    """Every start tag with its attribute names, plus every attribute value, in document order."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, tuple[str, ...]]] = []
        self.values: list[str] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, tuple(name for name, _ in attrs)))
        self.values.extend(v or "" for _, v in attrs)

    handle_startendtag = handle_starttag

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def structure(html: str) -> Structure:
    probe = Structure()
    probe.feed(html)
    probe.close()
    return probe
