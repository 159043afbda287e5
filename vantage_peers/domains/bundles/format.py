"""Reading and writing OKF bundles: a gzipped tar of `manifest.json` + JSON Lines members.

Reading never touches the disk and trusts nothing: the gzip stream is decompressed through a
byte budget (a gzip bomb stops at the budget), the tar is read as a stream, every member must be a
regular file with one of the known names (no paths, no links, no duplicates) and a size under the
cap *as claimed in its header*, each line is bounded and validated by the pydantic models, and
every member's sha256 and size must match the manifest. The result is the parsed records plus a
list of problems with paths; a bundle with any error is never imported.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
import tempfile
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import IO, Any

import pydantic

from .models import COUNT_KEYS, FORMAT, FORMAT_VERSION, MEMBERS, Manifest

MANIFEST = "manifest.json"
MAX_MANIFEST_BYTES = 1_048_576
MAX_LINE_BYTES = 4 * 1_048_576  # one record: 1 MiB of content, JSON-escaped, plus the rest
MAX_PROBLEMS = 100
PROGRESS_EVERY = 10_000  # records between two progress reports on stderr


@dataclass(frozen=True)
class Limits:
    member_bytes: int = 512 * 1_048_576  # largest member (as claimed by its tar header)
    total_bytes: int = 1024 * 1_048_576  # whole decompressed tar
    records: int = 2_000_000


CLI_LIMITS = Limits()
MCP_LIMITS = Limits(member_bytes=64 * 1_048_576, total_bytes=96 * 1_048_576, records=200_000)


@dataclass
class Problem:
    path: str
    code: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"path": self.path, "code": self.code, "message": self.message}


@dataclass
class Bundle:
    manifest: Manifest | None = None
    records: dict[str, list[Any]] = field(default_factory=lambda: {k: [] for k, _ in MEMBERS.values()})
    problems: list[Problem] = field(default_factory=list)
    warnings: list[Problem] = field(default_factory=list)

    def fail(self, path: str, code: str, message: str) -> None:
        if len(self.problems) < MAX_PROBLEMS:
            self.problems.append(Problem(path, code, message))

    def warn(self, path: str, code: str, message: str) -> None:
        if len(self.warnings) < MAX_PROBLEMS:
            self.warnings.append(Problem(path, code, message))

    @property
    def ok(self) -> bool:
        return not self.problems


class _Fatal(Exception):
    """Stop reading: the container itself is unusable or hostile."""


class _Budget(io.RawIOBase):
    """A reader that refuses to yield more than `limit` bytes in total (decompression-bomb guard)."""

    def __init__(self, inner: IO[bytes], limit: int) -> None:
        self.inner, self.limit, self.seen = inner, limit, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self.inner.read(min(len(buffer), self.limit - self.seen + 1))
        self.seen += len(data)
        if self.seen > self.limit:
            raise _Fatal(f"BUNDLE_TOO_LARGE: the bundle decompresses to more than {self.limit} bytes")
        buffer[: len(data)] = data
        return len(data)


def _read_member(stream: IO[bytes], size: int, on_line: Callable[[int, bytes], None]) -> tuple[str, int]:
    """Feed each line to `on_line(number, bytes)`; returns (sha256 hex, bytes read)."""
    digest, read, number, pending = hashlib.sha256(), 0, 0, b""
    while True:
        chunk = stream.read(65_536)
        if not chunk:
            break
        digest.update(chunk)
        read += len(chunk)
        pending += chunk
        *lines, pending = pending.split(b"\n")
        for line in lines:
            number += 1
            on_line(number, line)
        if len(pending) > MAX_LINE_BYTES:
            raise _Fatal(f"LINE_TOO_LONG: line {number + 1} is longer than {MAX_LINE_BYTES} bytes")
    if pending:
        on_line(number + 1, pending)
    if read != size:
        raise _Fatal(f"BUNDLE_CORRUPT: member ended after {read} of {size} bytes")
    return digest.hexdigest(), read


def _member_check(member: tarfile.TarInfo, seen: set[str], limits: Limits) -> str | None:
    """The member's name when it may be read; None for the `./` entry of `tar -C dir .`; else _Fatal."""
    name = member.name
    if name in (".", "./") and member.isdir():
        return None
    if name.startswith("./"):  # `tar czf b.tgz ./manifest.json …` and `tar -C dir .` prefix names this way
        name = name[2:]
    if member.issym() or member.islnk():
        raise _Fatal(f"UNSAFE_MEMBER: {name!r} is a link; a bundle holds only regular files")
    if name.startswith(("/", "\\")) or ".." in name.replace("\\", "/").split("/") or "/" in name or "\\" in name:
        raise _Fatal(f"UNSAFE_MEMBER: {name!r} is a path; members are plain names such as memories.jsonl")
    if not member.isreg() or member.issparse():
        raise _Fatal(f"UNSAFE_MEMBER: {name!r} is not a regular file")
    if name != MANIFEST and name not in MEMBERS:
        raise _Fatal(f"UNKNOWN_MEMBER: {name!r} is not a member of format version {FORMAT_VERSION}")
    if name in seen:
        raise _Fatal(f"DUPLICATE_MEMBER: {name!r} appears twice")
    cap = MAX_MANIFEST_BYTES if name == MANIFEST else limits.member_bytes
    if member.size > cap:
        raise _Fatal(f"MEMBER_TOO_LARGE: {name!r} claims {member.size} bytes; the limit is {cap}")
    seen.add(name)
    return name


def read_bundle(source: IO[bytes], limits: Limits = CLI_LIMITS,
                progress: Callable[[str, int], None] | None = None) -> Bundle:
    """Parse and check a bundle from a binary stream (never raises for bad content)."""
    bundle = Bundle()
    hashes: dict[str, tuple[str, int, int]] = {}  # member -> (sha256, bytes, records)
    total_records = 0
    try:
        raw = _Budget(gzip.GzipFile(fileobj=source, mode="rb"), limits.total_bytes)
        with tarfile.open(fileobj=io.BufferedReader(raw, 65_536), mode="r|") as tar:
            seen: set[str] = set()
            for member in tar:
                name = _member_check(member, seen, limits)
                if name is None:
                    continue
                stream = tar.extractfile(member)
                assert stream is not None  # a regular file
                if name == MANIFEST:
                    data = stream.read(MAX_MANIFEST_BYTES + 1)
                    _manifest(bundle, data)
                    continue
                kind, model = MEMBERS[name]
                count = 0

                def on_line(number: int, line: bytes, name: str = name, kind: str = kind, model: Any = model) -> None:
                    nonlocal count, total_records
                    if not line.strip():
                        return
                    count += 1
                    total_records += 1
                    if total_records > limits.records:
                        raise _Fatal(f"BUNDLE_TOO_LARGE: more than {limits.records} records")
                    _record(bundle, f"{name}:{number}", line, kind, model)
                    if progress and count % PROGRESS_EVERY == 0:
                        progress(name, count)

                digest, size = _read_member(stream, member.size, on_line)
                hashes[name] = (digest, size, count)
    except _Fatal as stop:
        code, _, message = str(stop).partition(": ")
        bundle.fail("bundle", code, message)
        return bundle
    except (tarfile.TarError, EOFError, OSError, zlib.error, ValueError) as err:
        bundle.fail("bundle", "BUNDLE_CORRUPT", f"not a complete gzipped tar ({type(err).__name__}: {err})"[:300])
        return bundle
    _check_manifest(bundle, hashes)
    return bundle


def _manifest(bundle: Bundle, data: bytes) -> None:
    if len(data) > MAX_MANIFEST_BYTES:
        raise _Fatal(f"MEMBER_TOO_LARGE: manifest.json is larger than {MAX_MANIFEST_BYTES} bytes")
    try:
        doc = json.loads(data)
    except ValueError as err:
        raise _Fatal(f"MANIFEST_INVALID: manifest.json is not JSON ({err})") from None
    if isinstance(doc, dict) and doc.get("format") == FORMAT and doc.get("formatVersion") != FORMAT_VERSION:
        raise _Fatal(f"UNSUPPORTED_VERSION: formatVersion {doc.get('formatVersion')!r} is not supported "
                     f"(this reader knows version {FORMAT_VERSION})")
    try:
        bundle.manifest = Manifest.model_validate(doc)
    except pydantic.ValidationError as err:
        for e in err.errors()[:10]:
            loc = ".".join(str(p) for p in e.get("loc", ()))
            bundle.fail(f"manifest.json:{loc}", "MANIFEST_INVALID", str(e.get("msg")))
        raise _Fatal("MANIFEST_INVALID: manifest.json does not match the format (see the problems above)") from None


def _record(bundle: Bundle, path: str, line: bytes, kind: str, model: Any) -> None:
    try:
        data = json.loads(line)
    except (ValueError, RecursionError) as err:
        bundle.fail(path, "INVALID_JSON", f"not a JSON object ({str(err)[:100]})")
        return
    try:
        bundle.records[kind].append(model.model_validate(data))
    except pydantic.ValidationError as err:
        for e in err.errors()[:3]:
            loc = ".".join(str(p) for p in e.get("loc", ()))
            bundle.fail(f"{path}{'.' + loc if loc else ''}", "INVALID_RECORD", str(e.get("msg")))


def _check_manifest(bundle: Bundle, hashes: dict[str, tuple[str, int, int]]) -> None:
    manifest = bundle.manifest
    if manifest is None:
        if not any(p.path.startswith("manifest.json") for p in bundle.problems):
            bundle.fail("manifest.json", "MANIFEST_MISSING", "the bundle has no manifest.json")
        return
    for name in manifest.members:
        if name not in MEMBERS:
            bundle.fail(f"manifest.json:members.{name}", "UNKNOWN_MEMBER", f"{name!r} is not a known member")
        elif name not in hashes:
            bundle.fail(f"manifest.json:members.{name}", "MEMBER_MISSING", f"{name} is listed but not in the tar")
    for name, (digest, size, records) in hashes.items():
        info = manifest.members.get(name)
        if info is None:
            bundle.fail(name, "MEMBER_UNLISTED", f"{name} is in the tar but not in manifest.members")
            continue
        if info.sha256 != digest:
            bundle.fail(name, "HASH_MISMATCH", f"sha256 is {digest}, the manifest says {info.sha256}")
        if info.bytes != size:
            bundle.fail(name, "SIZE_MISMATCH", f"{size} bytes, the manifest says {info.bytes}")
        if info.records != records:
            bundle.fail(name, "COUNT_MISMATCH", f"{records} records, the manifest says {info.records}")
    for kind, key in COUNT_KEYS.items():
        claimed = manifest.counts.get(key)
        if claimed is not None and claimed != len(bundle.records[kind]) and bundle.ok:
            bundle.fail(f"manifest.json:counts.{key}", "COUNT_MISMATCH",
                        f"{len(bundle.records[kind])} {key} in the bundle, the manifest says {claimed}")


def write_bundle(out: IO[bytes], *, source: dict[str, Any], members: dict[str, Iterable[dict[str, Any]]],
                 progress: Callable[[str, int], None] | None = None) -> dict[str, Any]:
    """Write a bundle to `out`; returns the manifest. Members are spooled to compute their hashes,
    so the manifest can be the first member of the tar."""
    spools: dict[str, tuple[Any, str, int, int]] = {}
    counts: dict[str, int] = {}
    try:
        for name, records in members.items():
            spool = tempfile.SpooledTemporaryFile(max_size=32 * 1_048_576)  # noqa: SIM115 - closed in finally
            digest, size, n = hashlib.sha256(), 0, 0
            for record in records:
                line = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8") + b"\n"
                digest.update(line)
                spool.write(line)
                size += len(line)
                n += 1
                if progress and n % PROGRESS_EVERY == 0:
                    progress(name, n)
            spool.seek(0)
            spools[name] = (spool, digest.hexdigest(), size, n)
            counts[COUNT_KEYS[MEMBERS[name][0]]] = n
        manifest = {
            "format": FORMAT, "formatVersion": FORMAT_VERSION, "source": source, "counts": counts,
            "members": {name: {"sha256": d, "bytes": s, "records": n} for name, (_, d, s, n) in spools.items()},
        }
        body = json.dumps(manifest, ensure_ascii=False, indent=2).encode("utf-8")
        # mtime 0 keeps the gzip header deterministic; the export time is in the manifest.
        with gzip.GzipFile(fileobj=out, mode="wb", mtime=0) as gz, tarfile.open(fileobj=gz, mode="w|",
                                                                                  format=tarfile.PAX_FORMAT) as tar:
            _add(tar, MANIFEST, io.BytesIO(body), len(body), source.get("exportedAt", 0))
            for name, (spool, _, size, _) in spools.items():
                _add(tar, name, spool, size, source.get("exportedAt", 0))
        return manifest
    finally:
        for spool, *_ in spools.values():
            spool.close()


def _add(tar: tarfile.TarFile, name: str, data: IO[bytes], size: int, mtime_ms: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = size, 0o644, int(mtime_ms // 1000)
    tar.addfile(info, data)
