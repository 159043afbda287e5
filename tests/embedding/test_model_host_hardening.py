"""#32 item 6: the model host's folder is checked from `/` down and used through its descriptor; a slow
or greedy local client cannot hold the host's connections — with real processes and sockets.

Outcomes only, never durations: the bounds below are generous waits for a loaded 2-core machine.
"""

from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from support.model_hosts import hosts, stop
from support.model_hosts import wait_until as _wait

from vantage_peers.embedding import local, model_host, shared_model
from vantage_peers.embedding.model_host import ERROR, HEADER, MAGIC, OP_EMBED, frame

ROOT = os.geteuid() == 0
NOBODY = 65534


@pytest.fixture
def base():
    """A fresh 0700 folder with a short path (Unix socket paths are limited to ~100 bytes)."""
    where = Path(tempfile.mkdtemp(prefix="vpmh-"))
    yield where
    stop(list(hosts(where)))
    subprocess.run(["rm", "-rf", str(where)], check=False)




def _read_frame(s: socket.socket) -> tuple[int, bytes]:
    magic, status, size = HEADER.unpack(model_host.recv_exact(s, HEADER.size))
    assert magic == MAGIC
    return status, model_host.recv_exact(s, size)


def _start_host(directory: Path, **env: str) -> subprocess.Popen:
    """A host started directly (so no connection of this process counts against it), once it answers."""
    directory.mkdir(mode=0o700, exist_ok=True)
    proc = subprocess.Popen([sys.executable, "-m", "vantage_peers.embedding.model_host", "--dir", str(directory)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "VP_MODEL_HOST_IDLE_S": "300", **env})
    if not _wait(lambda: proc.poll() is not None or shared_model.SharedEmbedder(directory).info(), 60):
        proc.kill()
        raise AssertionError("the model host did not start")
    assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
    return proc


def _end(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(30)


# ---- 1. the whole path is checked --------------------------------------------------------------

def test_every_folder_on_the_way_is_checked_not_only_the_last(base):
    """Old: only the last folder was looked at, so a parent another user may write (or owns) was accepted."""
    # A parent anyone may write, not sticky: another user could rename `h` away and plant a symlink.
    (base / "open").mkdir()
    (base / "open").chmod(0o777)
    why = model_host.check_dir(base / "open" / "h")
    assert why and "writable by other users" in why and f"{base}/open" in why, why
    # Sticky and world-writable (like /tmp): others cannot rename or remove our entries there.
    (base / "sticky").mkdir()
    (base / "sticky").chmod(0o1777)
    assert model_host.check_dir(base / "sticky" / "h") is None
    # Missing folders are created 0700 on the way down, each one checked.
    assert model_host.check_dir(base / "new" / "deeper" / "h") is None
    assert (os.stat(base / "new").st_mode & 0o777) == 0o700 and (base / "new" / "deeper" / "h").is_dir()
    # A symlink on the way that only this user could have made is followed (its target is checked);
    # the folder itself is never a symlink, and a file on the way is not a folder.
    (base / "real").mkdir(mode=0o700)
    (base / "mine").symlink_to(base / "real")
    assert model_host.check_dir(base / "mine" / "h") is None and (base / "real" / "h").is_dir()
    (base / "sticky" / "mine").symlink_to(base / "real")  # ours, in a sticky folder: nobody else can replace it
    assert model_host.check_dir(base / "sticky" / "mine" / "h") is None
    (base / "link-to-h").symlink_to(base / "real" / "h")
    assert "symlink" in model_host.check_dir(base / "link-to-h")
    (base / "file").write_text("x")
    assert "not a directory" in model_host.check_dir(base / "file" / "h")
    # A symlink on the way inside a folder others may write is refused, whoever owns the target.
    (base / "open" / "l").symlink_to(base / "real")
    assert "writable by other users" in model_host.check_dir(base / "open" / "l" / "h")
    if not ROOT:
        return
    # A parent owned by another user (even 0755): that user can swap what lies below it.
    theirs = base / "theirs"
    theirs.mkdir(mode=0o755)
    (theirs / "h").mkdir(mode=0o700)  # ours, 0700: the last folder alone looks fine
    os.chown(theirs, NOBODY, NOBODY)
    why = model_host.check_dir(theirs / "h")
    assert why and f"belongs to uid {NOBODY}" in why and "neither root nor this user" in why, why
    # A symlink made by another user, in a folder only we may write (planted earlier, say).
    (base / "planted").symlink_to(base / "real")
    os.lchown(base / "planted", NOBODY, NOBODY)
    why = model_host.check_dir(base / "planted" / "h")
    assert why and "symlink that another user made" in why, why


@pytest.mark.parametrize("bad", ["parent open to all", "parent of another uid"])
def test_an_unsafe_parent_means_in_process_no_host_and_nothing_created(base, bad, monkeypatch):
    parent = base / "p"
    parent.mkdir()
    where = parent / "h"
    where.mkdir(mode=0o700)
    if bad == "parent open to all":
        parent.chmod(0o777)
        why = "writable by other users"
    else:
        if not ROOT:
            pytest.skip("giving a folder to another uid needs root")
        parent.chmod(0o755)
        os.chown(parent, NOBODY, NOBODY)
        why = f"belongs to uid {NOBODY}"
    client = shared_model.SharedEmbedder(where)
    vecs = client.embed_array(["The automobile needs new tyres"])
    assert client.last_fallback and why in client.last_fallback and client.spawned == 0
    assert np.allclose(vecs, local.LocalEmbedder(idle_unload_s=None).embed_array(["The automobile needs new tyres"]),
                       atol=1e-5)
    assert not list(where.iterdir()) and hosts(base) == {}  # no lock, log, start file or fallback note
    assert why in client.describe() and "in-process" in client.describe()
    monkeypatch.setenv("VP_MODEL_HOST_DIR", str(where))
    settings = type("S", (), {"embeddings": "local", "model_host": "shared"})()
    (status, label, detail), = shared_model.doctor_lines(settings)
    assert (status, label) == ("WARN", "model host") and why in detail
    # The host itself refuses the folder too (it is started with a path and checks it again).
    out = subprocess.run([sys.executable, "-m", "vantage_peers.embedding.model_host", "--dir", str(where)],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "MODEL_HOST_DIR:" in out.stderr and why in out.stderr, out.stderr
    assert not list(where.iterdir())


def test_a_path_swapped_after_the_check_does_not_redirect_files_or_the_socket(base):
    """Once checked, the folder is used through its descriptor: renaming it away and putting a symlink
    to another folder in its place does not move the lock, the log or a connect there."""
    name = model_host.names()
    real = base / "a" / "h"
    folder = model_host.open_dir(real)
    listener = decoy_listener = None
    try:
        # The swap: the checked path now leads to a decoy folder with a socket of its own.
        (base / "a").rename(base / "moved")
        decoy = base / "decoy" / "h"
        decoy.mkdir(parents=True, mode=0o700)
        (base / "a").symlink_to(base / "decoy")
        decoy_listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        decoy_listener.bind(str(decoy / name["sock"]))
        decoy_listener.listen(4)
        assert not folder.still_here()

        fd = folder.open(name["lock"], os.O_RDWR | os.O_CREAT)
        os.close(fd)
        fd = folder.open(name["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND)
        os.write(fd, b"written through the descriptor\n")
        os.close(fd)
        assert sorted(os.listdir(base / "moved" / "h")) == sorted([name["lock"], name["log"]])
        assert os.listdir(decoy) == [name["sock"]]  # nothing of ours went to the decoy

        # A socket bound and reached through the descriptor is the checked folder's, not the decoy's.
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        if folder.via_proc:
            listener.bind(folder.address(name["sock"]))
            listener.listen(4)
            assert (base / "moved" / "h" / name["sock"]).exists()
            conn = model_host.connect(folder, name["sock"], 5.0)
            listener.settimeout(10)
            accepted, _ = listener.accept()  # it reached ours…
            accepted.close()
            conn.close()
        else:  # no /proc: connect goes by path, and the folder is checked again around it
            with pytest.raises(ConnectionRefusedError):
                model_host.connect(folder, name["sock"], 5.0)
        decoy_listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            decoy_listener.accept()  # …and nothing ever knocked on the decoy's
        # A file planted where we open one (a symlink, a FIFO) is refused, never followed or blocked on.
        os.symlink(base / "decoy" / "x", base / "moved" / "h" / name["spawn"])
        with pytest.raises(OSError):
            folder.open(name["spawn"], os.O_RDWR | os.O_CREAT)
        os.mkfifo(base / "moved" / "h" / name["fallback"], 0o600)
        with pytest.raises(model_host.UnsafeDir, match="not a plain file"):
            folder.open(name["fallback"], os.O_RDWR | os.O_CREAT)
        with pytest.raises((OSError, model_host.UnsafeDir)):  # no reader: refused at once, not a hang
            folder.open(name["fallback"], os.O_WRONLY | os.O_APPEND)
        assert not (base / "decoy" / "x").exists()
    finally:
        folder.close()
        for s in (listener, decoy_listener):
            if s is not None:
                s.close()


@pytest.mark.skipif(not ROOT, reason="planting another user's symlink needs root")
def test_a_host_started_on_a_path_swapped_by_another_user_refuses_it(base):
    """The client checked the folder and launched the host; another user's symlink replaced a component
    before the host looked: the host refuses it (exit 2), and creates nothing where the link points."""
    (base / "a" / "h").mkdir(parents=True, mode=0o700)
    (base / "a").rename(base / "moved")
    (base / "decoy" / "h").mkdir(parents=True, mode=0o700)
    (base / "a").symlink_to(base / "decoy")
    os.lchown(base / "a", NOBODY, NOBODY)
    out = subprocess.run([sys.executable, "-m", "vantage_peers.embedding.model_host", "--dir", str(base / "a" / "h")],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 2 and "symlink that another user made" in out.stderr, out.stderr
    assert not list((base / "decoy" / "h").iterdir()) and not list((base / "moved" / "h").iterdir())


# ---- 2. slow and greedy clients ------------------------------------------------------------------

def _trickle(sock_path: Path, data: bytes, every: float, outcome: dict) -> None:
    """Send `data` one byte at a time; stop when the host closes the connection (and keep its last word)."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(sock_path))
    sent = 0
    try:
        for byte in data:
            readable, _, _ = select.select([s], [], [], 0)
            if readable:
                break  # the host spoke (an error frame) or closed
            try:
                s.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                break
            sent += 1
            time.sleep(every)
        outcome["sent"] = sent
        s.settimeout(30)
        try:
            outcome["answer"] = _read_frame(s)
        except (model_host.FrameError, OSError) as exc:
            outcome["answer"] = repr(exc)
    finally:
        s.close()


def test_a_slow_loris_is_cut_off_at_the_frame_deadline_and_an_idle_connection_is_closed(base):
    """Old: the 30 s timeout was per read, so one byte every few seconds kept a connection forever."""
    where = base / "h"
    proc = _start_host(where, VP_MODEL_HOST_FRAME_S="2", VP_MODEL_HOST_CONN_IDLE_S="3")
    try:
        sock = model_host.paths(where)["sock"]
        request = frame(OP_EMBED, model_host.encode_texts(["slow " * 40]))  # 213 bytes
        outcomes = [{} for _ in range(3)]
        slow = [threading.Thread(target=_trickle, args=(sock, request, 0.1, o)) for o in outcomes]
        for t in slow:
            t.start()
        # Meanwhile a normal client is served (the slow ones each hold only their own connection).
        client = shared_model.SharedEmbedder(where)
        assert client.embed_array(["a normal request"]).shape == (1, 384) and client.last_fallback is None
        for t in slow:
            t.join(120)
        for o in outcomes:  # every trickle was cut off before its frame was whole, with a coded error
            assert o["sent"] < len(request), o
            status, body = o["answer"]
            assert status == ERROR and body.startswith(b"FRAME_TIMEOUT"), o
        # A connection that sends nothing is closed after the idle time between frames.
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.connect(str(sock))
            s.settimeout(60)
            assert s.recv(1) == b""
        # So is the client's pooled connection; its next request simply takes a fresh one.
        pooled = client._pool[0]
        pooled.settimeout(60)
        assert pooled.recv(1, socket.MSG_PEEK) == b""
        assert client.embed_array(["again"]).shape == (1, 384)
        assert client.last_fallback is None and client.spawned == 0
        info = client.info()
        assert info["frameSeconds"] == 2 and info["connectionIdleSeconds"] == 3
        assert proc.poll() is None
    finally:
        _end(proc)


GREEDY = textwrap.dedent("""
    import json, socket, struct, sys, time
    sock, cap = sys.argv[1], int(sys.argv[2])
    held = []
    for i in range(cap):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.connect(sock)
        if i % 2:
            s.sendall(b"VP")  # half of them mid-frame, the others idle between frames
        held.append(s)

    def ask():
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(30)
        s.connect(sock)
        try:
            s.sendall(b"VPM1" + struct.pack("!BI", 2, 0))  # INFO
        except OSError:
            pass  # refused and closed already: its error frame is still there to read
        head = b""
        while len(head) < 9:
            chunk = s.recv(9 - len(head))
            if not chunk:
                return None, s
            head += chunk
        _, status, size = struct.unpack("!4sBI", head)
        body = b""
        while len(body) < size:
            body += s.recv(size - len(body))
        return (status, body.decode()), s

    over, extra = ask()
    extra.close()
    print(json.dumps({"over": over}), flush=True)
    sys.stdin.readline()  # the test is served meanwhile
    held.pop().close()  # one slot of this process freed: its next connection is served
    deadline = time.monotonic() + 60
    while True:
        again, extra = ask()
        extra.close()
        if again and again[0] == 2 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    print(json.dumps({"again": again}), flush=True)
    sys.stdin.readline()
""")


def test_one_process_cannot_take_every_connection(base):
    """Old: up to 512 connections from one process. Now MAX_PEER_CONNECTIONS; the next one gets a coded
    error frame and is closed, while other processes are served."""
    where = base / "h"
    proc = _start_host(where, VP_MODEL_HOST_FRAME_S="600")  # the held ones stay held for the test
    cap = model_host.MAX_PEER_CONNECTIONS
    greedy = subprocess.Popen([sys.executable, "-c", GREEDY, str(model_host.paths(where)["sock"]), str(cap)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = greedy.stdout.readline()
        assert line, greedy.stderr.read()
        status, body = json.loads(line)["over"]
        assert status == ERROR and body.startswith("TOO_MANY_CONNECTIONS") and str(greedy.pid) in body, body
        # Another process (this one) is served while the greedy one holds its `cap` connections…
        client = shared_model.SharedEmbedder(where)
        assert client.embed_array(["still served"]).shape == (1, 384) and client.last_fallback is None
        info = client.info()
        assert info["refused"] == 1 and info["connections"] >= cap + 1
        # …and a burst of one server's threads stays under the cap (the client's own limit).
        failures: list[str] = []

        def burst(i: int) -> None:
            try:
                client.embed_array([f"burst {i}"] * 3)  # one client per process, as shared_embedder()
            except Exception as exc:  # noqa: BLE001 - reported below
                failures.append(repr(exc))

        many = [threading.Thread(target=burst, args=(i,)) for i in range(2 * cap)]
        for t in many:
            t.start()
        for t in many:
            t.join(300)
        assert not failures and client.info()["refused"] == 1
        greedy.stdin.write("\n")
        greedy.stdin.flush()
        again = json.loads(greedy.stdout.readline())["again"]
        assert again and again[0] == model_host.INFO  # a freed slot is that process's again
    finally:
        greedy.kill()
        greedy.wait(30)
        _end(proc)
