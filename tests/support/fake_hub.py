"""A loopback stand-in for the Hugging Face hub, speaking what `huggingface_hub.hf_hub_download` needs.

`HEAD|GET /<repo>/resolve/<revision>/<path>` (revision: a branch in `refs` or a commit):
- a large file (LFS, `.onnx`): 302 to a second server on another port (the hub's storage host — another
  origin, so the client does not follow the HEAD's redirect and reads the metadata from it) with
  `X-Repo-Commit`, `X-Linked-Etag: "<sha256>"` and `X-Linked-Size`; the storage host serves the body;
- a small file (plain git): 200 with `X-Repo-Commit`, `ETag: "<git blob sha1>"`, `Content-Length`;
- an unknown repository: 401 `X-Error-Code: RepoNotFound`; an unknown revision: 404
  `RevisionNotFound`; a missing file: 404 `EntryNotFound` with `X-Repo-Commit`.
Every request to either server is counted (`requests`: (method, path)). `corrupt` makes the storage
host serve other bytes than the ones the hub named; `gate` holds each HEAD of a file until that many
have arrived (two processes downloading at the same moment).
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote


def git_blob_sha1(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def is_lfs(path: str) -> bool:
    return path.endswith(".onnx")


class FakeHub:
    def __init__(self, repo: str, commits: Mapping[str, Mapping[str, bytes]], refs: Mapping[str, str]) -> None:
        self.repo, self.commits, self.refs = repo, dict(commits), dict(refs)
        self.requests: list[tuple[str, str]] = []
        self.corrupt: set[str] = set()  # sha256 of the blobs the storage host serves damaged
        self.gate = 1
        self._heads: dict[str, int] = {}
        self._lock = threading.Condition()
        self.blobs = {hashlib.sha256(b).hexdigest(): b for files in self.commits.values() for b in files.values()}
        self.hub = self._serve(self._hub_answer)
        self.storage = self._serve(self._storage_answer)
        self.url = self._url(self.hub)

    @staticmethod
    def _url(server: ThreadingHTTPServer) -> str:
        return f"http://127.0.0.1:{server.server_address[1]}"

    def _serve(self, answer) -> ThreadingHTTPServer:
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _answer(self, body: bool) -> None:
                with hub._lock:
                    hub.requests.append((self.command, self.path))
                status, headers, data = answer(self.command, unquote(self.path))
                self.send_response(status)
                for k, v in {**headers, "Content-Length": str(len(data))}.items():
                    self.send_header(k, v)
                self.end_headers()
                if body:
                    self.wfile.write(data)

            def do_HEAD(self) -> None:  # noqa: N802
                self._answer(body=False)

            def do_GET(self) -> None:  # noqa: N802
                self._answer(body=True)

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server

    def _hub_answer(self, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
        prefix = f"/{self.repo}/resolve/"
        if not path.startswith(prefix):
            return 401, {"X-Error-Code": "RepoNotFound", "X-Error-Message": "Repository not found"}, b""
        revision, _, rel = path[len(prefix):].partition("/")
        commit = self.refs.get(revision, revision)
        if commit not in self.commits:
            return 404, {"X-Error-Code": "RevisionNotFound", "X-Error-Message": "Invalid rev id"}, b""
        data = self.commits[commit].get(rel)
        if data is None:
            return 404, {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit}, b""
        if method == "HEAD" and self.gate > 1:
            with self._lock:
                self._heads[rel] = self._heads.get(rel, 0) + 1
                self._lock.notify_all()
                self._lock.wait_for(lambda: self._heads[rel] >= self.gate, timeout=60)
        if is_lfs(rel):
            sha = hashlib.sha256(data).hexdigest()
            return 302, {"Location": f"{self._url(self.storage)}/blobs/{sha}", "X-Repo-Commit": commit,
                         "X-Linked-Etag": f'"{sha}"', "X-Linked-Size": str(len(data)),
                         "ETag": f'"{git_blob_sha1(data)}"'}, b""
        return 200, {"X-Repo-Commit": commit, "ETag": f'"{git_blob_sha1(data)}"'}, data

    def _storage_answer(self, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
        sha = path.removeprefix("/blobs/")
        data = self.blobs.get(sha)
        if data is None:
            return 404, {}, b""
        if sha in self.corrupt:
            data = bytes([data[0] ^ 0xFF]) + data[1:]
        return 200, {}, data

    def fetched(self) -> list[str]:
        """The paths whose bodies were sent (GETs answered with a body, on either server)."""
        return [p for m, p in self.requests if m == "GET"]

    def stop(self) -> None:
        for server in (self.hub, self.storage):
            server.shutdown()
            server.server_close()
