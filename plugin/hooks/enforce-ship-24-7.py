#!/usr/bin/env python3
"""enforce-ship-24-7 (opt-in; PreToolUse: send_message, create_task, update_task, complete_task).

Not registered by the plugin's hooks.json: the ship-24/7 doctrine is opt-in (see docs/toolkit.md
to enable it in .claude/settings.json). It refuses temporal-defer language - "defer to tomorrow",
"wait until next session", "ship tonight", "pair offline -> defer" (and French forms) - unless
the text names a client constraint ("RDV Marie ce soir", "awaiting Marie confirm repo",
"attente confirmation Anthony"). Opt-out, rare emergencies only: `# allow-temporal-defer: <reason>`.
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

HOOK = "enforce-ship-24-7"
TOOLS = {"send_message", "create_task", "update_task", "complete_task"}
MAX_SCAN_CHARS = 200_000
WHEN = (r"(?:tomorrow|tonight|this evening|the weekend|weekend|next (?:session|week|morning|day)|"
        r"monday|tuesday|wednesday|thursday|friday|saturday|sunday|demain|ce soir|la prochaine session|"
        r"le week-end|lundi|mardi|mercredi|jeudi|vendredi|samedi|dimanche)")
DEFERS = (
    # "defer to tomorrow", "postpone until next session", "reporter à lundi"
    re.compile(rf"\b(?:defer(?:red|ring)?|postpone[ds]?|push(?:ed)? (?:it |this )?back|différer|reporter|reporté)"
               rf"\s+(?:it\s+|this\s+|the\s+\w+\s+)?(?:to|until|till|à|au|jusqu'à|jusqu'au)?\s*{WHEN}\b", re.I),
    # "wait until next session", "attendre demain"
    re.compile(rf"\b(?:wait(?:ing)?|attendre)\s+(?:until|till|for)?\s*{WHEN}\b", re.I),
    # "ship tomorrow", "merge tonight", "deploy next week"
    re.compile(rf"\b(?:ship|merge|deploy|publish|release)(?:ping|ing)?\s+(?:it\s+)?{WHEN}\b", re.I),
    # "late evening -> defer", "sigma signed off -> defer", "overnight risk: defer"
    re.compile(r"\b(?:late|tard le soir|fin de journée|end of day|signed off|offline|overnight risk|"
               r"divergence main/prod)\s*(?:→|->|=>|:|,|-)?\s*(?:so\s+)?defer\b", re.I),
)
CLIENT_CONSTRAINT = re.compile(r"\b(?:post-RDV|RDV|awaiting \w+ confirm\w*|attente (?:de )?confirmation|"
                               r"after (?:the )?client|client (?:confirmation|sign-?off))\b", re.I)


def check(event: dict) -> Block | None:
    if tool_name(event) not in TOOLS:
        return None
    texts = [t[:MAX_SCAN_CHARS] for t in strings(tool_input(event))]
    if has_opt_out(texts, "allow-temporal-defer"):
        return None
    for text in texts:
        if CLIENT_CONSTRAINT.search(text):
            continue
        for pattern in DEFERS:
            match = pattern.search(text)
            if match:
                return Block(HOOK, f"temporal defer {match.group(0)!r}: time of day, weekday or an offline peer "
                                   "is not a reason to hold a ready ship.",
                             "ship now, or re-route the execution to an active orchestrator or a subagent. The only "
                             "legitimate defer is a client constraint - name it (e.g. 'awaiting Marie confirm "
                             "repo'). Rare emergencies: '# allow-temporal-defer: <reason>'.")
    return None


if __name__ == "__main__":
    sys.exit(main(check))
