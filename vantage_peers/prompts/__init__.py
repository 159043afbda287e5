"""MCP prompts: the nine toolkit workflows (`prompts/list`, `prompts/get`).

Clients that show prompts as slash commands (Claude Code, VS Code, Cursor) get the VantagePeers
routine from the server alone, without the plugin. `register(app)` adds them once the MCPServer
exists (`app.on_server`). The rendered text names this process's identity: the `role` argument,
else VP_ORCHESTRATOR, else an instruction to call `whoami`.
"""

from __future__ import annotations

import re
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.prompts.base import Prompt, PromptArgument, UserMessage
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from ..core.sdk import current_principal
from ..pipeline.policy import resolve_prompt
from .workflows import WORKFLOWS, Workflow, identity_line, render

MAX_ARG_CHARS = 2_000  # prompt arguments are echoed into the text; keep a hostile one from bloating it
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:/@-]{0,199}$")


def register(app: Any) -> None:
    """Add the workflow prompts to the server when it is built."""
    app.on_server(lambda mcp: add_prompts(mcp, app.settings))


def add_prompts(mcp: MCPServer, settings: Any) -> None:
    for workflow in WORKFLOWS:
        mcp.add_prompt(_prompt(workflow, settings))


def _prompt(workflow: Workflow, settings: Any) -> Prompt:
    def fn(**arguments: Any) -> list[UserMessage]:
        return [UserMessage(render_prompt(workflow, settings, arguments))]

    # Built directly (not from a signature) because argument names come from the workflow table.
    return _WorkflowPrompt(
        name=workflow.name,
        title=workflow.title,
        description=workflow.summary,
        arguments=[PromptArgument(name=a.name, description=a.description, required=a.required)
                   for a in workflow.args],
        fn=fn,
    )


class _WorkflowPrompt(Prompt):
    """A prompt whose missing-argument refusal reaches the client (the SDK reports a bare
    ValueError as "Internal server error")."""

    async def render(self, arguments: dict[str, Any] | None, context: Any) -> Any:
        missing = [a.name for a in self.arguments or [] if a.required and _clean((arguments or {}).get(a.name)) is None]
        if missing:
            raise MCPError(INVALID_PARAMS, f"INVALID_ARGUMENT: prompt {self.name} needs the argument(s) "
                                           f"{', '.join(missing)}")
        return await super().render(arguments, context)


def _clean(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value).strip()
    if not text:
        return None
    return text[:MAX_ARG_CHARS]


def render_prompt(workflow: Workflow, settings: Any, arguments: dict[str, Any] | None) -> str:
    """The prompt text for `workflow` with the client's arguments (unknown ones are ignored)."""
    args = {a.name: _clean((arguments or {}).get(a.name)) for a in workflow.args}
    role = args.get("role")
    if role is not None and not _SAFE_NAME.match(role):
        role = None  # not an orchestrator id: fall back to the configured identity
    principal = current_principal()
    # The same resolution as tool calls (policy.resolve): the argument, else the token's identity, else
    # VP_ORCHESTRATOR.
    me = role or resolve_prompt(workflow.name, principal, settings).identity
    if role:
        source = "the role argument"
    elif principal is not None and not principal.is_master:
        source = "the identity your access token carries"
    else:
        source = "VP_ORCHESTRATOR on this server"
    preamble = [identity_line(me, source=source)]
    for name, value in args.items():
        if value is None or name == "role":
            continue
        if name == "mode":
            if value.lower() in ("human", "autonomous"):
                preamble.append(f"Use {value.lower()} mode.")
            continue
        preamble.append(f"<{name}> = {value!r}.")
    return render(workflow, preamble)
