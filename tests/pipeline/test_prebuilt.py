"""Prebuilt tool schemas (pipeline/prebuilt.py, #34): tools/list from the file, byte-identical to a
full build; the argument model built on the first call, refusing bad input exactly as before; a stale
entry never listed; only enabled toolsets' tools prepared."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Annotated

import anyio
import pytest
from conftest import make_settings, open_tools
from pydantic import BaseModel, Field
from support.generated import check_generated
from support.paths import REPO

from vantage_peers.pipeline import calls, prebuilt
from vantage_peers.server import create_app

BAD_CALLS = [("create_task", {"title": 5}), ("create_task", {"title": "t", "priority": ["high"]}),
             ("create_task", {}), ("send_message", {"channel": "c"}), ("checkout_task", {"taskId": 5}),
             ("check_messages", {"limit": "many"}), ("recall", {"query": ["x"]}),
             ("send_message", {"channel": "c", "content": "x", "idempotencyKey": 7})]


@pytest.fixture
def fresh(monkeypatch):
    """Shapes of this test only (a process shares them between apps), counted from zero."""
    monkeypatch.setattr(calls, "_SHAPES", {})
    monkeypatch.setattr(prebuilt, "COUNTS", {"listed": 0, "built": 0})


def _app(db_path, **overrides):
    return create_app(make_settings(db_path, **overrides))


def _listing(app) -> str:
    listed = anyio.run(app.mcp.list_tools)
    return json.dumps([t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in listed],
                      ensure_ascii=False)


def test_the_file_holds_what_a_full_build_makes(app):
    """Fails when a tool's arguments or return type changed without regenerating the file."""
    text = prebuilt.render(prebuilt.generate(prebuilt.app_shapes(app)))
    check_generated(prebuilt.FILE, text, "tests/pipeline/test_prebuilt.py")
    assert len(json.loads(text)["tools"]) == len(app.tools)


def test_the_listing_from_the_file_is_byte_identical_to_a_full_build(db_path, tmp_path, fresh, monkeypatch):
    app = _app(db_path)
    try:
        from_file = _listing(app)
        assert {"listed": len(app.tools), "built": 0} == prebuilt.COUNTS
    finally:
        app.db.close()
    monkeypatch.setattr(calls, "_SHAPES", {})
    monkeypatch.setattr(prebuilt, "_stored", {})  # as without the file: every tool built in full
    app = _app(tmp_path / "other.db")
    try:
        assert _listing(app) == from_file
        assert prebuilt.COUNTS["built"] == len(app.tools)
    finally:
        app.db.close()


def _refusals(app) -> list[str]:
    with open_tools(app) as tools:
        return [tools.error(name, **args) for name, args in BAD_CALLS]


def test_a_tool_built_on_its_first_call_refuses_bad_input_as_one_built_at_start(db_path, tmp_path, fresh,
                                                                              monkeypatch):
    lazy = _app(db_path)
    try:
        tool = next(t for t in lazy.tools if t.name == "create_task")
        assert "fn_metadata" not in tool.__dict__  # nothing built at start
        lazily = _refusals(lazy)
        assert "fn_metadata" in tool.__dict__
    finally:
        lazy.db.close()
    monkeypatch.setattr(calls, "_SHAPES", {})
    eager = _app(tmp_path / "eager.db")
    try:
        for tool in eager.tools:  # what the server did before #34: every tool built in full at start
            tool.fn.vp_shape.build()
        assert _refusals(eager) == lazily
    finally:
        eager.db.close()
    assert all("INVALID_ARGUMENT" in text for text in lazily)
    assert "priority" in lazily[1] and "taskId" in lazily[4] and "idempotencyKey" in lazily[7]


def test_a_stale_entry_is_never_listed(db_path, fresh, monkeypatch, capfd):
    real = prebuilt.stored()
    forged = {"properties": {"forged": {"type": "string"}}, "type": "object"}
    monkeypatch.setattr(prebuilt, "_stored", {
        **real,
        # another fingerprint: built at once, as without the file
        "send_message": {**real["send_message"], "fingerprint": "0" * 20, "parameters": forged},
        # the same fingerprint but another schema (a change the fingerprint cannot see): listed, then
        # replaced by the built one at the first call, with a line on stderr
        "check_messages": {**real["check_messages"], "parameters": forged},
    })
    app = _app(db_path)
    try:
        with open_tools(app) as tools:
            assert "forged" not in tools.listed["send_message"].input_schema["properties"]
            assert tools.listed["check_messages"].input_schema == forged
            tools.call("check_messages", recipient="bob")
        with open_tools(app) as tools:
            assert tools.listed["check_messages"].input_schema == real["check_messages"]["parameters"]
        assert "tool_schemas.json is stale for check_messages" in capfd.readouterr().err
    finally:
        app.db.close()


class _Inner(BaseModel):
    size: int = Field(ge=0)


class _Outer(BaseModel):
    inner: _Inner


def _sig(fn):
    import inspect

    return inspect.signature(fn, eval_str=True)


def test_the_fingerprint_sees_names_defaults_field_metadata_and_nested_models():
    def a(x: Annotated[str, Field(description="one")], y: int = 1) -> dict: ...
    def b(x: Annotated[str, Field(description="two")], y: int = 1) -> dict: ...
    def c(x: Annotated[str, Field(description="one")], y: int = 2) -> dict: ...
    def d(x: Annotated[str, Field(description="one")], z: int = 1) -> dict: ...
    def e(x: Annotated[str, Field(description="one")], y: int = 1) -> list: ...
    def f(x: Annotated[str, Field(description="one")], y: int = 1) -> dict: ...
    def g(o: _Outer, made: list = Field(default_factory=lambda: [])) -> dict: ...  # noqa: B008
    def h(o: _Outer, made: list = Field(default_factory=lambda: [])) -> dict: ...  # noqa: B008

    prints = [prebuilt.fingerprint(_sig(fn)) for fn in (a, b, c, d, e)]
    assert len(set(prints)) == 5
    assert prebuilt.fingerprint(_sig(f)) == prints[0]
    before = prebuilt.fingerprint(_sig(g))
    assert prebuilt.fingerprint(_sig(h)) == before  # a function's address is not part of it
    prebuilt._TYPES.pop(_Inner)
    prebuilt._TYPES.pop(_Outer)
    _Inner.model_fields["size"].metadata.clear()  # a nested model's constraint changes
    try:
        assert prebuilt.fingerprint(_sig(g)) != before
    finally:
        prebuilt._TYPES.pop(_Inner)
        prebuilt._TYPES.pop(_Outer)


_PROBE = """
import json, os, sys
import anyio
from vantage_peers.pipeline import prebuilt
from vantage_peers.pipeline.settings import Settings
from vantage_peers.server import create_app
app = create_app(Settings.from_env({"VP_DB_PATH": sys.argv[1], "VP_SCHEDULER": "off", "VP_EMBEDDINGS": "none",
                                    "VP_TOOLSETS": sys.argv[2]}, dotenv=False))
at_start = dict(prebuilt.COUNTS)
listed = anyio.run(app.mcp.list_tools)
print(json.dumps({"atStart": at_start, "afterList": prebuilt.COUNTS, "listed": len(listed),
                  "tools": len(app.tools)}))
app.db.close()
"""


@pytest.mark.slow
def test_a_new_process_prepares_only_the_enabled_toolsets_tools_all_from_the_file(tmp_path):
    out = {}
    for sets in ("all", "core"):
        run = subprocess.run([sys.executable, "-c", _PROBE, str(tmp_path / "vp.db"), sets], cwd=REPO,
                             capture_output=True, text=True, timeout=300, check=True)
        out[sets] = json.loads(run.stdout.strip().splitlines()[-1])
    for sets, seen in out.items():
        assert seen["atStart"] == {"listed": 0, "built": 0}, sets  # nothing prepared before a listing
        # every listed tool from the file (its fingerprint is stable across processes), none built
        assert seen["afterList"] == {"listed": seen["listed"], "built": 0}, sets
    assert out["all"]["listed"] == out["all"]["tools"]
    core = out["core"]
    assert core["tools"] == out["all"]["tools"]  # every tool still registered (enable_toolset adds them)
    assert core["afterList"]["listed"] < out["all"]["afterList"]["listed"]


def _prepared(app) -> int:
    """How many of the app's tools have their schemas (listed from the file, or built)."""
    return sum(1 for tool in app.tools if tool.fn.vp_shape.parameters is not None)


def test_core_prepares_fewer_tools_than_all_and_enable_toolset_prepares_the_rest(db_path, tmp_path, fresh,
                                                                                 monkeypatch):
    from vantage_peers.pipeline.toolsets import parse_toolsets

    prepared = {}
    for sets, path in (("core", db_path), ("all", tmp_path / "all.db")):
        monkeypatch.setattr(calls, "_SHAPES", {})
        app = _app(path, toolsets=parse_toolsets(sets))
        try:
            assert _prepared(app) == 0  # registering prepares nothing
            with open_tools(app) as tools:
                prepared[sets] = _prepared(app)
                assert prepared[sets] == len(tools.listed)
                if sets == "core":
                    added = tools.call("enable_toolset", name="records")["added"]
                    assert _prepared(app) == prepared["core"]  # until they are listed
            if sets == "core":
                with open_tools(app) as tools:
                    assert _prepared(app) == prepared["core"] + len(added)
                    assert set(added) <= set(tools.listed)
        finally:
            app.db.close()
    assert prepared["core"] < prepared["all"] == len(app.tools)


def test_a_signature_is_shared_by_closures_of_one_code_with_the_same_defaults():
    from vantage_peers.pipeline.prebuilt import signature_of

    def make(default: str):
        def body(a: int, b: str = default) -> dict[str, int]:
            return {b: a}
        return body

    first, same, other = make("x"), make("x"), make("y")
    assert signature_of(first) is signature_of(same)  # built once: every app's closure reuses it
    assert signature_of(other).parameters["b"].default == "y"  # other defaults: its own signature
    assert signature_of(first).parameters["b"].default == "x"
    assert signature_of(first).parameters["a"].annotation is int  # string annotations evaluated
    assert signature_of(first).return_annotation == dict[str, int]
