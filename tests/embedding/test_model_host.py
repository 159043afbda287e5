"""#20: one local-model process per user, shared by every vantage-peers process — with real processes.

Each test has its own host folder (short, under the session's temp folder) so hosts never mix.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import anyio
import numpy as np
import pytest
from mcp import Client, StdioServerParameters
from support.model_hosts import hosts, stop
from support.model_hosts import wait_until as _wait
from support.paths import console_script as _script

from vantage_peers.db import Database
from vantage_peers.domains.memory import vectors
from vantage_peers.embedding import local, model_host, shared_model
from vantage_peers.embedding.model_host import ERROR, HEADER, INFO, MAGIC, OK, OP_EMBED, OP_INFO, frame

TEXTS = ["The automobile needs new tyres", "Rotate the OKLCH palette tokens", "PR-1234 fixed the webhook retries",
         "   ", "Clerk middleware guards private pages"]


@pytest.fixture
def host_dir():
    """A fresh 0700 folder with a short path (Unix socket paths are limited to ~100 bytes)."""
    where = Path(tempfile.mkdtemp(prefix="vpmh-"))
    yield where / "h"
    stop(list(hosts(where)))
    subprocess.run(["rm", "-rf", str(where)], check=False)


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _exchange(sock_path: Path, data: bytes, *, read: bool = True) -> tuple[int, bytes] | None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(60)
        s.connect(str(sock_path))
        s.sendall(data)
        if not read:
            return None
        magic, status, size = HEADER.unpack(model_host.recv_exact(s, HEADER.size))
        assert magic == MAGIC
        return status, model_host.recv_exact(s, size)


def _server_env(db: Path, directory: Path, **extra: str) -> dict[str, str]:
    env = {**os.environ, "VP_DB_PATH": str(db), "VP_EMBEDDINGS": "local", "VP_TICK_SECONDS": "1",
           "VP_MODEL_HOST_DIR": str(directory), **extra}
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "VP_MODEL_HOST"):
        env.pop(key, None)
    return env


def _vector_count(db: Path) -> int:
    database = Database(str(db))
    try:
        return database.read(lambda c: vectors.count(c) if vectors.table_exists(c) else 0)
    finally:
        database.close()


def _server_pids() -> list[int]:
    """The `vantage-peers` stdio servers this test process started."""
    mine, out = str(os.getpid()), []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmd = (stat.parent / "cmdline").read_bytes()
        except OSError:
            continue
        if fields[1] == mine and b"vantage-peers" in cmd:
            out.append(int(stat.parent.name))
    return out


def test_the_host_gives_the_in_process_vectors_and_refuses_bad_frames_without_dying(host_dir):
    client = shared_model.SharedEmbedder(host_dir)
    mine = local.LocalEmbedder(idle_unload_s=None).embed_array(TEXTS)
    theirs = client.embed_array(TEXTS)
    assert client.last_fallback is None and client.spawned == 1
    assert theirs.dtype == np.float32 and theirs.shape == (5, 384)
    assert np.allclose(mine, theirs, atol=1e-5)
    big = client.embed_array(["x"] * (model_host.MAX_TEXTS + 10))  # split into two requests by the client
    assert big.shape == (model_host.MAX_TEXTS + 10, 384) and np.allclose(big[-1], client.embed_array(["x"])[0], atol=1e-5)
    pid = client.info()["pid"]
    assert list(hosts(host_dir)) == [pid]
    sock = client.paths["sock"]
    assert (os.stat(host_dir).st_mode & 0o777) == 0o700 and (os.stat(sock).st_mode & 0o777) == 0o600

    # Oversize: the header announces more bytes than allowed -> error frame, then the connection is closed.
    status, body = _exchange(sock, HEADER.pack(MAGIC, OP_EMBED, model_host.MAX_REQUEST_BYTES + 1))
    assert status == ERROR and body.startswith(b"TOO_LARGE")
    # Too many texts in a well-formed frame: error frame, and the same connection keeps serving.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(60)
        s.connect(str(sock))
        s.sendall(frame(OP_EMBED, model_host.encode_texts(["a"] * (model_host.MAX_TEXTS + 1))))
        magic, status, size = HEADER.unpack(model_host.recv_exact(s, HEADER.size))
        assert status == ERROR and model_host.recv_exact(s, size).startswith(b"TOO_MANY_TEXTS")
        s.sendall(frame(OP_EMBED, model_host.encode_texts(["Rotate the OKLCH palette tokens"])))
        magic, status, size = HEADER.unpack(model_host.recv_exact(s, HEADER.size))
        body = model_host.recv_exact(s, size)
        assert status == OK and np.allclose(np.frombuffer(body, "<f4", offset=8), mine[1], atol=1e-5)
    # A count larger than the texts sent, a text past the end, an unknown op, garbage, half a frame.
    lying = frame(OP_EMBED, struct.pack("!I", 3) + struct.pack("!I", 1) + b"a")
    assert _exchange(sock, lying)[1].startswith(b"BAD_FRAME")
    assert _exchange(sock, frame(OP_EMBED, struct.pack("!II", 1, 10**9)))[1].startswith(b"BAD_FRAME")
    assert _exchange(sock, frame(99, b""))[1].startswith(b"BAD_FRAME")
    assert _exchange(sock, os.urandom(4096).replace(b"VPM1", b"xxxx"))[0] == ERROR
    _exchange(sock, frame(OP_EMBED, model_host.encode_texts(["half"]))[:9], read=False)
    _exchange(sock, b"VP", read=False)
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:  # vanishes while its answer is computed
        s.connect(str(sock))
        s.sendall(frame(OP_EMBED, model_host.encode_texts(["bye"] * 64)))
    # Non-UTF-8 bytes in a text are read with replacement, never a crash.
    status, body = _exchange(sock, frame(OP_EMBED, struct.pack("!II", 1, 4) + b"\xff\xfe\x00a"))
    assert status == OK
    # Still the same host, still serving, same vectors.
    assert np.allclose(client.embed_array(TEXTS), mine, atol=1e-5)
    assert client.info()["pid"] == pid and list(hosts(host_dir)) == [pid]
    status, body = _exchange(sock, frame(OP_INFO, b""))
    assert status == INFO and json.loads(body)["pid"] == pid


@pytest.mark.skipif(os.geteuid() != 0, reason="becoming another uid needs root")
def test_another_users_process_is_refused_by_the_host(host_dir):
    client = shared_model.SharedEmbedder(host_dir)
    client.embed_array(["warm"])
    sock = client.paths["sock"]
    # Open the way on purpose (the folder is 0700 and the socket 0600, so this is the second wall).
    os.chmod(host_dir.parent, 0o755)
    os.chmod(host_dir, 0o755)
    os.chmod(sock, 0o666)
    probe = textwrap.dedent(f"""
        import os, socket, struct
        os.setgid(65534); os.setuid(65534)
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect({str(sock)!r})
        try:
            s.sendall(b"VPM1" + struct.pack("!BI", 2, 0))
            print(repr(s.recv(100)))
        except OSError as exc:
            print("error", exc)
    """)
    # The interpreter itself, not the venv's link to it: the checkout may sit in a folder that
    # uid 65534 cannot enter (a 0700 temporary folder in CI). The probe needs only the stdlib.
    python = os.path.realpath(sys.executable)
    out = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60, cwd="/")
    assert out.returncode == 0, out.stderr
    answer = out.stdout.strip()  # closed unanswered: EOF, reset or broken pipe — never an INFO frame
    assert answer == "b''" or answer.startswith(("error [Errno 104]", "error [Errno 32]")), answer
    os.chmod(host_dir, 0o700)
    assert client.info() is not None  # the owner is still served


@pytest.mark.parametrize("bad", ["someone else's", "0777"])
def test_an_unsafe_folder_means_in_process_with_a_reason(tmp_path, bad, monkeypatch):
    where = tmp_path / "shared"
    where.mkdir()
    if bad == "0777":
        where.chmod(0o777)
        why = "open to other users"
    else:
        if os.geteuid() != 0:
            pytest.skip("giving a folder to another uid needs root")
        where.chmod(0o700)
        os.chown(where, 65534, 65534)
        why = "belongs to uid 65534"
    client = shared_model.SharedEmbedder(where)
    vecs = client.embed_array(TEXTS[:2])
    assert why in client.last_fallback and client.spawned == 0
    assert np.allclose(vecs, local.LocalEmbedder(idle_unload_s=None).embed_array(TEXTS[:2]), atol=1e-5)
    assert not list(where.iterdir()) and hosts(where) == {}  # nothing planted, nothing started
    assert why in client.describe() and "in-process" in client.describe()  # doctor's model line
    monkeypatch.setenv("VP_MODEL_HOST_DIR", str(where))
    settings = type("S", (), {"embeddings": "local", "model_host": "shared"})()
    (status, label, detail), = shared_model.doctor_lines(settings)
    assert (status, label) == ("WARN", "model host") and why in detail


@pytest.mark.slow
def test_a_host_that_cannot_start_means_in_process_for_that_call(host_dir, monkeypatch):
    monkeypatch.setattr(shared_model, "SPAWN_WAIT_S", 1.0)
    monkeypatch.setattr(shared_model.sys, "executable", "/bin/false")  # the host process exits at once
    client = shared_model.SharedEmbedder(host_dir)
    vecs = client.embed_array(TEXTS[:2])
    assert client.spawned == 1 and "did not start" in client.last_fallback
    assert np.allclose(vecs, local.LocalEmbedder(idle_unload_s=None).embed_array(TEXTS[:2]), atol=1e-5)
    # Kept for `vantage-peers doctor`, which runs in another process.
    monkeypatch.setenv("VP_MODEL_HOST_DIR", str(host_dir))
    settings = type("S", (), {"embeddings": "local", "model_host": "shared"})()
    lines = shared_model.doctor_lines(settings)
    assert lines[0][:2] == ("ok", "model host") and "not running" in lines[0][2]
    assert lines[1][0] == "WARN" and "did not start" in lines[1][2] and str(os.getpid()) in lines[1][2]
    client.embed_array(["again"])  # within HOST_RETRY_S: in-process at once, no second start
    assert client.spawned == 1
    # Steady traffic during the cool-down does not push the retry back: once Python works again,
    # the host is started and used.
    monkeypatch.undo()
    monkeypatch.setattr(shared_model, "HOST_RETRY_S", 0.5)
    client._retry_at = time.monotonic() + 0.5
    deadline = time.monotonic() + 60
    while client.spawned == 1 and time.monotonic() < deadline:
        client.embed_array(["traffic"])
    assert client.spawned == 2 and client.info() is not None and client.fallbacks == 1


@pytest.mark.slow
def test_a_stale_socket_is_replaced_and_a_killed_host_is_restarted(host_dir):
    host_dir.mkdir(mode=0o700)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(model_host.paths(host_dir)["sock"]))  # a socket file nobody listens on
    stale.close()
    client = shared_model.SharedEmbedder(host_dir)
    first = client.embed_array(TEXTS)
    assert client.last_fallback is None and client.spawned == 1
    (pid,) = hosts(host_dir)
    os.kill(pid, signal.SIGKILL)
    assert _wait(lambda: not _alive(pid), 10)
    again = client.embed_array(TEXTS)  # its pooled connection is dead: one restart, no fallback
    assert client.last_fallback is None and client.spawned == 2 and np.allclose(first, again, atol=1e-5)
    (new,) = hosts(host_dir)
    assert new != pid


RACER = textwrap.dedent("""
    import json, sys, time
    from pathlib import Path
    from vantage_peers.embedding.shared_model import SharedEmbedder
    start = float(sys.argv[2])
    while time.time() < start:
        time.sleep(0.001)
    client = SharedEmbedder(Path(sys.argv[1]))
    vec = client.embed_array(["race " + sys.argv[3]])
    print(json.dumps({"pid": client.info()["pid"], "fallback": client.last_fallback, "spawned": client.spawned,
                      "dims": int(vec.shape[1])}))
""")


@pytest.mark.slow
def test_processes_asking_at_once_start_exactly_one_host(host_dir):
    start = time.time() + 3.0  # all of them imported and waiting before the gun
    racers = [subprocess.Popen([sys.executable, "-c", RACER, str(host_dir), str(start), str(i)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for i in range(4)]
    results = []
    for racer in racers:
        out, err = racer.communicate(timeout=180)
        assert racer.returncode == 0, err
        results.append(json.loads(out))
    assert {r["fallback"] for r in results} == {None} and {r["dims"] for r in results} == {384}
    assert len({r["pid"] for r in results}) == 1
    assert sum(r["spawned"] for r in results) == 1  # the start lock: one process launched it
    assert list(hosts(host_dir)) == [results[0]["pid"]]


def test_hosts_started_at_once_leave_exactly_one(host_dir):
    host_dir.mkdir(mode=0o700)
    procs = [subprocess.Popen([sys.executable, "-m", "vantage_peers.embedding.model_host", "--dir", str(host_dir)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(4)]
    try:
        assert _wait(lambda: sum(p.poll() is not None for p in procs) == 3, 60), "the extra hosts did not exit"
        assert [p.returncode for p in procs if p.poll() is not None] == [0, 0, 0]
        (survivor,) = [p for p in procs if p.poll() is None]
        assert list(hosts(host_dir)) == [survivor.pid]
        assert shared_model.SharedEmbedder(host_dir).info()["pid"] == survivor.pid
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()


@pytest.mark.slow
def test_an_idle_host_exits_removes_its_socket_and_the_next_call_starts_it(host_dir, monkeypatch):
    monkeypatch.setenv("VP_MODEL_HOST_IDLE_S", "1")
    client = shared_model.SharedEmbedder(host_dir)
    client.embed_array(["warm"])
    (pid,) = hosts(host_dir)
    sock = client.paths["sock"]
    assert _wait(lambda: not _alive(pid) and not sock.exists(), 30), "the idle host did not exit"
    client.embed_array(["again"])
    assert client.last_fallback is None and client.spawned == 2
    (new,) = hosts(host_dir)
    assert new != pid and sock.exists()


@pytest.mark.slow
def test_stdio_servers_share_one_host_and_survive_its_death(tmp_path, host_dir):
    db = tmp_path / "shared.db"
    params = [StdioServerParameters(command=_script(), args=[], env=_server_env(db, host_dir, VP_ORCHESTRATOR=name),
                                    cwd=str(tmp_path)) for name in ("alice", "bob", "carol")]
    notes = {"alice": "The automobile needs new tyres before the trip",
             "bob": "Clerk middleware guards private pages and redirects to sign-in",
             "carol": "Acme runs PostgreSQL 15 with pgvector for the catalogue"}
    seen: dict[str, object] = {}

    async def main():
        async with Client(params[0]) as a, Client(params[1]) as b, Client(params[2]) as c:
            clients = {"alice": a, "bob": b, "carol": c}
            ids = {}
            for name, client in clients.items():
                stored = await client.call_tool("store_memory", {"namespace": "project/acme", "type": "note",
                                                                  "content": notes[name]})
                assert not stored.is_error, stored
                ids[name] = stored.structured_content["memoryId"]
            for _ in range(600):  # each server's scheduler embeds its own write through the host
                if _vector_count(db) == 3:
                    break
                await anyio.sleep(0.1)
            assert _vector_count(db) == 3
            servers = _server_pids()
            assert len(servers) == 3
            (pid,) = hosts(host_dir)
            info = shared_model.SharedEmbedder(host_dir).info()
            seen["pid"], seen["clients"] = pid, info["clients"]
            for name, query in (("alice", "car tires"), ("bob", "authentication for routes"),
                                ("carol", "which database do we use")):
                for client in clients.values():  # every server's recall works, hybrid
                    found = (await client.call_tool("recall", {"query": query, "namespace": "project/acme"}))
                    assert found.structured_content["mode"] == "hybrid", found
                    assert found.structured_content["items"][0]["_id"] == ids[name]
            info = shared_model.SharedEmbedder(host_dir).info()
            assert set(servers) <= set(info["clients"]), (servers, info)  # the same host served all three
            # SIGKILL the host while the servers are in use: the next write and recall still work.
            os.kill(pid, signal.SIGKILL)
            await anyio.to_thread.run_sync(lambda: _wait(lambda: not _alive(pid), 10))
            stored = await a.call_tool("store_memory", {"namespace": "project/acme", "type": "note",
                                                         "content": "The billing webhook retries after a 503"})
            assert not stored.is_error
            for _ in range(600):
                if _vector_count(db) == 4:
                    break
                await anyio.sleep(0.1)
            assert _vector_count(db) == 4  # embedded after the kill (restart, or in-process fallback)
            found = await b.call_tool("recall", {"query": "billing webhook retries", "namespace": "project/acme"})
            assert found.structured_content["items"][0]["_id"] == stored.structured_content["memoryId"]
            alive = hosts(host_dir)
            assert len(alive) == 1 and pid not in alive  # one new host, restarted by a server
            seen["new"] = next(iter(alive))

    anyio.run(main)
    # The host outlives the servers (it is theirs to share, not their child) and `doctor` reports it.
    assert _alive(seen["new"])  # type: ignore[arg-type]
    out = subprocess.run([_script(), "doctor"], capture_output=True, text=True, timeout=180,
                         env=_server_env(db, host_dir, VP_SCHEDULER="off"), cwd=str(tmp_path))
    assert "VP_MODEL_HOST = shared" in out.stdout, out.stdout
    assert f"shared; socket {host_dir}" in out.stdout and f"running, pid {seen['new']}" in out.stdout, out.stdout


def test_inprocess_mode_and_settings():
    from vantage_peers.embedding.embeddings import embedder_for
    from vantage_peers.pipeline.settings import Settings

    assert Settings.from_env({}, dotenv=False).model_host == "shared"
    inproc = Settings.from_env({"VP_MODEL_HOST": "InProcess"}, dotenv=False)
    assert inproc.model_host == "inprocess" and embedder_for(inproc) is local.local_embedder()
    shared = embedder_for(Settings.from_env({}, dotenv=False))
    assert isinstance(shared, shared_model.SharedEmbedder)
    assert shared.directory == Path(os.environ["VP_MODEL_HOST_DIR"])  # the session's sandbox (conftest)
    assert shared.model == local.MODEL and shared.dimensions == 384
    with pytest.raises(Exception, match="VP_MODEL_HOST"):
        Settings.from_env({"VP_MODEL_HOST": "gpu"}, dotenv=False)


def test_sign_codes_match_numpy_packbits():
    from array import array

    from vantage_peers.search.ann import signs

    rng = np.random.default_rng(20)
    for dims in (1, 7, 8, 9, 384, 1536):
        for _ in range(20):
            vec = rng.standard_normal(dims).astype(np.float32)
            vec[rng.integers(0, dims)] = 0.0  # zero is not positive
            expected = np.packbits(vec > 0).tobytes()
            assert signs(vec) == signs([float(x) for x in vec]) == signs(array("f", vec.tobytes())) == expected


NUMPY_FREE = textwrap.dedent("""
    import sys
    from pathlib import Path
    from anyio.from_thread import start_blocking_portal
    from mcp import Client
    from vantage_peers.domains.memory import indexer
    from vantage_peers.domains.memory.services import services
    from vantage_peers.server import create_app
    from vantage_peers.pipeline.settings import Settings
    s = Settings.from_env({"VP_DB_PATH": sys.argv[1], "VP_SCHEDULER": "off"}, dotenv=False)
    app = create_app(s)
    with start_blocking_portal() as p, p.wrap_async_context_manager(Client(app.mcp)) as c:
        p.call(c.call_tool, "store_memory", {"namespace": "n", "type": "fact", "content": "new tyres", "createdBy": "a"})
        svc = services(app)
        assert indexer.embed_pending(app.db, svc.embedder, owner="x")["embedded"] == 1
        found = p.call(c.call_tool, "recall", {"query": "car tires"}).structured_content
        assert found["mode"] == "hybrid", found
    print(sorted(m for m in ("numpy", "onnxruntime", "tokenizers") if m in sys.modules), svc.embedder.spawned)
""")


@pytest.mark.slow
def test_a_server_using_the_host_never_imports_the_model_stack(tmp_path, host_dir):
    env = {**os.environ, "VP_MODEL_HOST_DIR": str(host_dir)}
    env.pop("VP_MODEL_HOST", None)
    out = subprocess.run([sys.executable, "-c", NUMPY_FREE, str(tmp_path / "n.db")], capture_output=True, text=True,
                         timeout=180, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["[]", "1"]  # no numpy, no runtime: ≈17 MB + ≈120 MB stay in the host


@pytest.mark.slow
def test_a_host_whose_socket_was_removed_exits(host_dir):
    client = shared_model.SharedEmbedder(host_dir)
    client.embed_array(["warm"])
    (pid,) = hosts(host_dir)
    subprocess.run(["rm", "-rf", str(host_dir)], check=True)  # a tmp cleaner: nobody can reach it any more
    assert _wait(lambda: not _alive(pid), 30), "an unreachable host stayed alive"
    assert client.embed_array(["again"]).shape == (1, 384) and client.last_fallback is None
    assert len(hosts(host_dir)) == 1 and pid not in hosts(host_dir)


def test_no_python_to_start_the_host_means_in_process(host_dir, monkeypatch):
    monkeypatch.setattr(shared_model.sys, "executable", str(host_dir.parent / "no-such-python"))
    client = shared_model.SharedEmbedder(host_dir)
    assert client.embed(["still embedded"])[0].shape == (384,)
    assert "could not be started" in client.last_fallback


@pytest.mark.slow
def test_threads_embedding_while_the_host_is_killed_always_get_the_right_vectors(host_dir, monkeypatch):
    """Chaos: 4 threads embed in a loop while the host is SIGKILLed again and again; every answer is
    the model's (from a restarted host or in-process), never an exception. VP_MODEL_HOST_CHAOS=N for more kills."""
    import threading

    kills = int(os.environ.get("VP_MODEL_HOST_CHAOS", "3"))
    # A kill during the restarted host's first request is a fallback (by design); come back soon after.
    monkeypatch.setattr(shared_model, "HOST_RETRY_S", 1.0)
    client = shared_model.SharedEmbedder(host_dir)
    expected = local.LocalEmbedder(idle_unload_s=None).embed_array(TEXTS)
    client.embed_array(["warm"])
    stop_at, errors, calls = [False], [], [0]

    def work(offset: int) -> None:
        while not stop_at[0]:
            try:
                got = client.embed_array(TEXTS[offset:] + TEXTS[:offset])
                assert np.allclose(got, np.roll(expected, -offset, axis=0), atol=1e-5)
                calls[0] += 1
            except Exception as exc:  # noqa: BLE001 - collected and reported below
                errors.append(repr(exc))
                return

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        killed = 0
        deadline = time.monotonic() + 120
        while killed < kills and time.monotonic() < deadline:
            pid = _wait(lambda: next(iter(hosts(host_dir)), None), 30)
            assert pid, ("no host came back", client.spawned, client.fallbacks, client.last_fallback, errors[:2])
            time.sleep(0.3)
            try:
                os.kill(pid, signal.SIGKILL)  # (the pid may be a host's short-lived pre-fork parent)
            except ProcessLookupError:
                continue
            killed += 1
            _wait(lambda pid=pid: not _alive(pid), 10)
        time.sleep(0.5)
    finally:
        stop_at[0] = True
        for t in threads:
            t.join(120)
    assert not errors, errors[:3]
    assert calls[0] > 4 * kills and client.spawned >= 1 + kills // 2
    assert len(hosts(host_dir)) <= 1


@pytest.mark.slow
def test_a_query_goes_before_another_agents_queued_indexing(host_dir):
    """Inference takes turns a batch at a time and a query takes the next one: an agent's `recall`
    is answered while another agent's long indexing request is still being embedded."""
    import threading

    query_side = shared_model.SharedEmbedder(host_dir)
    query_side.embed(["warm up"])  # the host runs and its model is loaded
    bulk = [f"memory {i}: the deploy cache, the lease window and the billing ledger" for i in range(512)]
    batches = len(local.LocalEmbedder(idle_unload_s=None).runs(bulk))  # the host groups them the same way
    before = query_side.info()["batches"]
    indexer = threading.Thread(target=shared_model.SharedEmbedder(host_dir).embed_array, args=(bulk,))
    indexer.start()
    assert _wait(lambda: query_side.info()["batches"] > before), "the indexing request never started"
    vector = query_side.embed_array(["what did we decide about the lease window?"])
    done_when_answered = query_side.info()["batches"] - before - 1  # minus the query's own turn
    indexer.join()
    assert vector.shape == (1, local.DIMENSIONS)
    assert done_when_answered < batches, "the query waited for the whole indexing request"
    assert query_side.info()["batches"] - before == batches + 1  # every batch ran, the query once
