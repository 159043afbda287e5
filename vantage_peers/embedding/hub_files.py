"""Files of a hub repository in a local cache, through `huggingface_hub` (#35; catalogue.py decides
which files and checks them against its hashes).

`hf_hub_download` does the HTTP (HEAD on `<endpoint>/<repo>/resolve/<revision>/<file>` for the commit
and the content id, GET of the file or of the storage address it redirects to), the per-file lock
between processes and the atomic move into its cache layout: `models--<org>--<name>/blobs/<content
id>`, linked from `snapshots/<commit>/<file>`, with `refs/<branch>` naming the commit a branch resolved
to. A file already there is found by `try_to_load_from_cache` alone, so a start with the files cached
makes no request at all. No token is ever sent (the catalogue's models are public, and `HF_ENDPOINT`
may name a mirror). Progress bars, when the library shows them, go to stderr, never to stdout (the
MCP stdio channel).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

from .embedding_error import EmbeddingError

_SHA256 = re.compile(r"[0-9a-f]{64}")
_GIT_SHA1 = re.compile(r"[0-9a-f]{40}")


class HubError(EmbeddingError):
    """A file could not be had from the hub or the cache (catalogue.py reports MODEL_UNAVAILABLE)."""


def _hub() -> Any:
    # Read by huggingface_hub when it is first imported; the user's own setting wins.
    os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
    import huggingface_hub

    return huggingface_hub


def repo_folder(cache_dir: Path, repo: str) -> Path:
    """The repository's folder in the hub cache layout."""
    return cache_dir / ("models--" + repo.replace("/", "--"))


def cached(repo: str, revision: str, rel: str, cache_dir: Path) -> Path | None:
    """The cached copy of `rel` at `revision` (a branch resolved through `refs/`), or None."""
    if not repo_folder(cache_dir, repo).is_dir():  # nothing of this repository: no need to import the library
        return None
    found = _hub().try_to_load_from_cache(repo, rel, cache_dir=str(cache_dir), revision=revision)
    return Path(found) if isinstance(found, str) else None


def download(repo: str, revision: str, rel: str, cache_dir: Path, *, endpoint: str, timeout: float) -> Path:
    """`rel` at `revision`, fetched into `cache_dir` unless already there; HubError with a readable cause."""
    where = f"{rel} of {repo} at revision {revision}"
    if os.environ.get("HF_HUB_OFFLINE", "").strip().lower() in ("1", "true", "yes", "on"):
        raise HubError(f"{where} is not in the cache and HF_HUB_OFFLINE is set")
    refused = _unreachable(endpoint, timeout)
    if refused:
        raise HubError(f"could not reach {endpoint} for {where}, and it is not in the cache ({refused})")
    hub = _hub()
    from huggingface_hub import errors

    from .. import __version__

    try:
        path = hub.hf_hub_download(repo, rel, revision=revision, cache_dir=str(cache_dir), endpoint=endpoint,
                                   token=False, etag_timeout=timeout, library_name="vantage-peers",
                                   library_version=__version__)
    except errors.RevisionNotFoundError:
        raise HubError(f"revision {revision!r} of {repo} was not found at {endpoint}") from None
    except errors.RepositoryNotFoundError:
        raise HubError(f"repository {repo} was not found at {endpoint} (or it is private or gated)") from None
    except errors.LocalEntryNotFoundError as exc:  # (before its base class below) hub unreachable, not cached
        cause = exc.__cause__ or exc
        raise HubError(f"could not reach {endpoint} for {where}, and it is not in the cache "
                       f"({type(cause).__name__}: {cause})") from None
    except errors.EntryNotFoundError:
        raise HubError(f"{where} was not found at {endpoint}") from None
    except Exception as exc:  # noqa: BLE001 - any other failure of the transfer or of the cache: the file is unavailable
        raise HubError(f"could not fetch {where} from {endpoint} ({type(exc).__name__}: {exc})") from None
    return Path(path)


def _unreachable(endpoint: str, timeout: float) -> str | None:
    """Why a TCP connection to the endpoint cannot be opened now (None: it opens, or a proxy stands
    between): huggingface_hub retries a refused connection with back-off for ~20 s before it gives up."""
    import socket
    import urllib.parse
    import urllib.request

    url = urllib.parse.urlsplit(endpoint)
    host = url.hostname
    if not host or (urllib.request.getproxies() and not urllib.request.proxy_bypass(host)):
        return None
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
        with socket.create_connection((host, port), timeout=min(timeout, 5.0)):
            return None
    except ValueError:  # a malformed port: left to the library's own error
        return None
    except OSError as exc:
        return f"{type(exc).__name__}: {exc}"


def snapshot_of(path: Path, rel: str) -> Path:
    """The snapshot folder (`snapshots/<commit>`) holding `path`, the cached copy of `rel`."""
    folder = path
    for _ in Path(rel).parts:
        folder = folder.parent
    return folder


def content_check(path: Path) -> tuple[str, str | None]:
    """(SHA-256 of the file, the hub's content id it fails to match or None). The blob a cached file links
    to is named by the hub's id of its content — the SHA-256 of a large (LFS) file, the git blob SHA-1 of a
    small one — which hf_hub_download does not check: a body corrupted on the way is caught here."""
    blob = Path(os.path.realpath(path)).name
    sha256, sha1 = hashlib.sha256(), None
    if _GIT_SHA1.fullmatch(blob):
        sha1 = hashlib.sha1(f"blob {path.stat().st_size}\0".encode(), usedforsecurity=False)
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            sha256.update(block)
            if sha1 is not None:
                sha1.update(block)
    digest = sha256.hexdigest()
    if _SHA256.fullmatch(blob) and blob != digest:
        return digest, blob
    if sha1 is not None and sha1.hexdigest() != blob:
        return digest, blob
    return digest, None


def discard(path: Path) -> None:
    """Remove a cached file: its snapshot link and the blob it links to, so nothing refused stays usable."""
    blob = Path(os.path.realpath(path))
    path.unlink(missing_ok=True)
    if blob != path:
        blob.unlink(missing_ok=True)
