"""Finding and stopping the shared model host processes a test session started (#20)."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

MODULE = "vantage_peers.embedding.model_host"


def hosts(under: Path | None = None) -> dict[int, Path]:
    """{pid: --dir} of every live model host process (optionally whose folder is under `under`)."""
    found: dict[int, Path] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state == "Z" or MODULE.encode() not in args or b"--dir" not in args:
            continue
        where = Path(os.fsdecode(args[args.index(b"--dir") + 1]))
        if under is None or where == under or under in where.parents:
            found[int(entry.name)] = where
    return found


def stop(pids, timeout: float = 5.0) -> None:
    """SIGKILL these pids and wait until they are gone (they are not our children: no waitpid)."""
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(Path(f"/proc/{pid}").exists() and _alive(pid) for pid in pids):
        time.sleep(0.02)


def _alive(pid: int) -> bool:
    try:
        return (Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]) != "Z"
    except OSError:
        return False


def wait_until(condition, seconds: float = 60.0, step: float = 0.05):
    """`condition()`'s first truthy value within `seconds`, else its last (falsy) one."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(step)
    return condition()
