"""Component registry: versions, byte-for-byte recovery, paging, search, RBAC, hostile input."""

from __future__ import annotations

import hashlib

import pytest
from support.records_helpers import HOSTILE_QUERIES, call, error, page_all, search_hostile

from vantage_peers.domains.components import store

pytestmark = pytest.mark.backends

AGENT = {"name": "dev-convex-expert", "type": "agent", "team": "development", "createdBy": "carol"}


def reg(tools, **over):
    return call(tools, "register_component", {**AGENT, "content": "# agent\n", **over})


def get(tools, **args):
    return call(tools, "get_component", {"name": AGENT["name"], "type": "agent", **args})


FILES = [
    "---\nname: dev-convex-expert\n---\r\nWindows line\r\nMac line\rUnix line\n",
    "trailing spaces   \n\ttabs\t\t\n\n\n   ",
    "\ufeffBOM first, Ünïcödé, 日本語, emoji 🙂🚀, combining e\u0301, zero-width\u200b, NUL-free",
    "",
    "no newline at end",
]


@pytest.mark.parametrize("original", FILES)
def test_file_rebuilt_byte_for_byte(tools, tmp_path, original):
    src = tmp_path / "agent.md"
    src.write_bytes(original.encode("utf-8"))
    content = src.read_bytes().decode("utf-8")  # what a client sends: the exact text, no newline translation
    summary = reg(tools, content=content)
    assert summary["contentHash"] == hashlib.sha256(src.read_bytes()).hexdigest()
    assert summary["size"] == len(src.read_bytes())
    got = get(tools)
    rebuilt = tmp_path / "rebuilt.md"
    rebuilt.write_bytes(got["content"].encode("utf-8"))
    assert rebuilt.read_bytes() == src.read_bytes()
    assert hashlib.sha256(rebuilt.read_bytes()).hexdigest() == got["contentHash"]


def test_reregistering_creates_versions_and_keeps_history(tools):
    first = reg(tools, content="v1 body\n", version="1.0.0")
    assert first["created"] and first["newRevision"] and first["revision"] == 1
    same = reg(tools, content="v1 body\n", version="1.0.0")
    assert not same["created"] and not same["newRevision"] and same["revision"] == 1
    second = reg(tools, content="v2 body\r\n", version="2.0.0")
    third = reg(tools, content="v3 body", createdBy="dave")  # no version label: keeps 2.0.0
    assert (second["revision"], third["revision"]) == (2, 3) and second["_id"] == first["_id"]
    latest = get(tools)
    assert latest["content"] == "v3 body" and latest["revision"] == 3 and latest["revisions"] == 3
    assert latest["version"] == "2.0.0" and latest["updatedBy"] == "dave" and latest["createdBy"] == "carol"
    assert get(tools, version="1.0.0")["content"] == "v1 body\n"
    assert get(tools, revision=2)["content"] == "v2 body\r\n"
    assert get(tools, version="2.0.0")["revision"] == 3  # newest revision carrying the label
    assert get(tools, revision=1)["latestRevision"] == 3
    assert get(tools, revision=9) is None and get(tools, version="0.0.1") is None
    history = get(tools, includeHistory=True)["history"]
    assert [h["revision"] for h in history] == [1, 2, 3]
    assert [h["createdBy"] for h in history] == ["carol", "carol", "dave"]
    assert call(tools, "get_component", {"name": AGENT["name"], "type": "skill"}) is None


def test_same_name_different_type_is_another_component(tools):
    a = reg(tools, content="agent")
    s = reg(tools, type="skill", content="skill")
    assert a["_id"] != s["_id"] and a["created"] and s["created"]


def test_content_hash_is_verified_when_given(tools):
    body = "verified\n"
    digest = hashlib.sha256(body.encode()).hexdigest()
    assert reg(tools, content=body, contentHash=digest.upper())["contentHash"] == digest
    assert reg(tools, content=body + "x", contentHash="sha256:" + hashlib.sha256(b"verified\nx").hexdigest())
    msg = error(tools, "register_component", {**AGENT, "content": "tampered", "contentHash": digest})
    assert "INVALID_ARGUMENT" in msg and "contentHash" in msg
    assert get(tools)["content"] == "verified\nx"


def test_update_component(tools):
    reg(tools, content="v1", version="1.0.0")
    up = call(tools, "update_component", {"name": AGENT["name"], "type": "agent", "team": "platform",
                                          "project": "vp", "callerOrchestrator": "erin"})
    assert up["revision"] == 1 and not up["newRevision"]
    assert get(tools)["team"] == "platform" and get(tools)["updatedBy"] == "erin"
    up = call(tools, "update_component", {"name": AGENT["name"], "type": "agent", "version": "1.0.1"})
    assert up["revision"] == 2 and up["version"] == "1.0.1" and get(tools, revision=1)["version"] == "1.0.0"
    up = call(tools, "update_component", {"name": AGENT["name"], "type": "agent", "content": "v3"})
    assert up["revision"] == 3 and get(tools)["content"] == "v3" and get(tools, revision=2)["content"] == "v1"
    assert "NOT_FOUND" in error(tools, "update_component", {"name": "ghost", "type": "hook", "content": "x"})
    assert "nothing to update" in error(tools, "update_component", {"name": AGENT["name"], "type": "agent"})


def test_delete_component_creator_or_system(tools):
    reg(tools, content="a")
    reg(tools, content="b")
    reg(tools, type="hook", content="h")
    denied = error(tools, "delete_component", {"name": AGENT["name"], "type": "agent", "callerOrchestrator": "dave"})
    assert "RBAC_DENIED" in denied and "carol" in denied
    assert "INVALID_ARGUMENT" in error(tools, "delete_component", {"name": AGENT["name"], "type": "agent"})
    out = call(tools, "delete_component", {"name": AGENT["name"], "type": "agent", "callerOrchestrator": "carol"})
    assert out == {"deleted": True, "revisionsDeleted": 2}
    assert get(tools) is None
    out = call(tools, "delete_component", {"name": AGENT["name"], "type": "hook", "callerOrchestrator": "system"})
    assert out["deleted"]
    assert call(tools, "delete_component", {"name": "x", "type": "hook", "callerOrchestrator": "carol"}) == {
        "deleted": False, "revisionsDeleted": 0}


def test_list_components_insert_n_get_n_filters_lite(tools):
    n = 33
    for i in range(n):
        reg(tools, name=f"comp-{i:02d}", type=("agent", "skill", "hook")[i % 3],
            team="development" if i % 2 else "marketing", content=f"body {i}")
    reg(tools, name="comp-00", type="agent", content="revision 2")  # a new revision is not a new item
    items, pages = page_all(tools, "list_components", limit=4)
    assert len(items) == n and pages == 9 and len({i["_id"] for i in items}) == n
    skills, _ = page_all(tools, "list_components", type="skill", limit=3)
    assert len(skills) == 11 and {s["type"] for s in skills} == {"skill"}
    dev_hooks, _ = page_all(tools, "list_components", type="hook", team="development", limit=2)
    assert {(h["type"], h["team"]) for h in dev_hooks} == {("hook", "development")} and len(dev_hooks) == 5
    lite, _ = page_all(tools, "list_components", fields="lite", limit=200)
    assert len(lite) == n and all(set(i) == {"_id", "_creationTime", "name", "type", "team"} for i in lite)
    full = call(tools, "list_components", {"type": "agent", "limit": 200})["items"]
    assert next(c for c in full if c["name"] == "comp-00")["content"] == "revision 2"
    assert error(tools, "list_components", {"type": "widget"})  # not a component type


def test_search_components_substring_by_name_or_team(tools):
    reg(tools, content="x")
    reg(tools, name="mkt-seo-writer", type="skill", team="marketing", content="y")
    reg(tools, name="convex-migrator", type="hook", team="platform", content="z")
    names = lambda q, **a: [i["name"] for i in call(tools, "search_components", {"query": q, **a})["items"]]  # noqa: E731
    assert set(names("conv")) == {"dev-convex-expert", "convex-migrator"}
    assert names("conv", type="hook") == ["convex-migrator"]
    assert names("market") == ["mkt-seo-writer"]  # team match
    assert set(names("CONVEX")) == {"dev-convex-expert", "convex-migrator"}  # case-insensitive
    assert names("se") == ["mkt-seo-writer"]  # 2 characters: LIKE fallback
    assert names("nothing-like-this") == []
    hit = call(tools, "search_components", {"query": "expert", "detail": "full"})["items"][0]
    assert "content" not in hit and "score" in hit


@pytest.mark.parametrize("query", [*HOSTILE_QUERIES, "%", "_", "\\", "100%_\\x"])
def test_search_components_hostile(tools, backend, query):
    reg(tools, name='we"ird(((name NEAR( col:x* 🙂', content="x")
    if not query.strip():
        assert "INVALID_ARGUMENT" in error(tools, "search_components", {"query": query})
        return
    found = search_hostile(tools, backend, "search_components", query=query)
    if found is None:  # PostgreSQL refused the NUL, coded
        return
    items = found["items"]
    assert isinstance(items, list)
    if query in ("%", "_", "\\"):
        assert items == [] or all(query in i["name"] for i in items)


def test_hostile_register_inputs(tools):
    assert "INVALID_ARGUMENT" in error(tools, "register_component", {**AGENT, "content": "\ud800"})
    assert error(tools, "register_component", {**AGENT, "type": "widget", "content": "x"})
    assert error(tools, "register_component", {**AGENT, "content": None})
    assert "INVALID_ARGUMENT" in error(tools, "register_component", {**AGENT, "name": " ", "content": "x"})
    big = "z" * 1_000_000
    assert reg(tools, content=big)["size"] == 1_000_000 and get(tools)["content"] == big
    assert "larger than" in error(tools, "register_component", {**AGENT, "content": "🙂" * 1_100_000})
    assert len(call(tools, "list_components", {"limit": 200})["items"]) == 1


def test_store_register_on_a_file(db):
    for i in range(3):
        db.write(lambda c, i=i: store.register(c, name="h", type_="hook", content=f"v{i}", created_by="x",
                                               team=None, version=None, project=None))
    assert db.read(lambda c: c.scalar("SELECT count(*) FROM componentRevisions")) == 3
    assert db.read(lambda c: store.get(c, name="h", type_="hook", revision=2))["content"] == "v1"


def test_register_is_one_transaction(db, monkeypatch):

    def boom(*args, **kwargs):
        raise RuntimeError("disk full while writing the revision")

    monkeypatch.setattr(store, "_add_revision", boom)
    with pytest.raises(RuntimeError):
        db.write(lambda c: store.register(c, name="h", type_="hook", content="x", created_by="x", team=None,
                                          version=None, project=None))
    assert db.read(lambda c: c.scalar("SELECT count(*) FROM components")) == 0
    if db.backend == "sqlite":  # the FTS index is written in the same transaction
        assert db.read(lambda c: c.scalar("SELECT count(*) FROM components_fts WHERE components_fts MATCH 'h'")) in (0, None)
