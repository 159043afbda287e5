"""The parties declarations (core/parties.py), checked against the registry they describe.

Every tool whose input schema takes a record id (an argument named `…Id`, `…Ids`, `id`, `ids`, `key`,
`name`, `repo`, `…Name`) must say how that id is authorized: a record kind's declaration names the tool
and the verb it needs (read, see, change, force, claim …), and a verb that needs a party is checked
by the tool's `owns=` or by a store rule listed in STORE_RULES; or the tool declares `shared=` /
`master_only=`. Every resource template goes through policy.resolve_resource. docs/policy.md's table
is the generated one.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.mcpserver.exceptions import ResourceError

from vantage_peers.core import parties
from vantage_peers.core.principal import Principal
from vantage_peers.core.scopes import ScopeProfile
from vantage_peers.pipeline import policy

ID_ARG = re.compile(r"(Id|Ids|Name)$|^(id|ids|key|name|repo)$")
DOCS = Path(__file__).resolve().parents[2] / "docs" / "policy.md"


def id_args(tool: Any) -> list[str]:
    """The record-id arguments of a listed tool, from its input schema."""
    return sorted(a for a in tool.parameters.get("properties", {}) if ID_ARG.search(a))


def declared(tool: str, arg: str) -> list[tuple[str, str]]:
    """(kind, verb) of every declaration naming `tool` on `arg`."""
    return [(k.name, k.tools[tool][1]) for k in parties.KINDS.values() if k.tools.get(tool, (None,))[0] == arg]


def needs_a_party(kind: str, verb: str) -> bool:
    """Whether `verb` on `kind` is decided by who the caller is (not by the team or a namespace)."""
    if verb in ("read", "see", "cite"):
        return False
    roles = parties.kind(kind).roles(verb)
    return not roles or any(r not in (parties.TEAM, parties.NAMESPACE) for r in roles)


def undeclared(app: Any) -> list[str]:
    """Every record-id argument of a tool that no declaration covers, and every party rule nobody checks."""
    problems = []
    for tool in app.tools:
        reg = app.registered[tool.name]
        p = reg.policy
        for arg in id_args(tool):
            if arg in parties.NOT_RECORDS or (tool.name, arg) in parties.NEW_NAMES:
                continue
            owned = any(rule.arg == arg for rule in p.owns)
            found = declared(tool.name, arg)
            if p.shared or p.master_only:
                continue
            if not found:
                problems.append(f"{tool.name}({arg}): no record kind in core/parties.py declares it (or shared=)")
                continue
            for kind, verb in found:
                if not needs_a_party(kind, verb) or arg == p.identity:
                    continue  # a read, a link, the team's; or the caller's own record (its identity argument)
                if not owned and tool.name not in parties.STORE_RULES:
                    problems.append(f"{tool.name}({arg}): {verb} on a {kind} needs a party, but the tool "
                                    "declares no owns= and no store rule (STORE_RULES)")
        for rule in p.owns:
            try:
                policy.verb_of(tool.name, rule)
            except TypeError as exc:
                problems.append(str(exc))
    return problems


def test_every_tool_that_takes_a_record_id_declares_how_it_is_authorized(app):
    assert undeclared(app) == []


def test_removing_one_declaration_is_caught(app, monkeypatch):
    """The check above can fail: drop the owns= of delete_diary, a kind's entry, a shared=, a store rule."""
    import dataclasses

    reg = app.registered["delete_diary"]
    monkeypatch.setitem(app.registered, "delete_diary", dataclasses.replace(
        reg, policy=dataclasses.replace(reg.policy, owns=())))
    assert any(p.startswith("delete_diary(diaryId)") for p in undeclared(app))
    monkeypatch.setitem(app.registered, "delete_diary", reg)
    assert undeclared(app) == []

    tools = dict(parties.KINDS["mandate"].tools)
    del tools["settle_mandate"]
    monkeypatch.setitem(parties.KINDS, "mandate", dataclasses.replace(parties.KINDS["mandate"], tools=tools))
    assert any(p.startswith("settle_mandate(mandateId)") for p in undeclared(app))
    monkeypatch.undo()

    monkeypatch.delitem(parties.STORE_RULES, "update_task")
    assert any(p.startswith("update_task(taskId)") for p in undeclared(app))
    monkeypatch.undo()

    reg = app.registered["soft_delete_memory"]
    monkeypatch.setitem(app.registered, "soft_delete_memory", dataclasses.replace(
        reg, policy=dataclasses.replace(reg.policy, shared=None)))
    assert any(p.startswith("soft_delete_memory(memoryId)") for p in undeclared(app))


def test_every_declaration_names_a_registered_tool_argument_and_real_columns(app):
    """No stale entry: each (tool, argument) a kind declares exists, and each loader reads real columns."""
    stale = []
    for kind in parties.KINDS.values():
        for tool, (arg, verb) in kind.tools.items():
            reg = app.registered.get(tool)
            if reg is None or arg not in reg.policy.params:
                stale.append(f"{kind.name}: {tool}({arg})")
            kind.roles(verb)  # a verb the kind declares
        if kind.table is not None and kind.parties:
            load = policy.declared_loader(kind.name)
            assert app.db.read(lambda c, load=load: load(c, "no-such-record")) is None
    assert stale == []
    for tool, where in parties.STORE_RULES.items():
        assert tool in app.registered, (tool, where)


def test_the_checked_roles_are_parties_of_their_kind():
    for kind in parties.KINDS.values():
        known = set(kind.parties) | set(kind.derived) | {parties.TEAM, parties.NAMESPACE, parties.OPEN_WORK}
        for verb in ("read", "see", "change", "force", *kind.verbs):
            assert set(kind.roles(verb)) <= known, (kind.name, verb)


# -- resources ------------------------------------------------------------------------------------------
def _user(profile: ScopeProfile) -> AuthenticatedUser:
    return AuthenticatedUser(Principal(token="t", client_id="c", scopes=[], kind="oauth", profile=profile))


def _uris(app: Any) -> list[str]:
    """A concrete URI for every resource and resource template the server registers."""
    async def listing():
        return await app.mcp.list_resources(), await app.mcp.list_resource_templates()

    resources, templates = anyio.run(listing)
    uris = [str(r.uri) for r in resources]
    for t in templates:
        uri = re.sub(r"\{\?[^}]*\}", "", t.uri_template)
        uris.append(re.sub(r"\{[^}]+\}", "bob", uri))
    return uris


def test_every_resource_goes_through_the_policy(app, monkeypatch):
    """Each resource read calls policy.resolve_resource; a credential without an identity is refused
    on every one, and a token acting as alice never reads bob's inbox or task queue."""
    uris = _uris(app)
    assert any(u.startswith("vp://inbox/") for u in uris) and any(u.startswith("ui://") for u in uris)
    seen: list[str] = []
    real = policy.resolve_resource

    def spy(uri, principal, settings):
        seen.append(uri)
        return real(uri, principal, settings)

    monkeypatch.setattr(policy, "resolve_resource", spy)

    async def read(user, uri):
        token = auth_context_var.set(user)
        try:
            return list(await app.mcp.read_resource(uri))
        finally:
            auth_context_var.reset(token)

    nobody = _user(ScopeProfile("no-identity"))
    alice = _user(ScopeProfile("alice-agent", "", ("alice",), ("project/a",), ("project/a",)))
    for uri in uris:
        with pytest.raises(ResourceError, match="FORBIDDEN"):
            anyio.run(read, nobody, uri)
        if uri.startswith(("vp://inbox/", "vp://tasks/")):
            with pytest.raises(ResourceError, match="FORBIDDEN: profile alice-agent may not read"):
                anyio.run(read, alice, uri)
    assert seen == [u for u in uris for _ in range(2 if u.startswith(("vp://inbox/", "vp://tasks/")) else 1)]


def test_prompts_resolve_their_caller_through_the_policy(app, monkeypatch):
    from vantage_peers.prompts import render_prompt
    from vantage_peers.prompts.workflows import WORKFLOWS

    calls: list[str] = []
    real = policy.resolve_prompt

    def spy(name, principal, settings):
        calls.append(name)
        return real(name, principal, settings)

    monkeypatch.setattr("vantage_peers.prompts.resolve_prompt", spy)
    workflow = WORKFLOWS[0]
    token = auth_context_var.set(_user(ScopeProfile("alice-agent", "", ("alice",), (), ())))
    try:
        text = render_prompt(workflow, app.settings, {})
    finally:
        auth_context_var.reset(token)
    assert calls == [workflow.name] and "alice" in text


# -- the generated table -------------------------------------------------------------------------------
def test_docs_policy_table_is_the_generated_one():
    text = DOCS.read_text()
    assert parties.BEGIN in text and parties.END in text, "docs/policy.md lost its parties markers"
    current = text.split(parties.BEGIN, 1)[1].split(parties.END, 1)[0]
    assert current == "\n" + parties.markdown(), (
        "docs/policy.md is stale: run `uv run python -m vantage_peers.core.parties --markdown docs/policy.md`")


def test_the_table_changes_with_the_declarations(monkeypatch, tmp_path):
    import dataclasses

    doc = tmp_path / "policy.md"
    doc.write_text(f"before\n{parties.BEGIN}\nold\n{parties.END}\nafter\n")
    assert parties.write_docs(doc) is True and parties.write_docs(doc) is False
    monkeypatch.setitem(parties.KINDS, "task", dataclasses.replace(parties.KINDS["task"], force=()))
    assert parties.write_docs(doc) is True
    assert "before\n" in doc.read_text() and doc.read_text().endswith(f"{parties.END}\nafter\n")
