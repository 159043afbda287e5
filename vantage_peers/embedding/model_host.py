"""One local-model process per user and model, shared by every vantage-peers process of that user (#20).

    python -m vantage_peers.embedding.model_host --dir D

Ten agents on one laptop each loading all-MiniLM-L6-v2 in-process pay ≈120 MB each; this host holds
the one `LocalEmbedder` and answers them over a Unix socket in D (`embedding/shared_model.py` is the
client, which starts the host on first use). Guarantees:

- one host per D and model: an exclusive `fcntl.flock` on `<model>.lock`, held for the host's life;
  only its holder may unlink a stale socket and bind;
- D is checked from `/` down and then used through its descriptor (`runtime_dir.py`): the lock here
  (and the client's start lock, log and fallback note) are opened with `O_NOFOLLOW` relative to it,
  and the host binds with its working directory set to it (`fchdir`), so swapping a path component
  cannot redirect them;
- it listens before the model loads (the model loads on the first request, off everyone's start-up);
- one thread per connection; inference runs one batch at a time, and a query (≤ URGENT_TEXTS texts)
  takes the next turn before any waiting indexing batch: an agent's `recall` never waits behind
  more than one batch of another agent's indexing;
- a peer of another uid is refused (`SO_PEERCRED`, Linux); one process holds at most
  MAX_PEER_CONNECTIONS connections (the next gets a TOO_MANY_CONNECTIONS frame and is closed);
- bounded input (MAX_TEXTS texts, MAX_REQUEST_BYTES bytes): a bigger request gets an error frame;
  garbage or half a frame ends that connection only; a request must arrive whole within
  FRAME_DEADLINE_S of its first byte (`VP_MODEL_HOST_FRAME_S`), however slowly its bytes trickle in,
  and a connection idle between requests for CONNECTION_IDLE_S (`VP_MODEL_HOST_CONN_IDLE_S`) is
  closed: a slow client cannot hold a slot for long;
- it exits by itself after `IDLE_S` seconds without a request (`local.IDLE_UNLOAD_S`, or
  `VP_MODEL_HOST_IDLE_S`), removing its socket.

Frames (network byte order): request `VPM1` + op (1 byte) + payload length (u32); an embed payload is
u32 count, then u32 length + UTF-8 bytes per text. Response `VPM1` + status + length: OK carries u32
rows, u32 dims and rows × dims little-endian float32; ERROR a `CODE: message`; INFO a JSON object.
This module imports nothing heavy at load: the client imports it for the protocol and paths.

Why one file over 400 lines: the host's lock, bind, accept loop, frame reader and scheduler share
the verified directory descriptor and the one inference turn; split apart, each piece would have to
re-check the invariants above. The wire format and the client live elsewhere (`shared_model.py`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from . import local
from .runtime_dir import RuntimeDir, UnsafeDir, verify

MAGIC = b"VPM1"
HEADER = struct.Struct("!4sBI")
OP_EMBED, OP_INFO = 1, 2
OK, ERROR, INFO = 0, 1, 2
MAX_TEXTS = 512  # the indexer sends 64 at a time; the client splits longer lists
# Texts arrive already cut to local.MAX_CHARS characters (≤ 4 UTF-8 bytes each).
MAX_REQUEST_BYTES = MAX_TEXTS * (local.MAX_CHARS * 4 + 4) + 4
# Each client process keeps up to 2 idle connections (shared_model.POOL_SIZE): room for ≈250 agents.
URGENT_TEXTS = 4  # a request this small is a query: it goes before queued indexing batches
MAX_CONNECTIONS = 512
# One process (SO_PEERCRED pid): a server uses ≤ shared_model.CLIENT_CONNECTIONS at once plus its pool.
# Every peer served has this user's uid (others are refused), so a per-uid cap would be this total.
MAX_PEER_CONNECTIONS = 32
MAX_CLIENTS_SHOWN = 256  # pids remembered for `doctor` and the tests
FRAME_DEADLINE_S = 30.0  # a whole request frame, from its first byte (not per read: no slow-loris)
CONNECTION_IDLE_S = 120.0  # between requests; a client's pooled connection is then replaced
SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes on Linux, 104 on macOS
IDLE_ENV = "VP_MODEL_HOST_IDLE_S"
FRAME_ENV = "VP_MODEL_HOST_FRAME_S"
CONNECTION_IDLE_ENV = "VP_MODEL_HOST_CONN_IDLE_S"
DIR_ENV = "VP_MODEL_HOST_DIR"


def supported() -> bool:
    """AF_UNIX and fcntl exist (not on Windows): the shared host is possible."""
    try:
        import fcntl  # noqa: F401
    except ImportError:
        return False
    return hasattr(socket, "AF_UNIX")


def _env_seconds(name: str, default: float) -> float:
    raw = os.environ.get(name, "").strip()
    try:
        return max(0.05, float(raw)) if raw else default
    except ValueError:
        return default


def idle_seconds() -> float:
    return _env_seconds(IDLE_ENV, local.IDLE_UNLOAD_S)


def default_dir() -> Path:
    """VP_MODEL_HOST_DIR, else $XDG_RUNTIME_DIR/vantage-peers, else <tempdir>/vantage-peers-<uid>."""
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV]).expanduser()
    if os.environ.get("XDG_RUNTIME_DIR"):
        return Path(os.environ["XDG_RUNTIME_DIR"]) / "vantage-peers"
    return Path(tempfile.gettempdir()) / f"vantage-peers-{os.getuid()}"


KINDS = ("sock", "lock", "spawn", "log", "fallback")


def names(model: str = local.MODEL) -> dict[str, str]:
    """The file names in the host folder (opened relative to its descriptor)."""
    return {kind: f"{model}.{kind}" for kind in KINDS}


def paths(directory: Path, model: str = local.MODEL) -> dict[str, Path]:
    """The same files as paths: for messages, `doctor` and the tests."""
    return {kind: directory / name for kind, name in names(model).items()}


def open_dir(directory: Path) -> RuntimeDir:
    """The host folder created 0700 if absent, checked from `/` down (`runtime_dir.verify`) and open;
    UnsafeDir with the reason otherwise (another local user must not be able to plant or redirect a
    socket, a lock or a log there)."""
    folder = verify(directory)
    if len(str(paths(directory)["sock"]).encode()) > SOCKET_PATH_MAX:
        folder.close()
        raise UnsafeDir(f"the socket path in {directory} is too long for a Unix socket; "
                        "set VP_MODEL_HOST_DIR to a shorter folder")
    return folder


def check_dir(directory: Path) -> str | None:
    """None when `directory` is safe (created if absent), else why not."""
    try:
        open_dir(directory).close()
    except UnsafeDir as exc:
        return str(exc)
    return None


def connect(folder: RuntimeDir, name: str, timeout: float) -> socket.socket:
    """A connection to the socket `name` inside the checked folder, never through a swapped path
    (`RuntimeDir.address`; where that is the plain path, the folder is re-checked around connect)."""
    address = folder.address(name)
    by_path = not folder.via_proc
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.settimeout(timeout)
        if by_path and not folder.still_here():
            raise ConnectionRefusedError(f"{folder.path} was moved or replaced")
        conn.connect(address)
        if by_path and not folder.still_here():
            raise ConnectionRefusedError(f"{folder.path} was moved or replaced")
    except OSError:
        conn.close()
        raise
    return conn


def _peer(sock: socket.socket) -> tuple[int, int, int] | None:
    """(pid, uid, gid) of the process at the other end (Linux SO_PEERCRED), None where unavailable."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return None
    try:
        return struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i")))
    except OSError:
        return None


def peer_uid(sock: socket.socket) -> int | None:
    creds = _peer(sock)
    return None if creds is None else creds[1]


def peer_pid(sock: socket.socket) -> int | None:
    creds = _peer(sock)
    return None if creds is None else creds[0]


# ---- frames ---------------------------------------------------------------------------------------

class FrameError(Exception):
    """The peer sent something that is not a frame, or closed the connection inside one."""


class FrameTimeout(FrameError):
    """The frame did not arrive whole before its deadline."""


def recv_exact(sock: socket.socket, n: int, deadline: float | None = None) -> bytes:
    """`n` bytes; with a `deadline` (time.monotonic()), all of them by then or FrameTimeout — the
    socket's timeout is then the time left, not a per-read allowance a trickle could renew forever."""
    chunks, left = [], n
    while left:
        if deadline is not None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise FrameTimeout("the frame did not arrive in time")
            sock.settimeout(remaining)
        try:
            chunk = sock.recv(min(left, 1 << 20))
        except TimeoutError:
            if deadline is None:
                raise
            raise FrameTimeout("the frame did not arrive in time") from None
        if not chunk:
            raise FrameError("the connection closed inside a frame" if left != n or n == 0 else "closed")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def encode_texts(texts: list[str]) -> bytes:
    parts = [struct.pack("!I", len(texts))]
    for text in texts:
        raw = text.encode("utf-8", "surrogatepass")
        parts.append(struct.pack("!I", len(raw)))
        parts.append(raw)
    return b"".join(parts)


def decode_texts(payload: bytes) -> list[str]:
    if len(payload) < 4:
        raise FrameError("BAD_FRAME: an embed request holds a text count")
    (count,) = struct.unpack_from("!I", payload)
    if count > MAX_TEXTS:
        raise FrameError(f"TOO_MANY_TEXTS: {count} texts in one request, at most {MAX_TEXTS}; split it")
    texts, at = [], 4
    for _ in range(count):
        if at + 4 > len(payload):
            raise FrameError("BAD_FRAME: the text list is shorter than its count")
        (size,) = struct.unpack_from("!I", payload, at)
        at += 4
        if at + size > len(payload):
            raise FrameError("BAD_FRAME: a text runs past the end of the request")
        texts.append(payload[at:at + size].decode("utf-8", "replace"))
        at += size
    if at != len(payload):
        raise FrameError("BAD_FRAME: bytes after the last text")
    return texts


def frame(kind: int, payload: bytes) -> bytes:
    return HEADER.pack(MAGIC, kind, len(payload)) + payload


# ---- the host ------------------------------------------------------------------------------------

class Gate:
    """One inference at a time; urgent callers (queries) go before the others that are waiting."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._busy = False
        self._urgent_waiting = 0

    @contextlib.contextmanager
    def turn(self, urgent: bool) -> Iterator[None]:
        with self._cond:
            self._urgent_waiting += urgent
            while self._busy or (not urgent and self._urgent_waiting):
                self._cond.wait()
            self._urgent_waiting -= urgent
            self._busy = True
        try:
            yield
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()


class Host:
    def __init__(self, folder: RuntimeDir, *, idle_s: float) -> None:
        self.folder = folder
        self.names = names()
        self.paths = paths(folder.path)
        self.idle_s = idle_s
        self.frame_s = _env_seconds(FRAME_ENV, FRAME_DEADLINE_S)
        self.connection_idle_s = _env_seconds(CONNECTION_IDLE_ENV, CONNECTION_IDLE_S)
        self.embedder = local.LocalEmbedder(idle_unload_s=None)  # the host exits instead of unloading
        self.gate = Gate()
        self.started = time.time()
        self.last_request = time.monotonic()
        self.active = 0  # requests being served
        self.requests = 0
        self.batches = 0  # inference turns taken (doctor, tests)
        self.clients: set[int] = set()  # pids that sent an embed request (doctor, tests)
        self.connections = 0
        self.per_peer: dict[int, int] = {}  # open connections per client pid
        self.refused = 0  # connections refused by a cap (doctor, tests)
        self.state = threading.Lock()
        self.closing = False
        self.listener: socket.socket | None = None
        self.inode = 0

    # Single instance: the lock is held from here to the process's exit.
    def acquire(self, wait_s: float = 10.0) -> bool:
        import fcntl

        self._lock_fd = self.folder.open(self.names["lock"], os.O_RDWR | os.O_CREAT)  # held for life
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except OSError:
                pass
            if _answers(self.folder, self.names["sock"]) or time.monotonic() > deadline:
                return False  # another host serves (or holds the lock without serving: give up)
            time.sleep(0.05)  # the holder is starting or exiting: wait for it

    def bind(self) -> None:
        name = self.names["sock"]
        # bind() takes a path: with the checked folder as the working directory, a bare name is
        # resolved from its descriptor, never through the path again.
        os.fchdir(self.folder.fd)
        if not self.folder.still_here():
            raise UnsafeDir(f"the model host folder {self.folder.path} was moved or replaced while starting")
        with contextlib.suppress(FileNotFoundError):
            self.folder.unlink(name)  # stale: its host died without removing it (we hold the lock)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(name)
        finally:
            os.umask(old)
        listener.listen(128)
        self.listener = listener
        self.inode = self.folder.lstat(name).st_ino  # to notice the socket removed or replaced under us
        if not self.folder.still_here():  # bound where no client looks: leave nothing behind
            with contextlib.suppress(OSError):
                self.folder.unlink(name)
            raise UnsafeDir(f"the model host folder {self.folder.path} was moved or replaced while starting")

    def serve(self) -> None:
        assert self.listener is not None
        threading.Thread(target=self._watch_idle, daemon=True).start()
        self.listener.settimeout(0.5)
        while not self.closing:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                if self.closing:
                    break
                continue
            creds = _peer(conn)
            if creds is not None and creds[1] != os.getuid():
                conn.close()  # another user's process: never served
                continue
            pid = creds[0] if creds is not None and creds[0] > 0 else None
            refusal = None
            with self.state:
                if self.connections >= MAX_CONNECTIONS:
                    refusal = b"HOST_BUSY: too many connections to the model host; retry"
                elif pid is not None and self.per_peer.get(pid, 0) >= MAX_PEER_CONNECTIONS:
                    refusal = (f"TOO_MANY_CONNECTIONS: process {pid} already holds {MAX_PEER_CONNECTIONS} "
                               "connections to the model host; close one and retry").encode()
                else:
                    self.connections += 1
                    if pid is not None:
                        self.per_peer[pid] = self.per_peer.get(pid, 0) + 1
                if refusal:
                    self.refused += 1
            if refusal:
                with contextlib.suppress(OSError):
                    conn.settimeout(1.0)  # a fresh connection's buffer is empty: this never waits
                    conn.sendall(frame(ERROR, refusal))
                conn.close()
                continue
            threading.Thread(target=self._connection, args=(conn, pid), daemon=True).start()

    def _watch_idle(self) -> None:
        while True:
            time.sleep(min(1.0, self.idle_s / 4))
            try:
                replaced = (os.stat(self.paths["sock"], follow_symlinks=False).st_ino != self.inode
                            or not self.folder.still_here())
            except OSError:
                replaced = True
            if replaced:  # the folder was cleaned (tmp cleaner, rm -rf): no client can reach us any more
                os._exit(0)
            with self.state:
                if self.active == 0 and time.monotonic() - self.last_request >= self.idle_s:
                    self.closing = True  # under the lock: no request starts after this
                    break
        self.shutdown()

    def shutdown(self) -> None:
        # Remove our socket (not one that replaced it) while still holding the lock, then exit.
        with contextlib.suppress(OSError):
            if self.folder.lstat(self.names["sock"]).st_ino == self.inode:
                self.folder.unlink(self.names["sock"])
        if self.listener is not None:
            with contextlib.suppress(OSError):
                self.listener.close()
        os._exit(0)

    def _send(self, conn: socket.socket, data: bytes) -> None:
        conn.settimeout(self.frame_s)  # the whole answer (sendall's timeout is total since 3.5)
        conn.sendall(data)

    def _connection(self, conn: socket.socket, client: int | None) -> None:
        try:
            while not self.closing:
                conn.settimeout(self.connection_idle_s)
                try:
                    first = conn.recv(1)
                except OSError:
                    return  # idle too long between requests, or the client left
                if not first:
                    return
                # From its first byte, the whole frame within frame_s: a trickle cannot hold a slot.
                deadline = time.monotonic() + self.frame_s
                magic, op, size = HEADER.unpack(first + recv_exact(conn, HEADER.size - 1, deadline))
                if magic != MAGIC:
                    self._send(conn, frame(ERROR, b"BAD_FRAME: not a vantage-peers model host request"))
                    return
                if size > MAX_REQUEST_BYTES:
                    self._send(conn, frame(ERROR, f"TOO_LARGE: a request of {size} bytes, at most "
                                                  f"{MAX_REQUEST_BYTES}; send fewer or shorter texts".encode()))
                    return  # the payload is not read: the connection cannot continue
                payload = recv_exact(conn, size, deadline)
                self._send(conn, self._answer(op, payload, client))
        except FrameTimeout:
            with contextlib.suppress(OSError):
                conn.settimeout(1.0)
                conn.sendall(frame(ERROR, f"FRAME_TIMEOUT: a request must arrive whole within "
                                          f"{self.frame_s:g} s of its first byte".encode()))
        except (FrameError, OSError):
            return  # half a frame, a vanished client, a timeout: this connection only
        finally:
            with self.state:
                self.connections -= 1
                if client is not None:
                    left = self.per_peer.get(client, 1) - 1
                    if left > 0:
                        self.per_peer[client] = left
                    else:
                        self.per_peer.pop(client, None)
            with contextlib.suppress(OSError):
                conn.close()

    def _answer(self, op: int, payload: bytes, client: int | None) -> bytes:
        if op == OP_INFO:
            with self.state:
                info = {"pid": os.getpid(), "model": local.MODEL, "dimensions": local.DIMENSIONS,
                        "loaded": self.embedder.loaded, "requests": self.requests, "active": self.active,
                        "batches": self.batches, "clients": sorted(self.clients),
                        "connections": self.connections, "refused": self.refused,
                        "idleSeconds": self.idle_s, "frameSeconds": self.frame_s,
                        "connectionIdleSeconds": self.connection_idle_s,
                        "uptimeSeconds": round(time.time() - self.started, 1)}
            return frame(INFO, json.dumps(info).encode())
        if op != OP_EMBED:
            return frame(ERROR, f"BAD_FRAME: unknown operation {op}".encode())
        try:
            texts = decode_texts(payload)
        except FrameError as exc:
            return frame(ERROR, str(exc).encode())
        with self.state:
            if self.closing:
                return frame(ERROR, b"HOST_EXITING: the model host is exiting; reconnect")
            self.active += 1
            self.requests += 1
            if client is not None and (client in self.clients or len(self.clients) < MAX_CLIENTS_SHOWN):
                self.clients.add(client)
        try:
            matrix = self._embed(texts)
        except Exception as exc:  # noqa: BLE001 - an embedding failure is the caller's answer, not a crash
            return frame(ERROR, f"EMBEDDING_FAILED: {exc}".encode())
        finally:
            with self.state:
                self.active -= 1
                self.last_request = time.monotonic()
        rows, dims = matrix.shape
        return frame(OK, struct.pack("!II", rows, dims) + matrix.astype("<f4").tobytes())

    def _embed(self, texts: list[str]) -> Any:
        """The request's vectors, one batch per turn at the gate (a query's turn comes first)."""
        urgent = len(texts) <= URGENT_TEXTS

        @contextlib.contextmanager
        def turn() -> Iterator[None]:
            with self.gate.turn(urgent):
                yield
                self.batches += 1

        return self.embedder.embed_array(texts, turn=turn)


def _answers(folder: RuntimeDir, name: str) -> bool:
    """Something accepts connections on the socket `name` in `folder`."""
    try:
        connect(folder, name, 1.0).close()
        return True
    except OSError:
        return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vantage_peers.embedding.model_host",
                                     description="The shared local-model host (see docs/recall.md).")
    parser.add_argument("--dir", type=Path, default=None, help="its folder (default: VP_MODEL_HOST_DIR, "
                        "$XDG_RUNTIME_DIR/vantage-peers or <tmp>/vantage-peers-<uid>)")
    parser.add_argument("--detach", action="store_true", help="fork and let the starting process go at once "
                        "(how shared_model starts it: the host is then nobody's child)")
    args = parser.parse_args(argv)
    if args.detach and os.fork() > 0:
        os._exit(0)
    directory = args.dir or default_dir()
    try:
        host = Host(open_dir(directory), idle_s=idle_seconds())
        if not host.acquire():
            return 0  # another host holds the lock and serves: nothing to do
        host.bind()
    except UnsafeDir as exc:
        print(f"MODEL_HOST_DIR: {exc}", file=sys.stderr)
        return 2
    print(f"model host {os.getpid()} listening on {host.paths['sock']} (idle exit after {host.idle_s:g} s)",
          file=sys.stderr, flush=True)
    host.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
