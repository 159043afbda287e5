"""Recurring templates at the store level with an injected clock: exact occurrences over a week of
ticks (DST included), catch-up after downtime, resume without burst, schedule changes, upgrade."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from vantage_peers.core import cron
from vantage_peers.core.errors import InvalidArgument
from vantage_peers.db import Database, migrate
from vantage_peers.domains.recurring import store
from vantage_peers.domains.tasks import store as tasks_store

pytestmark = pytest.mark.backends

MIN = 60_000


def ms(*parts: int) -> int:
    return cron.to_ms(datetime(*parts, tzinfo=UTC))


def make(db: Database, expr: str, tz: str | None = None, *, now: int, title: str | None = None) -> str:
    payload = {"title": title or f"{expr} {tz}", "assignedTo": "sigma", "cronExpression": expr, "timezone": tz,
               "priority": "low", "project": "studio/acme", "createdBy": "pi"}
    return db.write(lambda c: store.create(c, payload=payload, now=now))


def runs(db: Database, template_id: str) -> list[int]:
    return [r["scheduledAt"] for r in db.read(lambda c: c.query(
        "SELECT scheduledAt FROM recurringRuns WHERE recurringTaskId = ? ORDER BY scheduledAt", (template_id,)))]


def task_count(db: Database, template_id: str) -> int:
    return db.read(lambda c: c.scalar("SELECT count(*) FROM tasks WHERE recurringTaskId = ?", (template_id,)))


def tick_week(db: Database, start: int, *, step_minutes: int = 5, days: int = 7) -> int:
    now = start
    end = start + days * 1440 * MIN
    while now < end:
        now += step_minutes * MIN
        store.fire_due(db, now=now)
    return end


def test_spring_week_gives_exactly_the_expected_occurrences(db):
    # Thursday 2026-03-26 00:00 UTC for 7 days: Paris springs forward on Sunday 29 March at 01:00 UTC,
    # and 1 April is a first of the month.
    start = ms(2026, 3, 26)
    ids = {
        "half_hour": make(db, "*/30 * * * *", now=start),
        "weekdays": make(db, "0 9 * * 1-5", now=start),
        "first": make(db, "0 0 1 * *", now=start),
        "paris_9": make(db, "0 9 * * *", "Europe/Paris", now=start),
        "paris_0230": make(db, "30 2 * * *", "Europe/Paris", now=start),
        "paris_half_hour": make(db, "*/30 * * * *", "Europe/Paris", now=start),
    }
    end = tick_week(db, start)
    assert runs(db, ids["half_hour"]) == [start + i * 30 * MIN for i in range(1, 7 * 48 + 1)]
    assert runs(db, ids["weekdays"]) == [ms(2026, 3, 26, 9), ms(2026, 3, 27, 9), ms(2026, 3, 30, 9),
                                         ms(2026, 3, 31, 9), ms(2026, 4, 1, 9)]
    assert runs(db, ids["first"]) == [ms(2026, 4, 1)]
    # 09:00 Paris: 08:00 UTC in winter time, 07:00 UTC from Sunday on; once a day.
    assert runs(db, ids["paris_9"]) == [ms(2026, 3, 26, 8), ms(2026, 3, 27, 8), ms(2026, 3, 28, 8),
                                        ms(2026, 3, 29, 7), ms(2026, 3, 30, 7), ms(2026, 3, 31, 7),
                                        ms(2026, 4, 1, 7)]
    # 02:30 does not exist on the 29th: it fires once at 03:00 CEST (01:00 UTC).
    assert runs(db, ids["paris_0230"]) == [ms(2026, 3, 26, 1, 30), ms(2026, 3, 27, 1, 30), ms(2026, 3, 28, 1, 30),
                                           ms(2026, 3, 29, 1), ms(2026, 3, 30, 0, 30), ms(2026, 3, 31, 0, 30),
                                           ms(2026, 4, 1, 0, 30)]
    # Every 30 minutes stays every 30 real minutes through the change.
    assert runs(db, ids["paris_half_hour"]) == [start + i * 30 * MIN for i in range(1, 7 * 48 + 1)]
    for template_id in ids.values():
        assert task_count(db, template_id) == len(runs(db, template_id))
        row = db.read(lambda c, t=template_id: store.get(c, template_id=t))
        assert row["runCount"] == len(runs(db, template_id)) and row["nextRunAt"] > end
        assert row["lastTaskId"].startswith("tsk_") and row["lastTriggered"] <= end


def test_fall_week_in_new_york(db):
    # Thursday 2026-10-29 for 7 days: 1 November is a first of the month and New York falls back
    # at 06:00 UTC (01:00-02:00 local happens twice).
    start = ms(2026, 10, 29)
    ids = {
        "first": make(db, "0 0 1 * *", now=start),
        "ny_0130": make(db, "30 1 * * *", "America/New_York", now=start),
        "ny_half_hour": make(db, "*/30 * * * *", "America/New_York", now=start),
        "ny_weekdays": make(db, "0 9 * * 1-5", "America/New_York", now=start),
    }
    tick_week(db, start)
    assert runs(db, ids["first"]) == [ms(2026, 11, 1)]
    # 01:30 local once a day: EDT (05:30 UTC) until the change, the first pass on the 1st, then EST.
    assert runs(db, ids["ny_0130"]) == [ms(2026, 10, 29, 5, 30), ms(2026, 10, 30, 5, 30), ms(2026, 10, 31, 5, 30),
                                        ms(2026, 11, 1, 5, 30), ms(2026, 11, 2, 6, 30), ms(2026, 11, 3, 6, 30),
                                        ms(2026, 11, 4, 6, 30)]
    assert runs(db, ids["ny_half_hour"]) == [start + i * 30 * MIN for i in range(1, 7 * 48 + 1)]
    assert runs(db, ids["ny_weekdays"]) == [ms(2026, 10, 29, 13), ms(2026, 10, 30, 13), ms(2026, 11, 2, 14),
                                            ms(2026, 11, 3, 14), ms(2026, 11, 4, 14)]


def test_paris_falls_back_and_still_fires_once_a_day(db):
    # Europe/Paris falls back on Sunday 25 October 2026 at 01:00 UTC (03:00 CEST -> 02:00 CET).
    start = ms(2026, 10, 23)
    nine = make(db, "0 9 * * *", "Europe/Paris", now=start)
    half_past_two = make(db, "30 2 * * *", "Europe/Paris", now=start)
    tick_week(db, start, days=4)
    assert runs(db, nine) == [ms(2026, 10, 23, 7), ms(2026, 10, 24, 7), ms(2026, 10, 25, 8), ms(2026, 10, 26, 8)]
    # 02:30 happens twice on the 25th: only the first pass (00:30 UTC) fires.
    assert runs(db, half_past_two) == [ms(2026, 10, 23, 0, 30), ms(2026, 10, 24, 0, 30), ms(2026, 10, 25, 0, 30),
                                       ms(2026, 10, 26, 1, 30)]


def test_created_task_carries_the_template(db):
    start = ms(2026, 5, 4, 8, 59)
    template_id = make(db, "0 9 * * *", now=start, title="Daily standup report")
    assert store.fire_due(db, now=start + 30_000) == {"fired": 0, "taskIds": []}
    fired = store.fire_due(db, now=ms(2026, 5, 4, 9, 0, 10))
    assert fired["fired"] == 1
    task = db.read(lambda c: tasks_store.get_task(c, task_id=fired["taskIds"][0]))
    assert task["title"] == "Daily standup report" and task["status"] == "todo"
    assert task["assignedTo"] == "sigma" and task["priority"] == "low" and task["project"] == "studio/acme"
    assert task["createdBy"] == f"cron-{template_id}" and task["recurringTaskId"] == template_id
    hidden = db.read(lambda c: tasks_store.list_tasks(c, limit=50, cursor=None, fields="full",
                                                      exclude_auto_generated=True))
    assert hidden["items"] == []
    # The same instant ticked again (another process, a retry) creates nothing more.
    assert store.fire_due(db, now=ms(2026, 5, 4, 9, 0, 10))["fired"] == 0
    # Deleting the template keeps the task and its link.
    db.write(lambda c: store.delete(c, template_id=template_id, caller="pi"))
    assert db.read(lambda c: tasks_store.get_task(c, task_id=fired["taskIds"][0]))["recurringTaskId"] == template_id


def test_catch_up_fires_once_for_the_missed_window(db):
    start = ms(2026, 6, 1)
    hourly = make(db, "0 * * * *", now=start)
    daily = make(db, "0 9 * * *", now=start)
    back = ms(2026, 6, 4, 10, 17)  # every server was down for three days
    assert store.fire_due(db, now=back)["fired"] == 2
    assert runs(db, hourly) == [ms(2026, 6, 1, 1)] and runs(db, daily) == [ms(2026, 6, 1, 9)]
    rows = {t: db.read(lambda c, t=t: store.get(c, template_id=t)) for t in (hourly, daily)}
    assert rows[hourly]["nextRunAt"] == ms(2026, 6, 4, 11) and rows[daily]["nextRunAt"] == ms(2026, 6, 5, 9)
    assert store.fire_due(db, now=back + MIN)["fired"] == 0


def test_pause_and_resume_recompute_from_now(db):
    start = ms(2026, 6, 1)
    template_id = make(db, "*/30 * * * *", now=start)
    paused = db.write(lambda c: store.pause(c, template_id=template_id, caller="pi", now=start + MIN))
    assert paused["paused"] is True and "nextRunAt" not in paused
    assert store.fire_due(db, now=ms(2026, 6, 3))["fired"] == 0
    resumed = db.write(lambda c: store.resume(c, template_id=template_id, caller=None, now=ms(2026, 6, 3, 0, 10)))
    assert resumed["paused"] is False and resumed["nextRunAt"] == ms(2026, 6, 3, 0, 30)
    assert store.fire_due(db, now=ms(2026, 6, 3, 0, 29))["fired"] == 0  # no burst of missed runs
    assert store.fire_due(db, now=ms(2026, 6, 3, 0, 30))["fired"] == 1
    # Pausing and resuming twice change nothing more.
    db.write(lambda c: store.resume(c, template_id=template_id, caller=None, now=ms(2026, 6, 3, 0, 31)))
    assert db.read(lambda c: store.get(c, template_id=template_id))["nextRunAt"] == ms(2026, 6, 3, 1)


def test_schedule_change_recomputes_next_run(db):
    start = ms(2026, 6, 1)
    template_id = make(db, "0 9 * * *", now=start)
    now = ms(2026, 6, 1, 7, 10)
    row = db.write(lambda c: store.update(c, template_id=template_id, payload={"title": "renamed"}, caller="pi",
                                          now=now))
    assert row["nextRunAt"] == ms(2026, 6, 1, 9)  # a title change keeps the schedule
    row = db.write(lambda c: store.update(c, template_id=template_id, payload={"cronExpression": "*/15 * * * *"},
                                          caller="pi", now=now))
    assert row["nextRunAt"] == ms(2026, 6, 1, 7, 15)
    row = db.write(lambda c: store.update(c, template_id=template_id, payload={"cronExpression": "0 9 * * *",
                                          "timezone": "Asia/Tokyo"}, caller="pi", now=now))
    assert row["nextRunAt"] == ms(2026, 6, 2, 0) and row["timezone"] == "Asia/Tokyo"


def test_a_template_broken_by_hand_does_not_stop_the_others(db):
    start = ms(2026, 6, 1)
    good = make(db, "* * * * *", now=start)
    bad = make(db, "* * * * *", now=start)
    db.write(lambda c: c.execute("UPDATE recurringTasks SET cronExpression = 'nonsense' WHERE id = ?", (bad,)))
    assert store.fire_due(db, now=start + MIN)["fired"] == 1
    assert runs(db, good) == [start + MIN] and runs(db, bad) == []
    # Repaired, it fires on the next tick (catch-up: once).
    db.write(lambda c: c.execute("UPDATE recurringTasks SET cronExpression = '* * * * *' WHERE id = ?", (bad,)))
    assert store.fire_due(db, now=start + 3 * MIN)["fired"] == 2


@pytest.mark.parametrize("expr", ["* * * *", "* * * * * *", "@daily", "61 * * * *", "0 25 * * *", "0 0 30 2 *",
                                  "H * * * *", "0 9 * * L", "0 9 ? * *", "*/0 * * * *", "", "   ", "0 9 * * mon#2"])
def test_bad_cron_is_refused_with_an_example(expr):
    with pytest.raises(InvalidArgument) as info:
        cron.parse_cron(expr)
    message = str(info.value)
    assert message.startswith("INVALID_ARGUMENT: cronExpression: ") and "'0 9 * * *'" in message


def test_names_and_lists_are_standard_cron():
    assert cron.parse_cron(" 0  9 * jan,jul mon-fri ") == "0 9 * jan,jul mon-fri"
    sched = cron.schedule("0 9 * * 7")  # 7 is Sunday too
    assert cron.next_after(sched, ms(2026, 6, 1)) == ms(2026, 6, 7, 9)


def test_upgrade_from_version_5_keeps_tasks(tmp_path):
    db = Database(tmp_path / "old.db")
    assert migrate(db, target=5) == 5
    db.write(lambda c: tasks_store.create_task(c, payload={"title": "old", "assignedTo": "pi", "priority": "high",
                                                           "createdBy": "pi"}, now=1))
    migrate(db)
    rows = db.read(lambda c: c.query("SELECT title, recurringTaskId FROM tasks"))
    assert rows == [{"title": "old", "recurringTaskId": None}]
    start = ms(2026, 6, 1)
    template_id = make(db, "* * * * *", now=start)
    assert store.fire_due(db, now=start + MIN)["fired"] == 1 and runs(db, template_id) == [start + MIN]
    db.close()


def test_next_after_is_strictly_after_and_matches_a_brute_force_walk():
    # A brute-force reference for the DST rules: walk every UTC minute and read the local clock.
    for expr, zone in (("*/30 * * * *", "Europe/Paris"), ("30 2 * * *", "Europe/Paris"),
                       ("0 * * * *", "America/New_York"), ("15 1 * * *", "America/New_York")):
        sched = cron.schedule(expr, zone)
        for day in (datetime(2026, 3, 29, tzinfo=UTC), datetime(2026, 10, 25, tzinfo=UTC),
                    datetime(2026, 3, 8, tzinfo=UTC), datetime(2026, 11, 1, tzinfo=UTC)):
            start = cron.to_ms(day - timedelta(hours=6))
            end = start + 18 * 60 * MIN
            expected = _brute_force(expr, zone, start, end)
            assert cron.occurrences(sched, start, end) == expected, (expr, zone, day)


def _brute_force(expr: str, zone: str, start: int, end: int) -> list[int]:
    from zoneinfo import ZoneInfo

    minute, hour = expr.split()[:2]
    tz = ZoneInfo(zone)

    def match(value: int, field: str) -> bool:
        if field == "*":
            return True
        if field.startswith("*/"):
            return value % int(field[2:]) == 0
        return value == int(field)

    out, seen_local = [], set()
    moment = start + MIN
    while moment <= end:
        local = cron.from_ms(moment).astimezone(tz)
        previous = cron.from_ms(moment - MIN).astimezone(tz)
        naive = local.replace(tzinfo=None)
        if match(local.minute, minute) and match(local.hour, hour):
            if hour.startswith("*") or naive not in seen_local:
                out.append(moment)
            seen_local.add(naive)
        elif not hour.startswith("*") and local.utcoffset() > previous.utcoffset():
            # Spring forward: the skipped wall times fire at the first minute after the gap.
            skipped = previous.replace(tzinfo=None) + timedelta(minutes=1)
            while skipped < naive:
                if match(skipped.minute, minute) and match(skipped.hour, hour):
                    out.append(moment)
                    break
                skipped += timedelta(minutes=1)
        moment += MIN
    return out
