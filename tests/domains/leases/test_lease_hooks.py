"""The hooks leases announce through (leases/hooks.py): the owner of a lease kind acts when one of
its leases lapses and renews it for its holder; leases never import that owner."""

from __future__ import annotations

import subprocess
import sys

import pytest

from vantage_peers.domains.leases import hooks, sweep
from vantage_peers.domains.leases import store as leases

T0 = 1_800_000_000_000


@pytest.fixture
def clean_hooks(monkeypatch):
    """The registries as they are, restored afterwards: a probe kind never outlives its test."""
    monkeypatch.setattr(hooks, "_lapse", dict(hooks._lapse))
    monkeypatch.setattr(hooks, "_renew", dict(hooks._renew))


def grant(db, kind: str, key: str, ttl: int = 1_000) -> dict:
    return db.write(lambda c: leases.grant(c, kind=kind, scope="", key=key, holder="bob", instance="b1",
                                           ttl=ttl, now=T0))


def test_a_registered_lapse_hook_runs_once_per_lapsed_lease(db, clean_hooks):
    seen: list[tuple[str, str, int]] = []

    def on_probe_lapse(conn, row, now):
        seen.append((row["key"], row["holder"], now))

    hooks.on_lapse("probe", on_probe_lapse)
    grant(db, "probe", "a")
    grant(db, "other", "b")  # a kind nobody registered simply lapses
    grant(db, "probe", "c", ttl=60_000)
    expired = db.write(lambda c: sweep.expire_due(c, now=T0 + 1_000))
    assert sorted(r["key"] for r in expired) == ["a", "b"]
    assert seen == [("a", "bob", T0 + 1_000)]
    assert db.write(lambda c: sweep.expire_due(c, now=T0 + 2_000)) == [] and len(seen) == 1  # once


def test_a_lapse_hook_runs_in_the_sweeps_transaction(db, clean_hooks):
    """A hook that fails undoes the expiry with it: the consequences and the expiry happen together."""
    def broken(conn, row, now):
        raise RuntimeError("the owner failed")

    hooks.on_lapse("probe", broken)
    grant(db, "probe", "a")
    with pytest.raises(RuntimeError, match="the owner failed"):
        db.write(lambda c: sweep.expire_due(c, now=T0 + 1_000))
    assert db.read(lambda c: leases.latest(c, kind="probe", scope="", key="a"))["releasedAt"] is None


def test_renew_goes_to_the_owner_of_the_kind(db, clean_hooks):
    calls = []
    hooks.on_renew("probe", lambda conn, *, key, holder, now: calls.append((key, holder, now)) or {"key": key})
    assert db.write(lambda c: hooks.renew(c, kind="probe", key="a", holder="bob", now=T0)) == {"key": "a"}
    assert calls == [("a", "bob", T0)]
    with pytest.raises(RuntimeError, match="'nobody'"):
        db.write(lambda c: hooks.renew(c, kind="nobody", key="a", holder="bob", now=T0))


@pytest.mark.slow  # a fresh interpreter importing the domains: ~5 s on a loaded machine
def test_leases_load_without_tasks_and_any_part_of_tasks_registers_the_claim_hooks():
    """A fresh process: leases alone pull in no task code; `wait --for work` imports only tasks/queue.py,
    and its sweep must still release a lapsed claim's task."""
    code = ("import sys\n"
            "from vantage_peers.domains.leases import hooks, paths, sweep, tools\n"
            "assert not [m for m in sys.modules if m.startswith('vantage_peers.domains.tasks')], 'leases import tasks'\n"
            "assert 'task' not in hooks._lapse\n"
            "import vantage_peers.domains.tasks.queue\n"
            "from vantage_peers.domains.tasks import claims\n"
            "assert hooks._lapse['task'] is claims.on_expired and 'task' in hooks._renew\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
