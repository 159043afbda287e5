"""Hostile OKF bundles: each is a clean error naming the problem, and nothing is written."""

from __future__ import annotations

import gzip
import io
import json
import tarfile

import pytest
from support.bundle_helpers import (
    b64,
    bundle_bytes,
    db_fingerprint,
    file_entry,
    jsonl,
    manifest_for,
    memory,
    tar_gz,
)

from vantage_peers.domains.bundles.format import Limits, read_bundle

pytestmark = pytest.mark.backends


def good_members() -> dict[str, bytes]:
    return {"memories.jsonl": jsonl([memory(i) for i in range(3)]), "briefings.jsonl": b"", "tasks.jsonl": b""}


def link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def _manifest_entry(members: dict[str, bytes], **over) -> tuple[tarfile.TarInfo, bytes]:
    return file_entry("manifest.json", json.dumps(manifest_for(members, **over)).encode())


def _two_gb_claim() -> bytes:
    members = good_members()
    info = tarfile.TarInfo("memories.jsonl")
    info.size = 2 * 1024**3  # the header claims 2 GiB; only a few bytes follow
    header = info.tobuf(format=tarfile.USTAR_FORMAT)
    manifest = json.dumps(manifest_for(members)).encode()
    m_info = tarfile.TarInfo("manifest.json")
    m_info.size = len(manifest)
    head = m_info.tobuf(format=tarfile.USTAR_FORMAT) + manifest + b"\0" * (-len(manifest) % 512)
    return gzip.compress(head + header + b'{"id":"x"}\n' * 10)


def _hash_mismatch() -> bytes:
    members = good_members()
    manifest = manifest_for(members)
    members["memories.jsonl"] = members["memories.jsonl"].replace(b"memory 1", b"memory X")  # same size
    return bundle_bytes(members, manifest)


def _version(v) -> bytes:
    members = good_members()
    return bundle_bytes(members, manifest_for(members, formatVersion=v))


def _duplicates() -> bytes:
    return bundle_bytes({"memories.jsonl": jsonl([memory(1), memory(2), memory(1, content="again")]),
                         "briefings.jsonl": b"", "tasks.jsonl": b""})


def _truncated() -> bytes:
    data = bundle_bytes(good_members())
    return data[: len(data) // 2]


def _bomb() -> bytes:
    """A member of 80 MB of spaces (compresses to ~80 KB): over the MCP member cap of 64 MiB."""
    big = b" " * (80 * 1_048_576)
    members = {"memories.jsonl": big}
    return bundle_bytes(members)


MEMBERS = good_members()
CASES = {
    "truncated gzip": (_truncated, "BUNDLE_CORRUPT"),
    "not gzip": (lambda: b"PK\x03\x04 this is a zip, not a bundle", "BUNDLE_CORRUPT"),
    "dot-dot path": (lambda: tar_gz([_manifest_entry(MEMBERS), file_entry("../memories.jsonl", b"")]),
                     "UNSAFE_MEMBER"),
    "nested path": (lambda: tar_gz([file_entry("a/../../etc/passwd", b"x")]), "UNSAFE_MEMBER"),
    "absolute path": (lambda: tar_gz([file_entry("/etc/passwd", b"x")]), "UNSAFE_MEMBER"),
    "symlink": (lambda: tar_gz([_manifest_entry(MEMBERS), link("memories.jsonl", "../../../etc/passwd")]),
                "UNSAFE_MEMBER"),
    "hard link": (lambda: tar_gz([_manifest_entry(MEMBERS), link("tasks.jsonl", "/etc/shadow", tarfile.LNKTYPE)]),
                  "UNSAFE_MEMBER"),
    "directory": (lambda: tar_gz([(_dir("memories.jsonl"), None)]), "UNSAFE_MEMBER"),
    "unknown member": (lambda: tar_gz([_manifest_entry(MEMBERS), file_entry("evil.sh", b"rm -rf /")]),
                       "UNKNOWN_MEMBER"),
    "duplicate member": (lambda: tar_gz([_manifest_entry(MEMBERS), file_entry("tasks.jsonl", b""),
                                         file_entry("tasks.jsonl", b"")]), "DUPLICATE_MEMBER"),
    "hash mismatch": (_hash_mismatch, "HASH_MISMATCH"),
    "2 GB member claim": (_two_gb_claim, "MEMBER_TOO_LARGE"),
    "unknown version": (lambda: _version(2), "UNSUPPORTED_VERSION"),
    "version as text": (lambda: _version("1"), "UNSUPPORTED_VERSION"),
    "duplicate ids": (_duplicates, "DUPLICATE_ID"),
    "no manifest": (lambda: tar_gz([file_entry("memories.jsonl", MEMBERS["memories.jsonl"])]), "MANIFEST_MISSING"),
    "manifest not json": (lambda: tar_gz([file_entry("manifest.json", b"{nope")]), "MANIFEST_INVALID"),
    "member listed but absent": (lambda: tar_gz([_manifest_entry(MEMBERS)]), "MEMBER_MISSING"),
    "bad record": (lambda: bundle_bytes({"memories.jsonl": jsonl([memory(1, type="<script>")])}), "INVALID_RECORD"),
    "record not json": (lambda: bundle_bytes({"memories.jsonl": b"{oops\n"}), "INVALID_JSON"),
    "unknown field": (lambda: bundle_bytes({"memories.jsonl": jsonl([memory(1, namespace="x", extra=1)])}),
                      "INVALID_RECORD"),
    "count mismatch": (lambda: bundle_bytes(MEMBERS, manifest_for(MEMBERS, counts={"memories": 9})),
                       "COUNT_MISMATCH"),
    "decompression bomb": (_bomb, "MEMBER_TOO_LARGE"),
}


def _dir(name: str) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type = tarfile.DIRTYPE
    return info


@pytest.mark.parametrize("case", sorted(CASES))
def test_hostile_bundle_is_refused_and_nothing_is_written(tools, app, case):
    make, code = CASES[case]
    data = b64(make())
    tools.call("store_memory", namespace="target", type="note", content="pre-existing", createdBy="pi")
    before = app.db.read(db_fingerprint)
    report = tools.call("validate_okf_bundle", bundle=data)
    assert report["valid"] is False, case
    codes = [p["code"] for p in report["problems"]]
    assert code in codes, (case, report["problems"])
    assert all(p["path"] and p["message"] for p in report["problems"])
    for mode in ("merge", "replace", "dry-run"):
        err = tools.error("import_okf_bundle", bundle=data, namespace="target", mode=mode)
        assert "INVALID_BUNDLE" in err and code in err and "nothing was written" in err, (case, err)
    assert app.db.read(db_fingerprint) == before, case


def test_problem_paths_name_the_line_and_field(tools):
    data = bundle_bytes({"memories.jsonl": jsonl([memory(1), memory(2, type="bogus"), memory(3, createdAt=-5)])})
    problems = tools.call("validate_okf_bundle", bundle=b64(data))["problems"]
    paths = {p["path"] for p in problems}
    assert "memories.jsonl:2.type" in paths and "memories.jsonl:3.createdAt" in paths


def test_total_decompressed_budget_stops_a_bomb_early():
    data = bundle_bytes({"memories.jsonl": b" " * 5_000_000})
    bundle = read_bundle(io.BytesIO(data), Limits(member_bytes=10_000_000, total_bytes=1_000_000))
    assert [p.code for p in bundle.problems] == ["BUNDLE_TOO_LARGE"]


def test_over_the_mcp_size_cap_is_refused_before_decoding(tools):
    err = tools.error("validate_okf_bundle", bundle="A" * (23 * 1_048_576))
    assert "larger than" in err and "vantage-peers import" in err


def test_hand_made_bundle_from_another_tool_imports(tools, app):
    """A producer following docs/bundles.md (foreign ids, no segments) imports; ids are remapped."""
    members = {"memories.jsonl": jsonl([memory(1), memory(2, relations=[{"targetId": "mem_1", "type": "extends"}])]),
               "briefings.jsonl": jsonl([{"id": "b1", "title": "T", "topic": "src", "participants": ["pi"],
                                          "content": "c", "linkedMemoryIds": ["mem_2"], "createdBy": "pi",
                                          "createdAt": 1, "updatedAt": 1}]),
               "tasks.jsonl": jsonl([{"id": "t1", "title": "do", "assignedTo": "sigma", "priority": "high",
                                      "status": "todo", "project": "src", "createdBy": "pi", "createdAt": 1,
                                      "updatedAt": 1}])}
    data = b64(bundle_bytes(members))
    assert tools.call("validate_okf_bundle", bundle=data)["valid"] is True
    result = tools.call("import_okf_bundle", bundle=data, namespace="dest", mode="merge")
    assert result["added"] == {"memories": 2, "briefings": 1, "tasks": 1} and result["remapped"] == 4
    rows = app.db.read(lambda c: c.query("SELECT id, relations FROM memories WHERE namespace='dest' ORDER BY createdAt"))
    assert json.loads(rows[1]["relations"]) == [{"targetId": rows[0]["id"], "type": "extends"}]
    note = app.db.read(lambda c: c.one("SELECT topic, linkedMemoryIds FROM briefingNotes"))
    assert note["topic"] == "dest" and json.loads(note["linkedMemoryIds"]) == [rows[1]["id"]]
    assert tools.pages("list_tasks", project="dest")[0][0]["title"] == "do"
    assert sum(tools.call("import_okf_bundle", bundle=data, namespace="dest", mode="merge")["added"].values()) == 0


def test_dot_slash_names_from_tar_c_dir_are_accepted(tools):
    """`tar -czf b.tgz -C dir .` writes `./`, `./manifest.json`, …: accepted; `./../x` is not."""
    members = good_members()
    dot = tarfile.TarInfo("./")
    dot.type = tarfile.DIRTYPE
    entries = [(dot, None), file_entry("./manifest.json", json.dumps(manifest_for(members)).encode())]
    entries += [file_entry(f"./{n}", d) for n, d in members.items()]
    assert tools.call("validate_okf_bundle", bundle=b64(tar_gz(entries)))["valid"] is True
    bad = tar_gz([file_entry("./../memories.jsonl", b"")])
    assert tools.call("validate_okf_bundle", bundle=b64(bad))["problems"][0]["code"] == "UNSAFE_MEMBER"
