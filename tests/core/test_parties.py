"""The parties declarations as the RBAC helpers read them (core/parties.py, core/rbac.py)."""

from __future__ import annotations

import pytest

from vantage_peers.core import parties, rbac
from vantage_peers.core.errors import Forbidden
from vantage_peers.core.rbac import Actor

TASK = {"id": "tsk_1", "createdBy": "alice", "assignedTo": "bob"}


def test_the_parties_of_a_verb_come_from_the_declaration():
    assert parties.of("task", TASK, "change") == {"creator": "alice", "assignee": "bob"}
    assert parties.of("task", TASK, "force") == {"creator": "alice"}
    assert parties.names("mandate", {"requestedBy": "a", "fulfilledBy": "f"}, "settle") == ["a"]
    assert parties.names("mandate", {"requestedBy": "a", "fulfilledBy": "f"}, "step") == ["f"]
    assert parties.names("path reservation", {"holder": "alice"}, "force") == []  # operators only


def test_require_record_admits_parties_and_operators_only():
    rbac.require_record("bob", "task", TASK, "change", action="update", what="task tsk_1")
    rbac.require_record(parties.SYSTEM, "task", TASK, "force", action="delete", what="task tsk_1")
    rbac.require_record(Actor(identity="carol", master=True), "task", TASK, "force", action="delete", what="t")
    with pytest.raises(Forbidden, match=r"bob may not delete task tsk_1: only its creator \(alice\), system may"):
        rbac.require_record("bob", "task", TASK, "force", action="delete", what="task tsk_1")


def test_system_is_spelled_once():
    assert rbac.SYSTEM is parties.SYSTEM == "system"


def test_the_markdown_table_has_a_row_per_kind():
    rows = [line for line in parties.markdown().splitlines() if line.startswith("| ")][1:]
    assert len(rows) == len(parties.KINDS)
    assert any(r.startswith("| path reservation") and "operators only" in r for r in rows)
