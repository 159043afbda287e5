"""`vantage-peers wait`: block until something new is there for this agent, print a short digest.

"New" is decided on keys: an unread receipt is `rcp:<id>:<deliveryAttempt>` (a redelivery is a new
key), a task waiting for the agent is `task:<id>` while it is `todo` (assigned, or back from
blocked); the kinds and their key prefixes come from `inbox.REGISTRY`. A waiter reports the
pending keys that its state file has not recorded as reported, then records them; keys that are no
longer pending are forgotten, so a task that is blocked and unblocked again, or a message
redelivered, is new again.

The state file is `--state FILE` (the plugin hooks keep one per session, which is why a hook never
wakes a session twice for the same thing, nor on its own output), else one per (database,
orchestrator, instance) in the user's state folder (`default_state_path`): what was pending
before the command started counts, and an earlier plain `wait` of the same agent is not repeated.
`--since-now` keeps no state: only what becomes pending after the start is new.

Waiting is a `db.watch.Watcher` (PostgreSQL: LISTEN): the data is queried only after another
connection commits. The watcher listens before the baseline is read, so nothing committed after
the "armed" line on stderr (and `--ready-fd`) can be missed.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .core.errors import InvalidArgument
from .db import Database
from .domains.messaging import inbox
from .domains.tasks import queue as _work  # noqa: F401  # registers the "work" kind (claimable tasks)

EXIT_TIMEOUT = 3
STATE_DIR_ENV = "VP_STATE_DIR"
URL_ENV, TOKEN_ENV = "VP_WAIT_URL", "VP_BEARER_TOKEN"  # `wait --url`, `--token`


# --- the state file -------------------------------------------------------------------------------

def check_state_file(path: Path, *, what: str) -> Path:
    """`path` if a state file can live there (its folder is created), else InvalidArgument (exit 2)."""
    if path.is_dir():
        raise InvalidArgument(f"{what} {path} is a directory; give a file path, e.g. {path / 'wait.json'}")
    if path.exists() and not path.is_file():
        raise InvalidArgument(f"{what} {path} is not a regular file")
    parent = path.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        raise InvalidArgument(f"{what} {path}: {parent} (or a folder above it) is a file, not a folder") from None
    except OSError as exc:
        raise InvalidArgument(f"{what} {path}: cannot create its folder {parent} ({exc.strerror or exc})") from None
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InvalidArgument(f"{what} {path}: its folder {parent} is not writable")
    if path.exists() and not os.access(path, os.R_OK):
        raise InvalidArgument(f"{what} {path} is not readable")
    return path


def load_state(path: Path, *, what: str) -> set[str]:
    """The keys reported so far (none when the file does not exist yet or is not ours to parse)."""
    try:
        keys = json.loads(path.read_text(encoding="utf-8")).get("reported", [])
    except FileNotFoundError:
        return set()
    except OSError as exc:
        raise InvalidArgument(f"{what} {path} cannot be read ({exc.strerror or exc})") from None
    except (ValueError, AttributeError):
        return set()  # not JSON, or not our object: start over rather than refuse to wait
    return {k for k in keys if isinstance(k, str)} if isinstance(keys, list) else set()


def save_state(path: Path, keys: set[str]) -> None:
    """Replace the file atomically (two hooks of one session never see half a file); never leaves the .tmp."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps({"reported": sorted(keys), "at": int(time.time() * 1000)}), encoding="utf-8")
        os.replace(tmp, path)
    except BaseException:  # an OSError, or a signal turned into an exception half-way
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _target_id(settings: Any) -> str:
    """The database as one stable string: the SQLite file's absolute path, or the URL without its password."""
    url = getattr(settings, "database_url", None)
    if not url:
        return "sqlite:" + str(Path(settings.db_path).expanduser().resolve())
    try:
        from psycopg.conninfo import conninfo_to_dict

        parts = {k: v for k, v in conninfo_to_dict(url).items() if k != "password"}
        return "postgresql:" + json.dumps(parts, sort_keys=True, default=str)
    except Exception:  # noqa: BLE001 - no driver, or a URL it cannot parse: the URL itself still names it
        return "postgresql:" + url


def _private_temp_dir() -> Path | None:
    """<temp>/vantage-peers-state-<uid>, created 0700, or None unless it is this user's alone (as the
    model host checks its folder: another local user must not be able to rewrite what we report)."""
    if not hasattr(os, "getuid"):
        return None  # Windows: the user's state folder is always writable there
    import stat

    base = Path(tempfile.gettempdir()) / f"vantage-peers-state-{os.getuid()}"
    try:
        base.mkdir(mode=0o700, exist_ok=True)
        st = os.lstat(base)
    except OSError:
        return None
    if not stat.S_ISDIR(st.st_mode) or st.st_uid != os.getuid() or st.st_mode & 0o077:
        return None
    return base


def default_state_path(settings: Any, who: str, instance: str | None, target: str | None = None) -> Path:
    """The state file of a `wait` without `--state`: one per (database, orchestrator, instance).

    In $VP_STATE_DIR/wait, else the user's state folder (platformdirs.user_state_dir, e.g.
    ~/.local/state/vantage-peers/wait); when that one cannot be written (a sandboxed agent), a
    private folder in the temp directory."""
    key = f"{target or _target_id(settings)}\0{who}\0{instance or ''}"  # target: `wait --url`'s server
    name = f"wait-{hashlib.sha256(key.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}.json"
    override = os.environ.get(STATE_DIR_ENV)
    if override:
        return check_state_file(Path(override).expanduser() / "wait" / name, what=f"{STATE_DIR_ENV}: the state file")
    import platformdirs

    tried = []
    for where in (lambda: Path(platformdirs.user_state_dir("vantage-peers")), _private_temp_dir):
        base = where()
        if base is None:
            continue
        try:
            return check_state_file(base / "wait" / name, what="the state file")
        except InvalidArgument as exc:
            tried.append(exc.detail)
    raise InvalidArgument(f"no folder for wait's state file ({'; '.join(tried)}): set {STATE_DIR_ENV} to a "
                          "writable folder, or pass --state FILE or --since-now")


# --- waiting ----------------------------------------------------------------------------------------

def wait_for_new(db: Database, *, who: str, instance: str | None, kinds: tuple[str, ...], timeout: float | None,
                 state: Path | None = None, interval: float = 0.2,
                 on_armed: Callable[[], None] | None = None,
                 report: Callable[[list[dict[str, Any]]], None] | None = None) -> list[dict[str, Any]] | None:
    """The new items (non-empty), or None on timeout.

    `state` None: new means not pending at the start (nothing is read or written). `on_armed` is
    called once, when nothing is new yet and the watcher is about to block: from then on every
    commit wakes it, so anything that becomes pending afterwards is reported. `report` shows the
    new items before the state file records them: a waiter killed in between (or whose stdout is
    gone) repeats them next time rather than losing them."""
    deadline = None if timeout is None else time.monotonic() + timeout
    with db.watcher(interval=interval) as watcher:  # listening before the baseline is read
        due = _refresh(db, kinds)
        current = inbox.pending(db, who=who, instance=instance, kinds=kinds)
        tracker = Tracker(kinds, state, current, report)
        armed = False
        while True:
            new = tracker.step(current)
            if new:
                return new
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return None
            if not armed:
                armed = True
                if on_armed is not None:
                    on_armed()
            # A claim that lapses changes what is claimable without a commit: wake by then too.
            pause = left if due is None else max(0.05, due) if left is None else min(left, max(0.05, due))
            if not watcher.wait(pause) and (deadline is None or time.monotonic() >= deadline) and due is None:
                return None
            due = _refresh(db, kinds)
            current = inbox.pending(db, who=who, instance=instance, kinds=kinds)


class Tracker:
    """What a waiter reported: pending keys its state file has not recorded are new (also used by
    `wait --url`, http/push_client.py, on the items the push stream sends)."""

    def __init__(self, kinds: tuple[str, ...], state: Path | None, current: list[dict[str, Any]],
                 report: Callable[[list[dict[str, Any]]], None] | None) -> None:
        self.state, self.report = state, report
        reported = load_state(state, what="the state file") if state is not None else None
        self.seen = reported if reported is not None else {i["key"] for i in current}
        self.saved = self.seen
        self.prefixes = tuple(inbox.PREFIX[k] for k in kinds)  # keys of kinds not watched now are kept as they are

    def step(self, current: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The new items of `current` (reported, then recorded), or [] (the state file forgets the rest)."""
        keys = {i["key"] for i in current}
        # Forget what is no longer pending: it may come back as new (unblocked, redelivered).
        self.seen = {k for k in self.seen if k in keys or not k.startswith(self.prefixes)}
        new = [i for i in current if i["key"] not in self.seen]
        if new:
            if self.report is not None:
                self.report(new)
            if self.state is not None:
                _save_or_warn(self.state, self.seen | {i["key"] for i in new})
            return new
        if self.state is not None and self.seen != self.saved:
            _save_or_warn(self.state, self.seen)
            self.saved = self.seen
        return []


def _refresh(db: Database, kinds: tuple[str, ...]) -> float | None:
    """Run the watched kinds' refresh hooks; seconds until the earliest change no commit announces."""
    due = [when for k in kinds if (fn := inbox.REGISTRY[k].refresh) is not None and (when := fn(db)) is not None]
    return None if not due else (min(due) - time.time() * 1000) / 1000 + 0.05


def _save_or_warn(path: Path, keys: set[str]) -> None:
    """The file was checked at the start; if it still cannot be written (disk full), report anyway."""
    try:
        save_state(path, keys)
    except OSError as exc:
        print(f"vantage-peers wait: could not save {path} ({exc.strerror or exc}); what is reported now may be "
              "reported again", file=sys.stderr, flush=True)


# --- the command ----------------------------------------------------------------------------------

def parse_kinds(text: str) -> tuple[str, ...]:
    kinds = tuple(dict.fromkeys(k.strip() for k in text.split(",") if k.strip()))
    if not kinds or set(kinds) - set(inbox.KINDS):
        raise InvalidArgument(f"--for takes a comma list of {', '.join(inbox.KINDS)}, got {text!r}")
    return kinds


def parse_timeout(value: float | None) -> float | None:
    if value is not None and (math.isnan(value) or math.isinf(value) or value < 0):
        raise InvalidArgument(f"--timeout takes 0 or more seconds (0 checks once; leave it out to wait forever), "
                              f"got {value!r}")
    return value


class ReadyFd:
    """`--ready-fd N`: `ready\n` is written to N once the waiter is armed, then N is closed; closed
    without a word when it never arms (something was new at once, `--timeout 0`, an error)."""

    def __init__(self, fd: int | None) -> None:
        if fd is not None and fd in (0, 1, 2):
            raise InvalidArgument(f"--ready-fd {fd}: stdin, stdout and stderr cannot be used; use 3 or more")
        if fd is not None:
            try:
                os.fstat(fd)
            except OSError:
                raise InvalidArgument(f"--ready-fd {fd} is not an open file descriptor of this process") from None
        self.fd = fd

    def ready(self) -> None:
        if self.fd is not None:
            with contextlib.suppress(OSError):  # the reader may be gone: not a reason to stop waiting
                os.write(self.fd, b"ready\n")
        self.close()

    def close(self) -> None:
        fd, self.fd = self.fd, None  # once: the number may be reused by a file opened afterwards
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)


def _armed(who: str, instance: str | None, kinds: tuple[str, ...], ready: ReadyFd) -> Callable[[], None]:
    def announce() -> None:
        inst = f", instance {instance}" if instance else ""
        print(f"vantage-peers wait: armed (orchestrator {who}{inst}, {','.join(kinds)})", file=sys.stderr,
              flush=True)
        ready.ready()

    return announce


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)  # unwinds: the watcher and the database close, no .tmp stays


def run_wait(*, kinds_text: str, timeout: float | None, as_json: bool, state: str | None, since_now: bool = False,
             ready_fd: int | None = None, url: str | None = None, token: str | None = None) -> int:
    """The `wait` command: 0 with the digest on stdout, 3 on timeout; a bad argument raises InvalidArgument (2).
    `url` (or VP_WAIT_URL): wait through a `serve` push stream instead of the database (#31)."""
    ready = ReadyFd(None)
    try:
        ready = ReadyFd(ready_fd)
        url = url or os.environ.get(URL_ENV) or None
        if url:  # #31: http/push_client.py
            from .http.push_client import run_remote_wait

            return run_remote_wait(url, token or os.environ.get(TOKEN_ENV) or None, kinds_text, timeout, as_json,
                                   state, since_now, ready)
        return _run_wait(kinds_text, timeout, as_json, state, since_now, ready)
    finally:
        ready.close()


def _run_wait(kinds_text: str, timeout: float | None, as_json: bool, state: str | None, since_now: bool,
              ready: ReadyFd) -> int:
    import threading

    from .pipeline.settings import Settings

    kinds = parse_kinds(kinds_text)
    timeout = parse_timeout(timeout)
    if since_now and state:
        raise InvalidArgument("--since-now and --state exclude each other: --since-now keeps no state")
    settings = Settings.from_env()
    who = settings.orchestrator
    if not who:
        raise InvalidArgument("VP_ORCHESTRATOR is required: whose messages and tasks should wait wait for?")
    instance = settings.instance_id
    state_path = None
    if state:
        state_path = check_state_file(Path(state).expanduser(), what="--state")
    elif not since_now:
        state_path = default_state_path(settings, who, instance)
    if state_path is not None:
        load_state(state_path, what="--state" if state else "the state file")  # unreadable: exit 2 before waiting
    from .db import open_database

    main = threading.current_thread() is threading.main_thread()
    before = signal.signal(signal.SIGTERM, _terminate) if main else None  # `kill` ends it cleanly (143)
    try:
        db = open_database(settings)  # creates/migrates the file when needed, like every command
        try:
            new = wait_for_new(db, who=who, instance=instance, kinds=kinds, timeout=timeout, state=state_path,
                               on_armed=_armed(who, instance, kinds, ready),
                               report=lambda items: _print_digest(items, who, instance, as_json))
        finally:
            db.close()
    finally:
        if main:
            signal.signal(signal.SIGTERM, before)
    return EXIT_TIMEOUT if new is None else 0


def _print_digest(new: list[dict[str, Any]], who: str, instance: str | None, as_json: bool) -> None:
    text = inbox.digest(new, who)
    if as_json:
        items = [{k: v for k, v in i.items() if k not in ("key", "text")} | {"text": str(i["text"] or "")[:100]}
                 for i in new[:10]]
        doc = {"orchestrator": who, "instanceId": instance, "count": len(new), "digest": text, "items": items}
        line = json.dumps(doc, ensure_ascii=False)
        while len(line.encode()) > inbox.DIGEST_MAX_BYTES and doc["items"]:
            doc["items"].pop()  # the digest text alone always fits
            line = json.dumps(doc, ensure_ascii=False)
        if len(line.encode()) > inbox.DIGEST_MAX_BYTES:
            doc["digest"] = text.encode()[:inbox.DIGEST_MAX_BYTES // 2].decode("utf-8", "ignore")
            line = json.dumps(doc, ensure_ascii=False)
        print(line)
    else:
        print(text)
    sys.stdout.flush()
