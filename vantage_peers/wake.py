"""`vantage-peers wait`: block until something new is there for this agent, print a short digest.

"New" is decided on keys: an unread receipt is `rcp:<id>:<deliveryAttempt>` (a redelivery is a new
key), a task waiting for the agent is `task:<id>` while it is `todo` (assigned, or back from
blocked). A waiter reports keys it has not reported before; keys that are no longer pending are
forgotten, so a task that is blocked and unblocked again, or a message redelivered, is new again.
Without `--state` the baseline is what is pending when the command starts; with `--state FILE` it
is what the previous run reported (the plugin hooks keep one file per session, which is why a
hook never wakes a session twice for the same thing, nor on its own output).

Waiting is a `db.watch.Watcher`: the data is queried only after another connection commits.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from .db import Database
from .domains.messaging.inbox import DIGEST_MAX_BYTES, KINDS, PREFIX, digest, pending

EXIT_TIMEOUT = 3


def _load_state(path: Path | None) -> set[str] | None:
    if path is None:
        return None
    try:
        keys = json.loads(path.read_text(encoding="utf-8")).get("reported", [])
        return {k for k in keys if isinstance(k, str)}
    except (OSError, ValueError, AttributeError):
        return set()  # no file yet (or unreadable): nothing reported so far


def _save_state(path: Path | None, keys: set[str]) -> None:
    if path is None:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps({"reported": sorted(keys), "at": int(time.time() * 1000)}), encoding="utf-8")
    tmp.replace(path)  # atomic: two hooks of one session never see half a file


def wait_for_new(db: Database, *, who: str, instance: str | None, kinds: tuple[str, ...], timeout: float | None,
                 state: Path | None = None, interval: float = 0.2) -> list[dict[str, Any]] | None:
    """The new items (non-empty), or None on timeout."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with db.watcher(interval=interval) as watcher:
        current = pending(db, who=who, instance=instance, kinds=kinds)
        reported = _load_state(state)
        seen = reported if reported is not None else {i["key"] for i in current}
        prefixes = tuple(PREFIX[k] for k in kinds)  # keys of kinds not watched now are kept as they are
        while True:
            keys = {i["key"] for i in current}
            # Forget what is no longer pending: it may come back as new (unblocked, redelivered).
            seen = {k for k in seen if k in keys or not k.startswith(prefixes)}
            new = [i for i in current if i["key"] not in seen]
            if new:
                _save_state(state, seen | {i["key"] for i in new})
                return new
            if reported is not None:
                _save_state(state, seen)
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            if not watcher.wait(left):
                return None
            current = pending(db, who=who, instance=instance, kinds=kinds)


def run_wait(*, kinds_text: str, timeout: float | None, as_json: bool, state: str | None) -> int:
    from .errors import InvalidArgument
    from .settings import Settings

    settings = Settings.from_env()
    who = settings.orchestrator
    if not who:
        raise InvalidArgument("VP_ORCHESTRATOR is required: whose messages and tasks should wait wait for?")
    kinds = tuple(k.strip() for k in kinds_text.split(",") if k.strip())
    if not kinds or set(kinds) - set(KINDS):
        raise InvalidArgument(f"--for takes a comma list of {', '.join(KINDS)}, got {kinds_text!r}")
    if timeout is not None and timeout < 0:
        raise InvalidArgument("--timeout must be 0 or more seconds (0 checks once)")
    from .db import open_database

    db = open_database(settings)  # creates/migrates the file when needed, like every command
    try:
        new = wait_for_new(db, who=who, instance=settings.instance_id, kinds=kinds, timeout=timeout,
                           state=Path(state).expanduser() if state else None)
    finally:
        db.close()
    if new is None:
        return EXIT_TIMEOUT
    text = digest(new, who)
    if as_json:
        items = [{k: v for k, v in i.items() if k not in ("key", "text")} | {"text": str(i["text"] or "")[:100]}
                 for i in new[:10]]
        doc = {"orchestrator": who, "instanceId": settings.instance_id, "count": len(new), "digest": text,
               "items": items}
        line = json.dumps(doc, ensure_ascii=False)
        while len(line.encode()) > DIGEST_MAX_BYTES and doc["items"]:
            doc["items"].pop()  # the digest text alone always fits
            line = json.dumps(doc, ensure_ascii=False)
        if len(line.encode()) > DIGEST_MAX_BYTES:
            doc["digest"] = text.encode()[:DIGEST_MAX_BYTES // 2].decode("utf-8", "ignore")
            line = json.dumps(doc, ensure_ascii=False)
        print(line)
    else:
        print(text)
    sys.stdout.flush()
    return 0
