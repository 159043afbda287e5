#!/usr/bin/env python3
"""block-time-estimates (PreToolUse: Edit, Write, send_message, create_task, update_task, create_mission).

Effort and duration estimates are not allowed in tasks, messages, missions or written files:
work is scoped by VERIFICATION criteria, not by an estimated duration. A line holding
`// allow-time-estimate: <reason>` (or `# allow-time-estimate: <reason>` where `//` is not a
comment) is exempt - for factual configuration values such as cron intervals, animation
durations or TTL constants, never for work effort.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
try:
    import re

    from _vp_hook import Block, main, strings, tool_input, tool_name
except Exception:  # noqa: BLE001 - fail open
    sys.exit(0)

HOOK = "block-time-estimates"
VP_TOOLS = {"send_message", "create_task", "update_task", "create_mission"}
MAX_SCAN_CHARS = 1_000_000  # per text; the rest of a huge file is not scanned

UNIT = (r"(?:h|hrs?|hours?|mins?|minutes?|d|days?|wks?|weeks?|months?|sprints?|"
        r"heures?|jours?|semaines?|mois)")
NUM = (r"(?:\d+(?:[.,]\d+)?|an?|one|two|three|four|five|six|seven|eight|nine|ten|a few|a couple(?: of)?|"
       r"half an?|une?|deux|trois|quatre|cinq|quelques)")
RANGE = rf"{NUM}(?:\s*(?:-|to|or|à|ou)\s*{NUM})?"
ESTIMATES = (
    # "takes about 2 hours", "should take 3 days", "roughly 2-3 days", "environ 2 jours"
    re.compile(rf"\b(?:takes?|taking|took|will take|should take|would take|might take|may take|needs?|"
               rf"requires?|estimated(?: at)?|expected|roughly|about|around|approximately|approx\.?|"
               rf"prendra|prend|environ|estimée? à|compter)\s+{RANGE}[\s-]*{UNIT}\b", re.I),
    # "~2h", "~ 3 days"
    re.compile(rf"~\s*\d+(?:[.,]\d+)?\s*{UNIT}\b", re.I),
    # "3 days of work", "2h effort", "deux jours de travail"
    re.compile(rf"\b{RANGE}[\s-]*{UNIT}\s+(?:of\s+)?(?:work|effort|dev|development|coding|engineering|"
               rf"de travail|de dev)\b", re.I),
    # "a quick 5-minute fix", "a 2-day refactor"
    re.compile(r"\b\d+(?:[.,]\d+)?\s*-?\s*(?:minute|hour|day|week|heure|jour)s?\s+"
               r"(?:fix|task|job|change|refactor|tweak|project|effort)\b", re.I),
    # "ready in 2 days", "done within a week", "livré sous 3 jours"
    re.compile(rf"\b(?:done|ready|finished|completed?|delivered|shipped|fixed|implemented|live|"
               rf"prêt|fini|livré)\s+(?:in|within|by|dans|sous|en)\s+{RANGE}[\s-]*{UNIT}\b", re.I),
    # "ETA: Friday", "Estimate: 4h", "time estimate = 2 days"
    re.compile(r"\b(?:ETA|time estimate|effort estimate|estimated (?:time|effort|duration)|estimates?|"
               r"estimation)\s*[:=]", re.I),
)
OVERRIDE = re.compile(r"(?://|#)\s*allow-time-estimate:[ \t]*\S")


def texts(name: str, args: dict) -> list[str]:
    if name == "Write":
        return [args["content"]] if isinstance(args.get("content"), str) else []
    if name == "Edit":
        return [args["new_string"]] if isinstance(args.get("new_string"), str) else []
    if name == "MultiEdit":
        edits = args.get("edits") if isinstance(args.get("edits"), list) else []
        return [e["new_string"] for e in edits if isinstance(e, dict) and isinstance(e.get("new_string"), str)]
    if name in VP_TOOLS:
        return list(strings(args))
    return []


def findings(text: str) -> list[tuple[int, str]]:
    out = []
    for number, line in enumerate(text[:MAX_SCAN_CHARS].splitlines(), 1):
        if OVERRIDE.search(line):
            continue
        for pattern in ESTIMATES:
            match = pattern.search(line)
            if match:
                out.append((number, match.group(0)))
                break
    return out


def check(event: dict) -> Block | None:
    name = tool_name(event)
    found = [hit for text in texts(name, tool_input(event)) for hit in findings(text)]
    if not found:
        return None
    shown = "; ".join(f"line {n}: {phrase!r}" for n, phrase in found[:5])
    more = f" (+{len(found) - 5} more)" if len(found) > 5 else ""
    return Block(HOOK, f"time/effort estimate in {name}: {shown}{more}.",
                 "remove the estimate and scope the work by its VERIFICATION criteria instead. For a factual "
                 "configuration value (cron interval, animation duration, TTL constant), add "
                 "'// allow-time-estimate: <reason>' on that line.")


if __name__ == "__main__":
    sys.exit(main(check))
