"""Prefixed, time-sortable ids (`msg_01J…`), unique across processes without coordination.

Layout: 48-bit millisecond timestamp + 80 random bits, Crockford base32 (26 chars), like a ULID.
Within one process ids are strictly increasing even inside one millisecond.
"""

from __future__ import annotations

import os
import threading
import time

_ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
_lock = threading.Lock()
_last_ms = -1
_last_rand = 0


def now_ms() -> int:
    return time.time_ns() // 1_000_000


_PAIRS = [a + b for a in _ALPHABET for b in _ALPHABET]  # 10 bits -> 2 characters: half the steps (#34)


def _encode(value: int, length: int) -> str:
    """`length` base32 characters of `value` (even lengths only: 10 and 16 here)."""
    out = []
    for _ in range(length // 2):
        out.append(_PAIRS[value & 1023])
        value >>= 10
    return "".join(reversed(out))


def new_id(prefix: str) -> str:
    global _last_ms, _last_rand
    with _lock:
        ms = now_ms()
        if ms <= _last_ms:
            ms = _last_ms
            rand = (_last_rand + 1) & ((1 << 80) - 1)
        else:
            rand = int.from_bytes(os.urandom(10), "big")
        _last_ms, _last_rand = ms, rand
    return f"{prefix}_{_encode(ms, 10)}{_encode(rand, 16)}"
