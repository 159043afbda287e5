"""One local-model process per user and model, shared by every vantage-peers process of that user (#20).

    python -m vantage_peers.search.model_host --dir D

Ten agents on one laptop each loading all-MiniLM-L6-v2 in-process pay ≈120 MB each; this host holds
the one `LocalEmbedder` and answers them over a Unix socket in D (`search/shared_model.py` is the
client, which starts the host on first use). Guarantees:

- one host per D and model: an exclusive `fcntl.flock` on `<model>.lock`, held for the host's life;
  only its holder may unlink a stale socket and bind;
- it listens before the model loads (the model loads on the first request, off everyone's start-up);
- one thread per connection; inference runs one batch at a time, and a query (≤ URGENT_TEXTS texts)
  takes the next turn before any waiting indexing batch: an agent's `recall` never waits behind
  more than one batch of another agent's indexing;
- a peer of another uid is refused (`SO_PEERCRED`, Linux);
- bounded input (MAX_TEXTS texts, MAX_REQUEST_BYTES bytes): a bigger request gets an error frame;
  garbage or half a frame ends that connection only;
- it exits by itself after `IDLE_S` seconds without a request (`local.IDLE_UNLOAD_S`, or
  `VP_MODEL_HOST_IDLE_S`), removing its socket.

Frames (network byte order): request `VPM1` + op (1 byte) + payload length (u32); an embed payload is
u32 count, then u32 length + UTF-8 bytes per text. Response `VPM1` + status + length: OK carries u32
rows, u32 dims and rows × dims little-endian float32; ERROR a `CODE: message`; INFO a JSON object.
This module imports nothing heavy at load: the client imports it for the protocol and paths.
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
MAX_CLIENTS_SHOWN = 256  # pids remembered for `doctor` and the tests
FRAME_TIMEOUT_S = 30.0  # the rest of a frame whose header arrived must follow within this
SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes on Linux, 104 on macOS
IDLE_ENV = "VP_MODEL_HOST_IDLE_S"
DIR_ENV = "VP_MODEL_HOST_DIR"


def supported() -> bool:
    """AF_UNIX and fcntl exist (not on Windows): the shared host is possible."""
    try:
        import fcntl  # noqa: F401
    except ImportError:
        return False
    return hasattr(socket, "AF_UNIX")


def idle_seconds() -> float:
    raw = os.environ.get(IDLE_ENV, "").strip()
    try:
        return max(0.05, float(raw)) if raw else local.IDLE_UNLOAD_S
    except ValueError:
        return local.IDLE_UNLOAD_S


def default_dir() -> Path:
    """VP_MODEL_HOST_DIR, else $XDG_RUNTIME_DIR/vantage-peers, else <tempdir>/vantage-peers-<uid>."""
    if os.environ.get(DIR_ENV):
        return Path(os.environ[DIR_ENV]).expanduser()
    if os.environ.get("XDG_RUNTIME_DIR"):
        return Path(os.environ["XDG_RUNTIME_DIR"]) / "vantage-peers"
    return Path(tempfile.gettempdir()) / f"vantage-peers-{os.getuid()}"


def paths(directory: Path, model: str = local.MODEL) -> dict[str, Path]:
    return {kind: directory / f"{model}.{kind}" for kind in ("sock", "lock", "spawn", "log", "fallback")}


def check_dir(directory: Path) -> str | None:
    """Create `directory` 0700 if absent; None when it is safe, else why not (another local user must
    not be able to plant a socket or a lock there)."""
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        st = os.lstat(directory)
    except OSError as exc:
        return f"the model host folder {directory} cannot be created ({exc.strerror or exc})"
    import stat

    if not stat.S_ISDIR(st.st_mode):
        return f"the model host folder {directory} is not a directory (a symlink or a file)"
    if st.st_uid != os.getuid():
        return f"the model host folder {directory} belongs to uid {st.st_uid}, not to this user ({os.getuid()})"
    if st.st_mode & 0o077:
        return (f"the model host folder {directory} is open to other users (mode {oct(st.st_mode & 0o777)}); "
                "it must be 0700 — run `chmod 700` on it or set VP_MODEL_HOST_DIR")
    if len(str(paths(directory)["sock"]).encode()) > SOCKET_PATH_MAX:
        return f"the socket path in {directory} is too long for a Unix socket; set VP_MODEL_HOST_DIR to a shorter folder"
    return None


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


def recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks, left = [], n
    while left:
        chunk = sock.recv(min(left, 1 << 20))
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
    def __init__(self, directory: Path, *, idle_s: float) -> None:
        self.paths = paths(directory)
        self.idle_s = idle_s
        self.embedder = local.LocalEmbedder(idle_unload_s=None)  # the host exits instead of unloading
        self.gate = Gate()
        self.started = time.time()
        self.last_request = time.monotonic()
        self.active = 0  # requests being served
        self.requests = 0
        self.batches = 0  # inference turns taken (doctor, tests)
        self.clients: set[int] = set()  # pids that sent an embed request (doctor, tests)
        self.connections = 0
        self.state = threading.Lock()
        self.closing = False
        self.listener: socket.socket | None = None
        self.inode = 0

    # Single instance: the lock is held from here to the process's exit.
    def acquire(self, wait_s: float = 10.0) -> bool:
        import fcntl

        self._lock_fh = open(self.paths["lock"], "a+")  # noqa: SIM115 - held for the host's life
        deadline = time.monotonic() + wait_s
        while True:
            try:
                fcntl.flock(self._lock_fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except OSError:
                pass
            if _answers(self.paths["sock"]) or time.monotonic() > deadline:
                return False  # another host serves (or holds the lock without serving: give up)
            time.sleep(0.05)  # the holder is starting or exiting: wait for it

    def bind(self) -> None:
        sock_path = self.paths["sock"]
        with contextlib.suppress(FileNotFoundError):
            os.unlink(sock_path)  # stale: its host died without removing it (we hold the lock)
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old = os.umask(0o177)
        try:
            listener.bind(str(sock_path))
        finally:
            os.umask(old)
        listener.listen(128)
        self.listener = listener
        self.inode = os.stat(sock_path).st_ino  # to notice the socket removed or replaced under us

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
            uid = peer_uid(conn)
            if uid is not None and uid != os.getuid():
                conn.close()  # another user's process: never served
                continue
            with self.state:
                if self.connections >= MAX_CONNECTIONS:
                    full = True
                else:
                    full = False
                    self.connections += 1
            if full:
                with contextlib.suppress(OSError):
                    conn.sendall(frame(ERROR, b"HOST_BUSY: too many connections to the model host; retry"))
                conn.close()
                continue
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _watch_idle(self) -> None:
        while True:
            time.sleep(min(1.0, self.idle_s / 4))
            try:
                replaced = os.stat(self.paths["sock"]).st_ino != self.inode
            except FileNotFoundError:
                replaced = True
            if replaced:  # the folder was cleaned (tmp cleaner, rm -rf): no client can reach us any more
                os._exit(0)
            with self.state:
                if self.active == 0 and time.monotonic() - self.last_request >= self.idle_s:
                    self.closing = True  # under the lock: no request starts after this
                    break
        self.shutdown()

    def shutdown(self) -> None:
        # Remove the socket while still holding the lock, then exit (the lock goes with the process).
        with contextlib.suppress(OSError):
            os.unlink(self.paths["sock"])
        if self.listener is not None:
            with contextlib.suppress(OSError):
                self.listener.close()
        os._exit(0)

    def _connection(self, conn: socket.socket) -> None:
        client = peer_pid(conn)
        try:
            conn.settimeout(max(self.idle_s, FRAME_TIMEOUT_S))
            while not self.closing:
                try:
                    header = recv_exact(conn, HEADER.size)
                except (FrameError, OSError):
                    return  # the client left (or idled out) between requests
                conn.settimeout(FRAME_TIMEOUT_S)
                magic, op, size = HEADER.unpack(header)
                if magic != MAGIC:
                    conn.sendall(frame(ERROR, b"BAD_FRAME: not a vantage-peers model host request"))
                    return
                if size > MAX_REQUEST_BYTES:
                    conn.sendall(frame(ERROR, f"TOO_LARGE: a request of {size} bytes, at most {MAX_REQUEST_BYTES}; "
                                              "send fewer or shorter texts".encode()))
                    return  # the payload is not read: the connection cannot continue
                payload = recv_exact(conn, size)
                conn.sendall(self._answer(op, payload, client))
                conn.settimeout(max(self.idle_s, FRAME_TIMEOUT_S))
        except (FrameError, OSError):
            return  # half a frame, a vanished client, a timeout: this connection only
        finally:
            with self.state:
                self.connections -= 1
            with contextlib.suppress(OSError):
                conn.close()

    def _answer(self, op: int, payload: bytes, client: int | None) -> bytes:
        if op == OP_INFO:
            with self.state:
                info = {"pid": os.getpid(), "model": local.MODEL, "dimensions": local.DIMENSIONS,
                        "loaded": self.embedder.loaded, "requests": self.requests, "active": self.active,
                        "batches": self.batches, "clients": sorted(self.clients),
                        "connections": self.connections, "idleSeconds": self.idle_s,
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


def _answers(sock_path: Path) -> bool:
    """Something accepts connections on `sock_path`."""
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(sock_path))
        return True
    except OSError:
        return False
    finally:
        probe.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m vantage_peers.search.model_host",
                                     description="The shared local-model host (see docs/recall.md).")
    parser.add_argument("--dir", type=Path, default=None, help="its folder (default: VP_MODEL_HOST_DIR, "
                        "$XDG_RUNTIME_DIR/vantage-peers or <tmp>/vantage-peers-<uid>)")
    parser.add_argument("--detach", action="store_true", help="fork and let the starting process go at once "
                        "(how shared_model starts it: the host is then nobody's child)")
    args = parser.parse_args(argv)
    if args.detach and os.fork() > 0:
        os._exit(0)
    directory = args.dir or default_dir()
    problem = check_dir(directory)
    if problem:
        print(f"MODEL_HOST_DIR: {problem}", file=sys.stderr)
        return 2
    host = Host(directory, idle_s=idle_seconds())
    if not host.acquire():
        return 0  # another host holds the lock and serves: nothing to do
    host.bind()
    print(f"model host {os.getpid()} listening on {host.paths['sock']} (idle exit after {host.idle_s:g} s)",
          file=sys.stderr, flush=True)
    host.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main())
