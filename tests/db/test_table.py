"""The document-table helper (db/table.py), the record checks of validators.py and rbac.require_party."""

from __future__ import annotations

import pytest

from vantage_peers.core.errors import Forbidden, InvalidArgument, NotFound
from vantage_peers.core.rbac import require_party
from vantage_peers.core.validators import iso_date, json_object, number, text, text_list
from vantage_peers.db.table import Table

pytestmark = pytest.mark.backends

NOTES = Table(name="briefingNotes", prefix="brf", label="briefing note", json_cols=("participants", "decisions"))


def test_table_insert_get_patch_delete_page(db):
    values = {"title": "t", "topic": "x", "participants": ["a", "b"], "content": "c", "createdBy": "pi"}
    ids = [db.write(lambda c: NOTES.insert(c, values)) for _ in range(5)]
    doc = db.read(lambda c: NOTES.get(c, ids[0]))
    assert doc["participants"] == ["a", "b"] and "decisions" not in doc and "seq" not in doc
    assert db.write(lambda c: NOTES.patch(c, ids[0], {"decisions": ["d"], "title": None})) == 1
    doc = db.read(lambda c: NOTES.get(c, ids[0]))
    assert doc["decisions"] == ["d"] and doc["title"] == "t"
    # compare-and-set: the condition is decided inside SQL
    assert db.write(lambda c: NOTES.patch(c, ids[0], {"title": "u"}, where="topic = ?", params=["y"])) == 0
    page = db.read(lambda c: NOTES.page(c, filters={"topic": "x", "createdBy": None}, limit=2))
    assert len(page["items"]) == 2 and page["nextCursor"]
    assert db.write(lambda c: NOTES.delete(c, ids[1])) is True
    assert db.write(lambda c: NOTES.delete(c, ids[1])) is False
    assert db.read(lambda c: NOTES.get(c, ids[1])) is None
    with pytest.raises(NotFound, match="briefing note"):
        db.read(lambda c: NOTES.require(c, "brf_missing"))
    with pytest.raises(ValueError):
        db.write(lambda c: NOTES.patch(c, ids[0], {"title = 'x'; --": 1}))


def test_argument_checks():
    assert text("  kept  \r\n", "f") == "  kept  \r\n"
    assert text(None, "f", required=False) is None
    assert text("", "f", allow_blank=True) == ""
    for bad in (None, "", "  ", 5, "\ud800", "x" * 11):
        with pytest.raises(InvalidArgument, match="f"):
            text(bad, "f", max_bytes=10)
    assert text_list(["a", "b"], "l") == ["a", "b"]
    with pytest.raises(InvalidArgument, match=r"l\[1\]"):
        text_list(["a", ""], "l")
    assert number(5.0, "n") == 5 and isinstance(number(5.0, "n"), int) and number(0.5, "n") == 0.5
    for bad in (True, "1", float("nan"), float("inf"), -1, 1e16):
        with pytest.raises(InvalidArgument, match="n"):
            number(bad, "n")
    with pytest.raises(InvalidArgument):
        number(0, "n", positive=True)
    assert iso_date("2024-02-29", "d") == "2024-02-29"
    for bad in ("2023-02-29", "2024-2-29", "２０２４-02-29", "2024-02-29\n", None):
        with pytest.raises(InvalidArgument):
            iso_date(bad, "d")
    assert json_object({"A1": 1}, "o") == {"A1": 1}
    for bad in ([1], "x", {"n": float("nan")}):
        with pytest.raises(InvalidArgument):
            json_object(bad, "o")


def test_require_party():
    require_party("a", ["a", None], action="do", role="owner")
    require_party("system", [], action="do", role="owner")
    with pytest.raises(Forbidden, match="only owner \\(a or system\\)"):
        require_party("b", ["a"], action="do", role="owner")
    with pytest.raises(Forbidden, match="only lead or creator \\(a or system\\)"):
        require_party("b", ["a", "a"], action="do", role="lead or creator")


RECORD_LISTS = ("list_diaries", "list_briefing_notes", "list_components", "list_mandates", "list_bus",
                "list_fix_patterns")


@pytest.mark.parametrize("payload", [
    {"t": [1], "i": "x"}, {"t": {"a": 1}, "i": "x"}, {"t": True, "i": "x"}, {"t": 10**30, "i": "x"},
    {"createdBefore": 10**30}, {"createdBefore": [1]},
])
def test_forged_cursors_are_clean_errors(tools, payload):
    """A decodable cursor holding a value SQLite cannot bind is refused, never an internal error."""
    import base64
    import json

    forged = base64.urlsafe_b64encode(json.dumps(payload).encode()).decode().rstrip("=")
    for tool in RECORD_LISTS:
        assert tools.error(tool, cursor=forged).endswith(
            "INVALID_ARGUMENT: cursor is not a cursor this server issued; pass nextCursor back unchanged"), tool
