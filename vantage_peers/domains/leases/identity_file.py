"""The workspace identity file (issue #30): who works in this git work tree, and on which database,
for the git guard run from the agent's own shell (which does not inherit the MCP server's env).

The stdio server, started with an identity (VP_ORCHESTRATOR, optional VP_INSTANCE_ID) in a git work
tree, writes `$(git rev-parse --git-dir)/vantage-peers/identity-<pid>.json` (per work tree: a linked
worktree has its own git dir), atomically (a temp file renamed over it), mode 0600 in a 0700 folder:

    {"version": 1, "orchestrator": "alice", "instance": "a1" | null,
     "database": {"url": "postgresql://alice@db:5432/vp"} | {"path": "/…/vp.db", "journalMode": "wal"},
     "pid": 4242, "ancestors": [4240, 4100, …], "startedAt": 1764860000000, "workTree": "/…"}

The database URL never holds a password (`strip_password`): the guard connects with the rest of the
URL, so libpq takes the password from ~/.pgpass or PGPASSWORD (or the shell exports VP_DATABASE_URL).

One file per server (keyed by pid), so agents sharing a work tree (rare) never overwrite each other;
a server's start removes the files of servers no longer running, and a server leaves its own file
behind when it exits (the work tree keeps its last identity and database). `choose` picks for the
guard: among the files of running servers, the one started by the same program as the committing
shell (the nearest common ancestor process: Claude Code starts both its MCP server and its shell),
else the newest — unless running servers of different orchestrators cannot be told apart, then none
(the guard says so: set VP_ORCHESTRATOR); with no server running, the newest file.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

FOLDER = "vantage-peers"
PREFIX = "identity-"
VERSION = 1
MAX_BYTES = 64 * 1024
MAX_DEPTH = 64  # ancestor processes followed


def strip_password(url: str) -> str:
    """The URL without any password: `user:secret@` becomes `user@`, `password=` (and `sslpassword=`) query
    parameters go; the rest is kept as written."""
    parts = urlsplit(url)
    netloc = parts.netloc
    if "@" in netloc:
        userinfo, _, hosts = netloc.rpartition("@")
        netloc = f"{userinfo.partition(':')[0]}@{hosts}"
    query = "&".join(item for item in parts.query.split("&")
                     if item and "password" not in unquote(item.partition("=")[0]).lower())
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def git_dir(cwd: str | Path) -> Path | None:
    """The git dir of the work tree containing `cwd` (absolute), None outside a work tree."""
    try:
        out = subprocess.run(["git", "rev-parse", "--is-inside-work-tree", "--absolute-git-dir"], cwd=cwd,
                             capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = out.stdout.splitlines()
    if out.returncode != 0 or len(lines) < 2 or lines[0].strip() != "true":
        return None
    return Path(lines[1].strip())


def alive(pid: int) -> bool:
    if pid <= 0:
        return False
    if os.name == "nt":  # os.kill(pid, 0) would not ask; count it as running
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


def _parents() -> dict[int, int] | None:
    """pid -> parent pid of every process, from `ps` (where there is no /proc); None when unknown."""
    try:
        out = subprocess.run(["ps", "-A", "-o", "pid=", "-o", "ppid="], capture_output=True, text=True,
                             timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    table = {}
    for line in out.stdout.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[0].isdigit() and fields[1].isdigit():
            table[int(fields[0])] = int(fields[1])
    return table or None


def ancestors(pid: int | None = None) -> list[int]:
    """The parent, grandparent, … of `pid` (default: this process), up to but without pid 1."""
    pid = os.getpid() if pid is None else pid
    chain: list[int] = []
    table: dict[int, int] | None = None
    proc = Path("/proc")
    for _ in range(MAX_DEPTH):
        parent = None
        try:
            stat = (proc / str(pid) / "stat").read_text()
            parent = int(stat.rpartition(")")[2].split()[1])  # after "(comm)": state, ppid
        except (OSError, ValueError, IndexError):
            if table is None:
                table = _parents() or {}
            parent = table.get(pid)
        if not parent or parent <= 1 or parent in chain:
            break
        chain.append(parent)
        pid = parent
    return chain


def database_target(settings: Any) -> dict[str, Any]:
    if getattr(settings, "database_url", None):
        return {"url": strip_password(settings.database_url)}
    return {"path": str(Path(settings.db_path).expanduser().resolve()), "journalMode": settings.journal_mode}


def publish(settings: Any, cwd: str | Path | None = None) -> Path | None:
    """Write this server's identity file, if it has an identity and runs in a git work tree. Never raises:
    the server starts all the same (the guard then needs VP_ORCHESTRATOR in the shell)."""
    try:
        if not getattr(settings, "orchestrator", None):
            return None
        where = Path(cwd or os.getcwd())
        gdir = git_dir(where)
        if gdir is None:
            return None
        folder = gdir / FOLDER
        folder.mkdir(mode=0o700, exist_ok=True)
        pid = os.getpid()
        record = {"version": VERSION, "orchestrator": settings.orchestrator,
                  "instance": getattr(settings, "instance_id", None) or None,
                  "database": database_target(settings), "pid": pid, "ancestors": ancestors(pid),
                  "startedAt": int(time.time() * 1000), "workTree": str(where.resolve())}
        for old in folder.glob(f"{PREFIX}*.json"):  # servers that are gone: their file would only mislead
            stem = old.stem[len(PREFIX):]
            if stem.isdigit() and int(stem) != pid and not alive(int(stem)):
                with contextlib.suppress(OSError):
                    old.unlink()
        target = folder / f"{PREFIX}{pid}.json"
        temp = folder / f".{PREFIX}{pid}.{os.urandom(4).hex()}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(record, f)
                f.flush()
                os.fsync(f.fileno())
            if os.name != "nt":
                os.chmod(temp, 0o600)  # whatever the umask
            os.replace(temp, target)
        except BaseException:
            with contextlib.suppress(OSError):
                temp.unlink()
            raise
        return target
    except Exception:  # noqa: BLE001 - a convenience for the guard, never a reason not to serve
        return None


@dataclass
class Choice:
    record: dict[str, Any] | None  # whose identity speaks for the committer, None when none does
    path: Path | None = None
    note: str | None = None  # why the record is what it is (exited server, ambiguity)
    database: dict[str, Any] | None = None  # the record's, or the one every running server agrees on

    @property
    def orchestrator(self) -> str | None:
        return self.record["orchestrator"] if self.record else None

    @property
    def who(self) -> str | None:
        return _who(self.record) if self.record else None


def records(cwd: str | Path) -> list[tuple[Path, dict[str, Any]]]:
    gdir = git_dir(cwd)
    if gdir is None:
        return []
    found = []
    for path in sorted((gdir / FOLDER).glob(f"{PREFIX}*.json")):
        try:
            if path.is_symlink() or path.stat().st_size > MAX_BYTES:
                continue
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if (isinstance(data, dict) and data.get("version") == VERSION and isinstance(data.get("pid"), int)
                and isinstance(data.get("orchestrator"), str) and data["orchestrator"].strip()):
            found.append((path, data))
    return found


def _who(record: dict[str, Any]) -> str:
    return record["orchestrator"] + (f"/{record['instance']}" if record.get("instance") else "")


def choose(cwd: str | Path, me: list[int] | None = None) -> Choice:
    """The identity file that speaks for the process committing in `cwd` (see the module doc)."""
    found = records(cwd)
    if not found:
        return Choice(None)

    def newest(items):
        return max(items, key=lambda item: item[1].get("startedAt") or 0)

    live = [(p, r) for p, r in found if alive(r["pid"])]
    if not live:
        path, record = newest(found)
        return Choice(record, path, f"written by a server that has exited (pid {record['pid']})",
                      _database(record))
    if len({r["orchestrator"] for _, r in live}) > 1:
        chain = ancestors() if me is None else me

        def kinship(record: dict[str, Any]) -> int:
            theirs = {record["pid"], *[a for a in record.get("ancestors") or [] if isinstance(a, int)]}
            return next((depth for depth, pid in enumerate(chain) if pid in theirs), len(chain))

        best = min(kinship(r) for _, r in live)
        near = [(p, r) for p, r in live if kinship(r) == best]
        if best == len(chain) or len({r["orchestrator"] for _, r in near}) > 1:
            names = ", ".join(sorted({_who(r) for _, r in live}))
            targets = {json.dumps(_database(r), sort_keys=True) for _, r in live}
            return Choice(None, None, f"servers of several orchestrators run in this work tree ({names}) and "
                                      "none is closer kin to this shell than the others",
                          json.loads(targets.pop()) if len(targets) == 1 else None)
        live = near
    path, record = newest(live)
    return Choice(record, path, None, _database(record))


def _database(record: dict[str, Any]) -> dict[str, Any] | None:
    db = record.get("database")
    if isinstance(db, dict) and (isinstance(db.get("url"), str) or isinstance(db.get("path"), str)):
        return db
    return None
