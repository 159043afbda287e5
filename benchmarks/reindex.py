"""`vantage-peers reindex` throughput and footprint with the bundled local model (#34).

    uv run python benchmarks/reindex.py                       # 3,000 short memories, then the abstracts
    uv run python benchmarks/reindex.py --short 1000 --abstracts 500
    VP_MODEL_HOST=shared uv run python benchmarks/reindex.py  # as a server configured for the shared host

Three cases, each a fresh SQLite file loaded through the store layer, then `vantage-peers reindex` run
as its own process (what a person runs):
  oneline   — "<name>: <12 words> #i", the short memory of benchmarks/footprint.py (≈18 word pieces)
  short     — conversational memories: the LoCoMo turns of ../shared/ir/locomo-dev as recall stores them
              ("(<date>) <speaker>: <text>", ≈35 word pieces)
  abstracts — the Cranfield and CISI abstracts of ../shared/ir (title + text, median ≈150 words,
              ≈200–256 word pieces: the SciFact-like long case that made reindex slow)
Reported per case: documents/s (wall), peak RSS of the reindex process and of any model host it
started (polled every 50 ms; for the reindex process also the peaks of its RssAnon — heap and arenas,
the real memory pressure — and RssFile — shared libraries and the database pages SQLite reads through
mmap, file cache the kernel can drop), the CPU time of the reindex process per document (user + system,
which load distorts far less than wall time; a model host's CPU is not included), and the load average before and after. Not a test: nothing asserts
on time; compare runs made in one sitting, alternating.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
from vantage_peers.db import Database, migrate  # noqa: E402
from vantage_peers.domains.memory import store  # noqa: E402

IR = Path(os.environ.get("VP_IR_DIR") or ROOT.parent / "shared" / "ir")  # the collections (../shared/ir)


def abstracts(limit: int) -> list[str]:
    out: list[str] = []
    for name in ("cranfield", "cisi"):
        path = IR / name / "corpus.jsonl"
        if not path.exists():
            continue
        for line in path.open(encoding="utf-8"):
            doc = json.loads(line)
            out.append(f"{doc.get('title', '')}\n{doc['text']}".strip())
    return out[:limit]


def turns(limit: int) -> list[str]:
    data = json.loads((IR / "locomo-dev" / "locomo-dev.json").read_text(encoding="utf-8"))
    out: list[str] = []
    for sample in data:
        conv = sample["conversation"]
        for key, value in conv.items():
            if key.startswith("session_") and isinstance(value, list):
                when = conv.get(f"{key}_date_time", "")
                out.extend(f"({when}) {t['speaker']}: {t['text']}" for t in value)
    return out[:limit]


def onelines(count: int) -> list[str]:
    import random

    from footprint import WORDS

    rng = random.Random(7)
    return [f"{rng.choice(['Ana', 'Bo', 'Chen'])}: " + " ".join(rng.choice(WORDS) for _ in range(12)) + f" #{i}"
            for i in range(count)]


def load(path: Path, texts: list[str]) -> None:
    db = Database(path)
    migrate(db)
    for start in range(0, len(texts), 2000):
        def run(c, chunk=texts[start:start + 2000]) -> None:
            for text in chunk:
                store.store_memory(c, namespace="bench/reindex", type="note", content=text, created_by="bench")
        db.write(run)
    db.close()


def _rss_kb(pid: int) -> dict[str, int]:
    """VmRSS and its parts in kB: RssAnon (heap, arenas: real memory pressure) and RssFile (file pages
    mapped: the shared libraries, and the database file's pages SQLite reads through mmap, which the
    kernel can drop and read again)."""
    out = {"VmRSS": 0, "RssAnon": 0, "RssFile": 0}
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            key = line.split(":", 1)[0]
            if key in out:
                out[key] = int(line.split()[1])
    except OSError:
        pass
    return out


def _hosts(marker: str) -> list[int]:
    """Model host processes started for this run (their environment holds our VP_MODEL_HOST_DIR)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes():
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


def reindex(path: Path, host_dir: str) -> dict[str, float]:
    env = {**os.environ, "VP_DB_PATH": str(path), "VP_MODEL_HOST_DIR": host_dir, "VP_SCHEDULER": "0",
           "VP_EMBEDDINGS": "local"}
    peak = {"reindex": 0, "anon": 0, "file": 0, "host": 0}
    load_before = os.getloadavg()[0]
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "vantage_peers.cli", "reindex"], env=env, cwd=str(ROOT),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    done = threading.Event()

    def poll() -> None:
        while not done.is_set():
            rss = _rss_kb(proc.pid)
            peak["reindex"] = max(peak["reindex"], rss["VmRSS"])
            peak["anon"] = max(peak["anon"], rss["RssAnon"])
            peak["file"] = max(peak["file"], rss["RssFile"])
            for pid in _hosts(host_dir):
                if pid != proc.pid:
                    peak["host"] = max(peak["host"], _rss_kb(pid)["VmRSS"])
            time.sleep(0.05)

    watcher = threading.Thread(target=poll, daemon=True)
    watcher.start()
    _, err = proc.communicate()
    took = time.perf_counter() - start
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime
    done.set()
    watcher.join()
    for pid in _hosts(host_dir):
        if pid != proc.pid:
            with contextlib.suppress(OSError):
                os.kill(pid, 15)  # the host this run started (found by its own folder), nothing else
    if proc.returncode:
        sys.stderr.write(err.decode(errors="replace")[-2000:])
    return {"seconds": took, "cpu_s": cpu_s, "rss_mb": peak["reindex"] / 1024, "anon_mb": peak["anon"] / 1024,
            "file_mb": peak["file"] / 1024, "host_mb": peak["host"] / 1024,
            "load_before": load_before, "load_after": os.getloadavg()[0], "exit": proc.returncode}


def case(label: str, texts: list[str], workdir: Path) -> None:
    path = workdir / f"{label}.db"
    load(path, texts)
    r = reindex(path, str(workdir / f"host-{label}"))
    host = f", model host {r['host_mb']:.0f} MB" if r["host_mb"] else ""
    print(f"  {label:<10} {len(texts):>6} docs in {r['seconds']:6.1f} s = {len(texts) / r['seconds']:7.1f} docs/s   "
          f"CPU {1000 * r['cpu_s'] / len(texts):5.1f} ms/doc ({len(texts) / r['cpu_s']:6.1f} docs per CPU-s)   "
          f"peak RSS {r['rss_mb']:.0f} MB (anon {r['anon_mb']:.0f}, file {r['file_mb']:.0f}){host}   load {r['load_before']:.1f} -> {r['load_after']:.1f}"
          f"   (exit {r['exit']})", flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--oneline", type=int, default=3000, help="one-line memories (0 = skip)")
    parser.add_argument("--short", type=int, default=2760, help="short memories (at most 2,760; 0 = skip)")
    parser.add_argument("--abstracts", type=int, default=2860, help="abstracts (at most 2,860; 0 = skip)")
    args = parser.parse_args()
    print(f"== reindex, bundled local model, {os.cpu_count()} cores, VP_MODEL_HOST={os.environ.get('VP_MODEL_HOST', 'default')} ==")
    with tempfile.TemporaryDirectory(prefix="vp-reindex-") as tmp:
        workdir = Path(tmp)
        if args.oneline:
            case("oneline", onelines(args.oneline), workdir)
        if args.short:
            case("short", turns(args.short), workdir)
        if args.abstracts:
            case("abstracts", abstracts(args.abstracts), workdir)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
