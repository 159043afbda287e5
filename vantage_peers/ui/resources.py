"""The six `ui://vp/v1/<primitive>` MCP resources (spec §25).

Each primitive is registered twice on the MCPServer: as a plain resource (so `resources/list`
shows exactly the six URIs) and as a URI template with its documented query parameters (so
`resources/read` of `ui://vp/v1/tasks-table?assignedTo=sigma&limit=10` reaches the same handler;
the SDK matches query parameters in any order, partially, ignoring extras). A read never fails:
a bad parameter or a failing query renders the error `<div>`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources import FunctionResource
from mcp.server.mcpserver.resources.templates import ResourceSecurity

from ..core.errors import InvalidArgument, NotFound, VantageError
from ..core.sdk import add_resource_template, current_principal
from ..db import Connection
from ..pipeline.policy import read_prefixes, readers_of
from .i18n import LANGS
from .render import RENDERERS

log = logging.getLogger(__name__)
MIME = "text/html"
# Parameters are database filters, never file paths: the SDK's path-traversal policy does not apply.
NO_PATH_POLICY = ResourceSecurity(reject_path_traversal=False, reject_absolute_paths=False, reject_null_bytes=False)
MAX_PARAM_CHARS = 500
_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")


@dataclass(frozen=True)
class Primitive:
    name: str
    params: tuple[str, ...]  # documented query parameters besides lang
    limit_default: int
    limit_max: int
    description: str


PRIMITIVES = (
    Primitive("tasks-table", ("assignedTo", "status"), 20, 200,
              "Tasks as a table (Title / Status / Priority / Assigned to) with status badges and a count."),
    Primitive("messages-feed", ("from", "channel"), 20, 200,
              "Messages as a chronological feed of bubbles: sender, time, channel badge, content."),
    Primitive("diary-entry", ("date", "orchestrator"), 5, 50,
              "One diary entry (date) or the latest entries: date, orchestrator, content, highlights, blockers."),
    Primitive("mission-timeline", ("pilot", "project", "status"), 10, 100,
              "Missions as a vertical timeline: name, project, status, pilot, priority, progress bar."),
    Primitive("briefing-note", ("noteId", "topic"), 5, 50,
              "One briefing note (noteId) or the latest ones: topic, title, participants, content."),
    Primitive("memory-quote", ("namespace", "type"), 5, 50,
              "Memories of a namespace as quotes: namespace badge, type chip, score, content."),
)


def uri(primitive: str) -> str:
    return f"ui://vp/v1/{primitive}"


def _text(params: dict[str, Any], name: str) -> str | None:
    value = params.get(name)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidArgument(f"{name} must be a single value")
    if len(value) > MAX_PARAM_CHARS:
        raise InvalidArgument(f"{name} is longer than {MAX_PARAM_CHARS} characters")
    return value


def _limit(raw: Any, spec: Primitive) -> int:
    if raw is None or raw == "":
        return spec.limit_default
    if not isinstance(raw, str) or not re.fullmatch(r"-?\d{1,12}", raw.strip()):
        raise InvalidArgument(f"limit must be an integer from 1 to {spec.limit_max}, got {raw!r}")
    return max(1, min(spec.limit_max, int(raw)))  # out of range is clamped, like the list tools


def lang_of(params: dict[str, Any]) -> str:
    value = params.get("lang")
    return value if isinstance(value, str) and value in LANGS else "en"


def fetch(conn: Connection, primitive: str, params: dict[str, Any], limit: int) -> list[dict[str, Any]]:
    """The documents a primitive shows, from the same store functions as the tools (spec §25 sources)."""
    from ..domains.briefings import store as briefings
    from ..domains.diary import store as diary
    from ..domains.memory import store as memory
    from ..domains.memory.models import check_types
    from ..domains.messaging import store as messaging
    from ..domains.missions import store as missions
    from ..domains.missions.vocabulary import MISSION_ALIASES, MISSION_STATUSES
    from ..domains.tasks import store as tasks
    from ..domains.tasks.rules import TASK_ALIASES, TASK_STATUSES, resolve_status_filter

    p = {name: _text(params, name) for name in params}
    readers = readers_of(current_principal())  # the tools' read visibility (docs/policy.md)
    if primitive == "tasks-table":
        keep = resolve_status_filter(p.get("status"), statuses=TASK_STATUSES, aliases=TASK_ALIASES)
        return tasks.list_tasks(conn, limit=limit, cursor=None, fields="full", assigned_to=p.get("assignedTo"),
                                statuses=keep, readers=readers)["items"]
    if primitive == "messages-feed":
        return messaging.list_messages(conn, sender=p.get("from"), channel=p.get("channel"), session_day=None,
                                       limit=limit, cursor=None, fields="full", readers=readers)["items"]
    if primitive == "diary-entry":
        date, who = p.get("date"), p.get("orchestrator")
        if date is not None and not _DATE.match(date):
            raise InvalidArgument(f"date must be YYYY-MM-DD, got {date!r}")
        return diary.list_diaries(conn, orchestrator=who, date_from=date, date_to=date, limit=limit, cursor=None,
                                  fields="full")["items"]
    if primitive == "mission-timeline":
        keep = resolve_status_filter(p.get("status"), statuses=MISSION_STATUSES, aliases=MISSION_ALIASES)
        return missions.list_missions(conn, project=p.get("project"), pilot=p.get("pilot"), statuses=keep,
                                      updated_since=None, limit=limit, cursor=None, fields="full")["items"]
    if primitive == "briefing-note":
        if p.get("noteId"):
            note = briefings.NOTES.get(conn, p["noteId"])
            if note is None:
                raise NotFound(f"briefing note {p['noteId']} does not exist")
            return [note]
        return briefings.list_notes(conn, topic=p.get("topic"), updated_since=None, limit=limit, cursor=None,
                                    fields="full")["items"]
    if primitive == "memory-quote":
        # A scoped token reads only its prefixes here too (no call pipeline runs for a resource read).
        scope = memory.scope_of(p.get("namespace"), visible=read_prefixes(current_principal()))
        return memory.list_memories(conn, scope=scope, types=check_types(p.get("type")), limit=limit,
                                    cursor=None, fields="full")["items"]
    raise InvalidArgument(f"unknown primitive {primitive}")


def render(app: Any, primitive: str, params: dict[str, Any]) -> str:
    """The HTML fragment for one read; the error box instead of any exception."""
    from .html import error_box

    spec = next(s for s in PRIMITIVES if s.name == primitive)
    lang = "en"
    try:
        lang = lang_of(params)
        if params.get("lang") not in (None, "", *LANGS):
            raise InvalidArgument(f"lang must be en or fr, got {params.get('lang')!r}")
        limit = _limit(params.get("limit"), spec)
        items = app.db.read(lambda c: fetch(c, primitive, params, limit))
        return RENDERERS[primitive](items, lang)
    except VantageError as err:
        return error_box(primitive, lang, str(err))
    except Exception as err:  # noqa: BLE001 - the documented error boundary: a read always returns HTML
        log.exception("ui://%s failed", primitive)
        return error_box(primitive, lang, f"INTERNAL: {type(err).__name__}")


def _handlers(app: Any, spec: Primitive) -> tuple[Callable[[], str], Callable[..., str], str]:
    names = (*spec.params, "limit", "lang")

    def static() -> str:
        return render(app, spec.name, {})

    def templated(**params: Any) -> str:
        return render(app, spec.name, {name: params.get(name) for name in names})

    return static, templated, uri(spec.name) + "{?" + ",".join(names) + "}"


def register_resources(app: Any, mcp: MCPServer) -> None:
    for spec in PRIMITIVES:
        static, templated, template = _handlers(app, spec)
        title = f"VantagePeers {spec.name}"
        mcp.add_resource(FunctionResource.from_function(
            fn=static, uri=uri(spec.name), name=spec.name, title=title, description=spec.description, mime_type=MIME))
        # `@mcp.resource` insists on one Python parameter per template variable, and `from` (messages-feed)
        # cannot be a parameter name: the template is added to the server's resource manager directly.
        add_resource_template(
            mcp,
            fn=templated, uri_template=template, name=spec.name, title=title, description=spec.description,
            mime_type=MIME, security=NO_PATH_POLICY)
