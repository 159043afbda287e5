"""The public contract: tool names from spec/tools.md, descriptions and annotations on every tool."""

from __future__ import annotations

from support.paths import SHARED

from vantage_peers.pipeline.app import effective_hints

EXPECTED = {
    # Profiles & presence, messaging (issue 2)
    "get_profile", "update_profile", "set_summary", "list_peers", "whoami",
    "send_message", "check_messages", "mark_as_read", "delete_message", "get_message", "list_messages",
    "list_broadcast_status", "search_messages_by_keyword",
    # Memory, search, episodes (issue 3)
    "store_memory", "get_memory", "list_memories", "soft_delete_memory", "recall", "text_search", "hybrid_search",
    "store_episode", "get_episode", "list_episodes", "search_episodes_by_keyword", "search_episodes_by_semantic",
    # Tasks, missions, templates (issue 4)
    "create_task", "get_task", "list_tasks", "search_tasks_by_keyword", "update_task", "start_task", "pause_task",
    "resume_task", "complete_task", "block_task", "add_task_dependency", "checkout_task", "delete_task",
    "list_tasks_by_mission", "bulk_complete_tasks", "validate_task_payload", "list_overdue_tasks",
    "create_mission", "get_mission", "list_missions", "update_mission", "update_mission_status",
    "update_mission_progress", "get_mission_template", "update_mission_template", "upsert_mission_template",
    "instantiate_template_into_mission", "list_mission_templates",
    # Team records (issue 5)
    "write_diary", "get_diary", "list_diaries", "list_diary_by_date_range", "delete_diary",
    "create_briefing_note", "update_briefing_note", "get_briefing_note", "list_briefing_notes",
    "search_briefing_notes_by_keyword", "delete_briefing_note",
    "register_component", "get_component", "list_components", "update_component", "delete_component",
    "search_components",
    "create_mandate", "accept_mandate", "update_mandate", "settle_mandate", "validate_mandate_spending",
    "list_mandates", "get_mandate",
    "create_bu", "update_bu", "get_bu", "list_bus", "delete_bu",
    "create_fix_pattern", "get_fix_pattern", "add_fix_attempt", "validate_fix", "search_fix_patterns",
    "list_fix_patterns", "link_issue_to_pattern",
    "improvisation_digest",
    # GitHub issues, repo mappings, deployments, error monitoring (issue 13)
    "list_issues", "get_issue", "update_issue_status", "link_commit_to_issue", "verify_issue", "issue_stats",
    "add_repo_mapping", "list_repo_mappings", "get_repo_mapping", "remove_repo_mapping",
    "add_deployment", "remove_deployment", "list_errors", "get_error",
    # OKF bundles and iframe embed sessions (issue 14)
    "export_okf_bundle", "validate_okf_bundle", "import_okf_bundle",
    "create_iframe_session", "touch_iframe_session", "revoke_iframe_session", "get_iframe_session",
    # Recurring tasks (issue 12)
    "create_recurring_task", "get_recurring_task", "list_recurring_tasks", "update_recurring_task",
    "delete_recurring_task", "pause_recurring_task", "resume_recurring_task",
}

READ_PREFIXES = ("get_", "list_", "search_", "recall", "text_search", "hybrid_search", "check_", "validate_",
                 "whoami", "improvisation_")


def test_every_spec_tool_is_registered(tools):
    missing = EXPECTED - set(tools.listed)
    assert not missing, f"missing tools: {sorted(missing)}"


def test_every_tool_has_a_description_and_annotations(tools):
    """The hints a client acts on (the MCP defaults applied to what is sent: docs/clients.md)."""
    kinds = {}
    for name, tool in tools.listed.items():
        assert tool.description and tool.description.strip(), name
        first = tool.description.strip().splitlines()[0]
        assert 10 < len(first) <= 200, f"{name}: first line should be one sentence: {first!r}"
        assert tool.annotations is not None, name
        ann = effective_hints(tool.annotations)
        assert ann.open_world_hint is False, name
        if name.startswith(READ_PREFIXES) and name not in ("validate_fix",):
            assert ann.read_only_hint is True, f"{name} should be read-only"
        if name.startswith(("delete_", "soft_delete_", "bulk_complete_")):
            assert ann.destructive_hint is True, f"{name} should be destructive"
        if ann.destructive_hint:  # the warning hint is sent, never left to a client's default
            assert tool.annotations.destructive_hint is True, name
        kinds[(ann.read_only_hint, ann.destructive_hint, ann.idempotent_hint)] = name
    # every kind app.tool declares is on the wire (read, write, idempotent write, destructive), and no other
    assert set(kinds) == {(True, False, True), (False, False, False), (False, False, True), (False, True, False)}


def test_only_hints_that_differ_from_the_mcp_defaults_are_sent(tools):
    from mcp.types import ToolAnnotations

    defaults = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": False, "openWorldHint": True}
    for name, tool in tools.listed.items():
        sent = tool.annotations.model_dump(by_alias=True, exclude_none=True)
        redundant = {k for k, v in sent.items() if defaults.get(k) == v and k != "destructiveHint"}
        assert not redundant, (name, redundant)
        if sent.get("readOnlyHint"):  # destructive/idempotent mean nothing on a read-only tool
            assert set(sent) == {"readOnlyHint", "openWorldHint"}, name
    # What a client infers from nothing at all: the spec's defaults, not ours.
    assert effective_hints(None) == ToolAnnotations(readOnlyHint=False, destructiveHint=True, idempotentHint=False,
                                                    openWorldHint=True)
    assert effective_hints(ToolAnnotations(readOnlyHint=True)).destructive_hint is False


def test_list_tools_use_the_envelope(tools):
    """Every list_* tool pages {items, nextCursor?} (documented exceptions; list_toolsets is one short page)."""
    for name in sorted(n for n in tools.listed if n.startswith("list_")):
        if name in ("list_broadcast_status", "list_diary_by_date_range", "list_toolsets"):  # one page
            continue
        schema = tools.listed[name].input_schema
        assert {"limit", "cursor"} <= set(schema["properties"]), f"{name} lacks limit/cursor"


def _spec_arguments() -> dict[str, set[str]]:
    """Argument names per tool from the spec's tables (`| `arg` | …`) and `Args: `x`` lines."""
    import re

    import pytest

    spec = SHARED / "spec" / "tools.md"
    if not spec.is_file():
        pytest.skip("shared/spec/tools.md is not beside this checkout")
    out: dict[str, set[str]] = {}
    for section in re.split(r"\n### `", spec.read_text(encoding="utf-8"))[1:]:
        name = section.split("`", 1)[0]
        body = section.split("\n### ", 1)[0].split("\n## ", 1)[0]
        found: set[str] = set()
        for line in body.splitlines():
            cell = re.match(r"\|\s*((?:`[^`]+`(?:,\s*)?)+)\s*\|", line)
            if cell:
                found |= {a.split(".")[0] for a in re.findall(r"`([^`]+)`", cell.group(1))
                          if re.fullmatch(r"[a-zA-Z][a-zA-Z0-9.]*", a)}
        found |= set(re.findall(r"Args?(?: \(inferred\))?: `(\w+)`", body))
        out[name] = found
    return out


def test_every_documented_argument_is_accepted(tools):
    spec = _spec_arguments()
    assert len(spec) > 100  # the parser still reads the spec
    for name, documented in spec.items():
        if name not in tools.listed:
            continue
        accepted = set(tools.listed[name].input_schema.get("properties", {}))
        assert documented <= accepted, f"{name} lacks documented arguments {sorted(documented - accepted)}"
