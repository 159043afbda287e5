"""A git smart-HTTP server on 127.0.0.1 (`git http-backend` behind wsgiref), so a real client can
clone this checkout the way it clones a GitHub repository: shallow, over HTTP, with no network."""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from wsgiref.simple_server import WSGIRequestHandler, make_server


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args: object) -> None:  # keep test output clean
        pass


def _app(root: Path):
    def app(environ, start_response):
        length = int(environ.get("CONTENT_LENGTH") or 0)
        body = environ["wsgi.input"].read(length) if length else b""
        env = {**os.environ, "GIT_PROJECT_ROOT": str(root), "GIT_HTTP_EXPORT_ALL": "1",
               "PATH_INFO": environ.get("PATH_INFO", ""), "QUERY_STRING": environ.get("QUERY_STRING", ""),
               "REQUEST_METHOD": environ["REQUEST_METHOD"], "CONTENT_TYPE": environ.get("CONTENT_TYPE", ""),
               "CONTENT_LENGTH": str(len(body)), "REMOTE_ADDR": "127.0.0.1",
               "GIT_PROTOCOL": environ.get("HTTP_GIT_PROTOCOL", "")}
        out = subprocess.run(["git", "http-backend"], input=body, env=env, capture_output=True, check=False).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = out.partition(b"\n\n")
        status, headers = "200 OK", []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = value.strip()
            elif name:
                headers.append((name.strip(), value.strip()))
        start_response(status, headers)
        return [payload]
    return app


def snapshot(checkout: Path, dest: Path) -> Path:
    """A one-commit git repository of the checkout's working tree (tracked and new, unignored files;
    symlinks kept as links), so the test sees uncommitted edits too."""
    names = subprocess.run(["git", "-C", str(checkout), "ls-files", "-co", "--exclude-standard", "-z"],
                           capture_output=True, check=True).stdout.decode().split("\0")
    for name in filter(None, names):
        src, dst = checkout / name, dest / name
        if not src.exists() and not src.is_symlink():
            continue  # deleted in the working tree
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)
    git = ["git", "-C", str(dest), "-c", "user.name=t", "-c", "user.email=t@127.0.0.1"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "snapshot"], check=True)
    return dest


@contextmanager
def serve_repository(repo: Path, workdir: Path) -> Iterator[str]:
    """Serve a bare clone of `repo` over git smart HTTP and yield the clone URL."""
    bare = workdir / "vantage-peers.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(repo), str(bare)], check=True)
    subprocess.run(["git", "-C", str(bare), "config", "http.uploadpack", "true"], check=True)
    server = make_server("127.0.0.1", 0, _app(workdir), handler_class=_Quiet)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/vantage-peers.git"
    finally:
        server.shutdown()
        server.server_close()
