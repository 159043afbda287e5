"""Standard 5-field cron through croniter, read in UTC or an IANA timezone, DST-correct.

The expression is matched against the *local wall clock* of the template's timezone. Two days a
year that clock is not a plain line, and the rules are those of Vixie cron:

- Spring forward (a local hour does not exist): an occurrence inside the gap fires once at the
  first local minute after it (`30 2 * * *` Europe/Paris fires at 03:00 CEST that day), unless the
  hour field is a wildcard (`*/30 * * * *`), whose runs simply continue on the new clock.
- Fall back (a local hour happens twice): an occurrence in the repeated hour fires once, on the
  first pass; a wildcard hour field (`*/30 * * * *`, `0 * * * *`) fires on both passes, so an
  "every 30 minutes" template stays every 30 real minutes.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from .errors import InvalidArgument

EPOCH = datetime(1970, 1, 1)
FIELDS = "minute hour day-of-month month day-of-week"
EXAMPLES = ("'0 9 * * *' (daily 09:00), '0 9 * * 1-5' (weekdays 09:00), '0 0 1 * *' (first of the month), "
            "'*/30 * * * *' (every 30 minutes)")
_MONTHS = {"jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"}
_DAYS = {"sun", "mon", "tue", "wed", "thu", "fri", "sat"}
_ITEM = re.compile(r"^(\*|[0-9a-z]+(-[0-9a-z]+)?)(/[0-9]+)?$")
_WORD = re.compile(r"[a-z]+")
MAX_EXPRESSION = 200
NEAR_TRANSITION = timedelta(hours=3)  # larger than any UTC-offset change in the tz database


def _bad_cron(why: str) -> InvalidArgument:
    return InvalidArgument(f"cronExpression: {why}; use standard 5-field cron '{FIELDS}', e.g. {EXAMPLES}")


def croniter(expression: str, start: datetime) -> Any:
    """croniter, imported on first use: only the scheduler and the recurring tools read cron, and
    the import (with dateutil) is off the start-up path of a stdio server (#34)."""
    from croniter import croniter as make

    return make(expression, start)


def parse_cron(value: Any) -> str:
    """The expression with single spaces, or INVALID_ARGUMENT naming what is wrong, with examples."""
    if not isinstance(value, str) or not value.strip():
        raise _bad_cron("must be a non-empty string")
    if len(value) > MAX_EXPRESSION:
        raise _bad_cron(f"is longer than {MAX_EXPRESSION} characters")
    fields = value.split()
    if len(fields) != 5:
        raise _bad_cron(f"{value!r} has {len(fields)} field(s), a standard cron has 5 ({FIELDS}); "
                        "macros such as @daily and a seconds field are not supported")
    for index, field in enumerate(fields):
        for item in field.lower().split(","):
            if not _ITEM.match(item):
                raise _bad_cron(f"{FIELDS.split()[index]} field {field!r} is not of the form *, N, N-M, */S, "
                                "N-M/S or a comma list of them")
            names = _MONTHS if index == 3 else _DAYS if index == 4 else set()
            for word in _WORD.findall(item):
                if word not in names:
                    raise _bad_cron(f"{FIELDS.split()[index]} field {field!r}: {word!r} is not allowed there "
                                    "(names: jan-dec for months, sun-sat for days of the week)")
    expression = " ".join(fields)
    from croniter.croniter import CroniterError

    try:
        croniter(expression, EPOCH).get_next(datetime)
    except CroniterError as exc:
        message = str(exc)
        if "failed to find" in message.lower():
            raise _bad_cron(f"{value!r} never fires (no such date)") from None
        raise _bad_cron(f"{value!r} is not valid: {message}") from None
    except (ValueError, KeyError, IndexError, OverflowError) as exc:
        raise _bad_cron(f"{value!r} is not valid: {exc}") from None
    return expression


def parse_timezone(value: Any) -> str:
    """An IANA zone name (`Europe/Paris`, `UTC`), or INVALID_ARGUMENT."""
    hint = "an IANA zone name such as 'UTC', 'Europe/Paris' or 'America/New_York'"
    if value is None:
        return "UTC"
    if not isinstance(value, str) or not value.strip() or len(value) > 100:
        raise InvalidArgument(f"timezone must be {hint}")
    name = value.strip()
    # Files of the system tz directory that are not zone names: the machine's own zone (it would
    # mean something else on each machine) and the leap-second / POSIX variants.
    if name in ("localtime", "posixrules") or name.startswith(("right/", "posix/")):
        raise InvalidArgument(f"timezone {value!r} is not a portable zone name; use {hint}")
    try:
        return ZoneInfo(name).key
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise InvalidArgument(f"timezone {value!r} is not a known timezone; use {hint}") from None


@dataclass(frozen=True)
class Schedule:
    expression: str
    timezone: str
    tz: ZoneInfo
    hour_wildcard: bool  # the hour field starts with '*' (Vixie cron's rule for DST days)


@functools.lru_cache(maxsize=4096)
def schedule(expression: str, timezone: str = "UTC") -> Schedule:
    """A parsed schedule (cached: the scheduler asks for the same few schedules every tick)."""
    expression = parse_cron(expression)
    name = parse_timezone(timezone)
    return Schedule(expression, name, ZoneInfo(name), expression.split()[1].startswith("*"))


def to_ms(moment: datetime) -> int:
    """An aware datetime as Unix ms."""
    delta = moment.astimezone(UTC).replace(tzinfo=None) - EPOCH
    return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000


def from_ms(ms: int) -> datetime:
    return (EPOCH + timedelta(milliseconds=ms)).replace(tzinfo=UTC)


def _exists(naive: datetime, tz: ZoneInfo) -> bool:
    return naive.replace(tzinfo=tz).astimezone(UTC).astimezone(tz).replace(tzinfo=None) == naive


def _instants(naive: datetime, sched: Schedule) -> list[int]:
    """The UTC instants (ms) at which the local wall time `naive` fires, per the DST rules above."""
    tz = sched.tz
    if not _exists(naive, tz):  # inside a spring-forward gap
        if sched.hour_wildcard:
            return []
        later = naive
        for _ in range(48 * 60):  # the first existing local minute after the gap
            later += timedelta(minutes=1)
            if _exists(later, tz):
                return [to_ms(later.replace(tzinfo=tz))]
        return []
    first = to_ms(naive.replace(tzinfo=tz, fold=0))
    second = to_ms(naive.replace(tzinfo=tz, fold=1))
    if second != first and sched.hour_wildcard:  # a repeated (fall-back) wall time
        return [first, second]
    return [first]


def next_after(sched: Schedule, after_ms: int) -> int:
    """The first occurrence strictly after `after_ms` (Unix ms)."""
    after = from_ms(after_ms)
    if sched.timezone == "UTC":
        nxt = croniter(sched.expression, after.replace(tzinfo=None)).get_next(datetime)
        return to_ms(nxt.replace(tzinfo=UTC))
    tz = sched.tz
    local = after.astimezone(tz).replace(tzinfo=None)
    offsets = {(after + d).astimezone(tz).utcoffset() for d in (-NEAR_TRANSITION, timedelta(0), NEAR_TRANSITION)}
    # Near a fall-back the next instant can have an earlier wall time than `after`: start earlier.
    start = local - NEAR_TRANSITION if len(offsets) > 1 else local
    it = croniter(sched.expression, start)
    best: int | None = None
    while True:
        instants = _instants(it.get_next(datetime), sched)
        if not instants:
            continue
        # The first-pass instant grows with the wall time, so nothing later can beat `best`.
        if best is not None and min(instants) >= best:
            return best
        for moment in instants:
            if moment > after_ms and (best is None or moment < best):
                best = moment


def occurrences(sched: Schedule, start_ms: int, end_ms: int) -> list[int]:
    """Every occurrence in (start_ms, end_ms], in order."""
    out, moment = [], start_ms
    while True:
        moment = next_after(sched, moment)
        if moment > end_ms:
            return out
        out.append(moment)
