"""The client of the shared model host (`VP_MODEL_HOST=shared`, the default where Unix sockets exist).

An `Embedder` like `LocalEmbedder` (same model name, dimensions and vectors) that sends its texts to
the one model process of this user (`model_host.py`) instead of loading ≈120 MB of model into
every agent's server. When no host answers it starts one, detached (its own session, no pipe of ours:
MCP clients and CI wait on our pipes, never on it), and connects within SPAWN_WAIT_S. When the host
cannot be reached or dies mid-request: one restart, then this call is embedded in-process (never an
error to the agent); the reason is kept (`last_fallback`, and a file in the host folder that
`vantage-peers doctor` shows) and the host is tried again after HOST_RETRY_S.

The folder is checked from `/` down before each new connection (`runtime_dir.verify`) and used
through its descriptor: the socket is reached through it (`model_host.connect`), the start lock,
log and fallback note are opened relative to it with `O_NOFOLLOW`. At most CLIENT_CONNECTIONS
requests of this process are at the host at once (the host caps a process at
`model_host.MAX_PEER_CONNECTIONS`; inference is one batch at a time there anyway).

Why one file over 400 lines: starting the host, connecting through the verified folder, the
restart-then-fallback path and the fallback note form one state machine over one lock; the
in-process fallback is the ordinary `LocalEmbedder`.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import socket
import struct
import subprocess
import sys
import threading
import time
from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from . import local
from .embedding_error import EmbeddingError
from .model_host import (
    ERROR,
    HEADER,
    INFO,
    MAGIC,
    MAX_TEXTS,
    OK,
    OP_EMBED,
    OP_INFO,
    FrameError,
    check_dir,
    connect,
    default_dir,
    encode_texts,
    frame,
    names,
    open_dir,
    paths,
    peer_uid,
    recv_exact,
)
from .runtime_dir import RuntimeDir, UnsafeDir

SPAWN_WAIT_S = 10.0  # a cold Python start on a saturated 2-core machine; it listens before any model work
REQUEST_TIMEOUT_S = 120.0  # the first request loads the model; a hung host must not hang us forever
HOST_RETRY_S = 30.0  # after a fallback, in-process until then (no restart storm on a broken host)
POOL_SIZE = 2  # idle connections kept: the scheduler's indexer and the query path
# Requests of this process at the host at once (a server's 40 worker threads must not all connect:
# the host refuses a process's 33rd connection). Inference is one batch at a time there anyway.
CLIENT_CONNECTIONS = 16
TRANSIENT = (b"HOST_EXITING", b"HOST_BUSY", b"TOO_MANY_CONNECTIONS")
_in_flight = threading.BoundedSemaphore(CLIENT_CONNECTIONS)


def _reset_after_fork() -> None:
    global _in_flight
    _in_flight = threading.BoundedSemaphore(CLIENT_CONNECTIONS)  # another thread may hold the parent's


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


class _Gone(Exception):
    """The connection broke or the host is going away: worth a fresh connection or a restart."""


class _Unavailable(Exception):
    """No host can be used now (refused folder, restart failed): embed in-process."""


class SharedEmbedder:
    model = local.MODEL
    dimensions: int | None = local.DIMENSIONS
    base_url = None

    def __init__(self, directory: Path | None = None) -> None:
        self.directory = directory or default_dir()
        self.paths = paths(self.directory)  # for messages; the files are opened through the folder's fd
        self.names = names()
        self._pool: list[socket.socket] = []
        self._lock = threading.Lock()  # the pool and the retry clock
        self._spawn_lock = threading.Lock()
        self._retry_at = 0.0
        self.last_fallback: str | None = None
        self.fallbacks = 0
        self.spawned = 0

    @property
    def loaded(self) -> bool:
        """The model is loaded *in this process* (only after a fallback)."""
        return local.local_embedder().loaded if self.fallbacks else False

    # ---- the Embedder protocol ------------------------------------------------------------------

    def embed(self, texts: Sequence[str], *, timeout: float = 0.0) -> list[Any]:
        """One float32 row per text (`array('f')`: the server never imports numpy for this — ≈15 MB)."""
        if not texts:
            return []
        raw = self._vectors(texts)
        if not isinstance(raw, bytes):  # the in-process fallback's numpy matrix
            return list(raw)
        flat = array("f", raw)
        if sys.byteorder == "big":
            flat.byteswap()  # the frame holds little-endian float32
        if not all(math.isfinite(x) for x in flat):
            raise EmbeddingError("the local model produced a non-finite vector")
        dims = local.DIMENSIONS
        return [flat[i:i + dims] for i in range(0, len(flat), dims)]

    def embed_array(self, texts: Sequence[str]) -> Any:
        """(n, 384) float32 unit vectors as a numpy array, from the host or, failing it, in-process."""
        import numpy as np

        if not texts:
            return np.zeros((0, local.DIMENSIONS), dtype=np.float32)
        raw = self._vectors(texts)
        if not isinstance(raw, bytes):
            return raw
        out = np.frombuffer(raw, dtype="<f4").reshape(len(texts), local.DIMENSIONS).astype(np.float32)
        if not np.isfinite(out).all():
            raise EmbeddingError("the local model produced a non-finite vector")
        return out

    def _vectors(self, texts: Sequence[str]) -> Any:
        """The little-endian float32 bytes of every row from the host, or the fallback's numpy matrix."""
        # What LocalEmbedder feeds the model anyway: the request stays small and bounded.
        prepared = [t[:local.MAX_CHARS] if t.strip() else "." for t in texts]
        with self._lock:
            cooling = time.monotonic() < self._retry_at
        if cooling:  # the host failed moments ago: in-process, without pushing the retry time back
            return local.local_embedder().embed_array(texts)
        try:
            return b"".join(self._request(prepared[i:i + MAX_TEXTS]) for i in range(0, len(prepared), MAX_TEXTS))
        except _Unavailable as exc:
            self._fell_back(str(exc))
            return local.local_embedder().embed_array(texts)

    def describe(self) -> str:
        problem = check_dir(self.directory)
        if problem:
            where = f"in-process: {problem}"
        elif self.fallbacks and time.monotonic() < self._retry_at:
            where = f"in-process for now: {self.last_fallback}"
        else:
            info = self.info()
            state = ("not running (starts on first use)" if info is None
                     else f"pid {info['pid']}, {'loaded' if info['loaded'] else 'loads on first use'}")
            where = f"shared model host at {self.paths['sock']}, {state}"
        return f"{local.MODEL} (local ONNX, {local.DIMENSIONS} dims, {where})"

    # ---- talking to the host --------------------------------------------------------------------

    def info(self) -> dict[str, Any] | None:
        """The running host's state ({pid, loaded, requests, clients, …}) or None; never starts one."""
        try:
            with open_dir(self.directory) as folder:
                conn = self._connect(folder)
        except (OSError, UnsafeDir, _Unavailable):
            return None
        try:
            conn.settimeout(5.0)
            conn.sendall(frame(OP_INFO, b""))
            magic, status, size = HEADER.unpack(recv_exact(conn, HEADER.size))
            if magic != MAGIC or status != INFO or size > 1 << 20:
                return None
            return json.loads(recv_exact(conn, size))
        except (OSError, FrameError, ValueError):
            return None
        finally:
            conn.close()

    def _request(self, texts: list[str]) -> bytes:
        with _in_flight:
            return self._request_now(texts)

    def _request_now(self, texts: list[str]) -> bytes:
        with self._lock:
            conn = self._pool.pop() if self._pool else None
        payload = frame(OP_EMBED, encode_texts(texts))
        if conn is not None:
            try:
                return self._exchange(conn, payload, len(texts))
            except _Gone:
                pass  # a kept connection to a host that idled out or was killed: a fresh one below
        try:
            folder = open_dir(self.directory)
        except UnsafeDir as exc:
            raise _Unavailable(str(exc)) from None
        with folder:
            restarted = False
            while True:
                try:
                    conn = self._connect(folder)
                except OSError as exc:
                    if restarted:
                        raise _Unavailable(f"the model host does not answer on {self.paths['sock']} after a "
                                           f"restart ({exc.strerror or exc}); see {self.paths['log']}") from None
                    self._spawn(folder)
                    restarted = True
                    continue
                try:
                    return self._exchange(conn, payload, len(texts))
                except _Gone as exc:
                    if restarted:
                        raise _Unavailable(f"the model host failed during a request after a restart ({exc})") from None
                    self._spawn(folder)
                    restarted = True

    def _connect(self, folder: RuntimeDir) -> socket.socket:
        conn = connect(folder, self.names["sock"], 5.0)
        uid = peer_uid(conn)
        if uid is not None and uid != os.getuid():
            conn.close()
            raise _Unavailable(f"the socket {self.paths['sock']} is served by uid {uid}, not by this user")
        return conn

    def _exchange(self, conn: socket.socket, payload: bytes, count: int) -> bytes:
        try:
            conn.settimeout(REQUEST_TIMEOUT_S)
            conn.sendall(payload)
            magic, status, size = HEADER.unpack(recv_exact(conn, HEADER.size))
            if magic != MAGIC or size > 8 + count * local.DIMENSIONS * 4 + (1 << 16):
                raise FrameError("the answer is not a model host frame")
            body = recv_exact(conn, size)
        except (OSError, FrameError) as exc:
            conn.close()
            raise _Gone(str(exc) or type(exc).__name__) from None
        if status == ERROR:
            conn.close()
            if body.startswith(TRANSIENT):
                raise _Gone(body.decode("utf-8", "replace"))
            raise EmbeddingError(f"the model host answered {body.decode('utf-8', 'replace')}")
        rows, dims = struct.unpack_from("!II", body) if status == OK and len(body) >= 8 else (-1, -1)
        if rows != count or dims != local.DIMENSIONS or len(body) != 8 + rows * dims * 4:
            conn.close()
            raise _Gone(f"a malformed answer ({rows} rows of {dims} for {count} texts)")
        self._keep(conn)
        return body[8:]

    def _keep(self, conn: socket.socket) -> None:
        with self._lock:
            if len(self._pool) < POOL_SIZE:
                self._pool.append(conn)
                return
        conn.close()

    def _spawn(self, folder: RuntimeDir) -> None:
        try:
            self._spawn_and_wait(folder)
        except UnsafeDir as exc:  # a start lock or log that is not a plain file of ours
            raise _Unavailable(str(exc)) from None
        except OSError as exc:  # the folder vanished, no fork possible, no Python at sys.executable…
            raise _Unavailable(f"the model host could not be started ({exc.strerror or exc})") from None

    def _spawn_and_wait(self, folder: RuntimeDir) -> None:
        """Start a host (unless another process just did) and wait until it accepts connections.
        One spawner at a time per folder: the others find the host it started."""
        import fcntl

        deadline = time.monotonic() + SPAWN_WAIT_S
        with self._spawn_lock:
            guard = folder.open(self.names["spawn"], os.O_RDWR | os.O_CREAT)
            try:
                while True:
                    try:
                        fcntl.flock(guard, fcntl.LOCK_EX | fcntl.LOCK_NB)
                        break
                    except OSError:
                        if time.monotonic() > deadline:
                            raise _Unavailable("another process kept the model host's start lock for too long") from None
                        time.sleep(0.02)
                if self._answers(folder):
                    return  # started by another process while we waited for the lock
                self._launch(folder)
                while time.monotonic() < deadline:
                    if self._answers(folder):
                        return
                    time.sleep(0.02)
                raise _Unavailable(f"the model host did not start within {SPAWN_WAIT_S:g} s; see {self.paths['log']}")
            finally:
                os.close(guard)

    def _launch(self, folder: RuntimeDir) -> None:
        log = self.names["log"]
        with contextlib.suppress(OSError):
            if folder.lstat(log).st_size > 1 << 20:
                folder.unlink(log)  # keep the log small: it is only for the latest failures
        package_root = str(Path(__file__).resolve().parents[2])
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        fd = folder.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        try:
            # --detach: the host forks and this child exits at once, so the host is nobody's child
            # (no zombie in the agent's server when it exits) and holds none of our pipes. It
            # checks the folder again itself and makes it its working directory (cwd / until then).
            child = subprocess.Popen(
                [sys.executable, "-m", "vantage_peers.embedding.model_host",
                 "--dir", os.path.abspath(self.directory), "--detach"],
                stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=fd, close_fds=True,
                start_new_session=True, cwd="/", env=env)
        finally:
            os.close(fd)
        self.spawned += 1
        threading.Thread(target=child.wait, daemon=True).start()  # reap the short-lived parent

    def _answers(self, folder: RuntimeDir) -> bool:
        try:
            self._connect(folder).close()
            return True
        except (OSError, _Unavailable):
            return False

    def _fell_back(self, reason: str) -> None:
        with self._lock:
            self.last_fallback = reason
            self.fallbacks += 1
            self._retry_at = time.monotonic() + HOST_RETRY_S
            pooled, self._pool = self._pool, []
        for conn in pooled:
            conn.close()
        note = json.dumps({"at": time.time(), "pid": os.getpid(), "reason": reason}).encode()
        # For `vantage-peers doctor`, run from another process.
        with contextlib.suppress(OSError, UnsafeDir), open_dir(self.directory) as folder:
            _write_note(folder, self.names["fallback"], note)


def _write_note(folder: RuntimeDir, name: str, data: bytes) -> None:
    """Replace `name` in the folder: a new file (O_EXCL, never an existing one) renamed over it."""
    temp = f"{name}.{os.getpid()}.{threading.get_ident()}.tmp"
    fd = folder.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
    try:
        folder.replace(temp, name)
    except OSError:
        with contextlib.suppress(OSError):
            folder.unlink(temp)
        raise


def _read_note(folder: RuntimeDir, name: str) -> bytes:
    fd = folder.open(name, os.O_RDONLY)
    try:
        return os.read(fd, 1 << 16)
    finally:
        os.close(fd)


_instances: dict[Path, SharedEmbedder] = {}
_instances_lock = threading.Lock()


def shared_embedder(directory: Path | None = None) -> SharedEmbedder:
    """One client per host folder and process (tests build many apps)."""
    where = directory or default_dir()
    with _instances_lock:
        if where not in _instances:
            _instances[where] = SharedEmbedder(where)
        return _instances[where]


FALLBACK_SHOWN_S = 24 * 3600.0


def doctor_lines(settings: Any) -> list[tuple[str, str, str]]:
    """(status, label, detail) for `vantage-peers doctor`: the mode, the socket, the running host."""
    from .model_host import supported

    if settings.embeddings != "local":
        return []
    if getattr(settings, "model_host", "shared") != "shared":
        return [("ok", "model host", "in-process (VP_MODEL_HOST=inprocess): every server process loads its own model")]
    if not supported():
        return [("ok", "model host", "in-process (no Unix sockets or fcntl on this platform)")]
    client = SharedEmbedder(default_dir())
    try:
        folder = open_dir(client.directory)
    except UnsafeDir as exc:
        return [("WARN", "model host", f"in-process: {exc}")]
    with folder:
        try:
            note: bytes | None = _read_note(folder, client.names["fallback"])
        except (OSError, UnsafeDir):
            note = None
    info = client.info()
    state = (f"running, pid {info['pid']} ({'model loaded' if info['loaded'] else 'model not loaded yet'}, "
             f"{info['requests']} request(s) from {len(info['clients'])} process(es))") if info else "not running (starts on first use)"
    out = [("ok", "model host", f"shared; socket {client.paths['sock']}; {state}")]
    try:
        last = json.loads(note or b"")
        if time.time() - float(last["at"]) < FALLBACK_SHOWN_S:
            when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(float(last["at"])))
            out.append(("WARN", "model host fallback", f"{when}, process {last['pid']} embedded in-process: {last['reason']}"))
    except (ValueError, KeyError, TypeError):
        pass
    return out
