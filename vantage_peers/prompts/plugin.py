"""Write the Claude Code plugin's skills from the workflow table.

`python -m vantage_peers.prompts.plugin [PLUGIN_DIR]` (default: ./plugin) rewrites
`skills/<name>/SKILL.md` for the nine workflows; the test suite checks the committed files equal
this output, so the plugin and the MCP prompts say the same thing. A skill is also its own slash
command (`/vantage-peers:<name>`), so there are no separate `commands/` wrappers: each workflow once.
"""

from __future__ import annotations

import sys
from pathlib import Path

from .workflows import WORKFLOWS, Workflow, render

PLUGIN_NAME = "vantage-peers"

SKILL_IDENTITY = (
    "<me> = your orchestrator id: the role given in the arguments (--role <id>), else the id this "
    "MCP server runs as (VP_ORCHESTRATOR; `whoami` returns it). If neither names one, ask the user "
    "and pass the id explicitly wherever the steps show <me>.")


ARGUMENT_READING = {
    "query": "<query> = the quoted text in the arguments (or all of them without a --flag).",
    "namespace": "<namespace> = the value after --namespace, when given.",
    "date": "<date> = a YYYY-MM-DD in the arguments, else today.",
    "url": "<url> = the URL in the arguments, when given (an HTTP deployment); none means stdio.",
    "mode": "--mode human or --mode autonomous in the arguments sets the mode.",
}


def _yaml_string(text: str) -> str:
    """A single-quoted YAML scalar (the only escape is a doubled quote)."""
    return "'" + text.replace("'", "''") + "'"


def skill_description(workflow: Workflow) -> str:
    phrases = ", ".join(f'"{t}"' for t in workflow.triggers)
    return f"{workflow.summary} Use when the user says {phrases}, or runs /{workflow.name}."


def skill_markdown(workflow: Workflow) -> str:
    front = [
        "---",
        f"name: {workflow.name}",
        f"description: {_yaml_string(skill_description(workflow))}",
    ]
    if workflow.argument_hint:
        front.append(f"argument-hint: {_yaml_string(workflow.argument_hint)}")
    front.append("---")
    names = {a.name for a in workflow.args}
    preamble = [SKILL_IDENTITY] if "role" in names else []
    preamble.append("Arguments: $ARGUMENTS")
    preamble += [ARGUMENT_READING[name] for name in ("query", "namespace", "date", "url", "mode") if name in names]
    body = render(workflow, preamble)
    footer = (f"The same workflow is served by the vantage-peers MCP server as the prompt "
              f"\"{workflow.name}\" (for clients without this plugin).\n")
    return "\n".join(front) + "\n\n" + body + "\n" + footer


def expected_files() -> dict[str, str]:
    """Relative path inside the plugin -> content, for every generated file."""
    out: dict[str, str] = {}
    for workflow in WORKFLOWS:
        out[f"skills/{workflow.name}/SKILL.md"] = skill_markdown(workflow)
    return out


def write(plugin_dir: Path) -> list[Path]:
    written = []
    for rel, text in expected_files().items():
        path = plugin_dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        written.append(path)
    return written


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("plugin")
    for p in write(target):
        print(p)
