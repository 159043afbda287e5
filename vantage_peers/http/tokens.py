"""Secrets: 32 random bytes as 64 lowercase hex, stored only as their SHA-256 hex digest."""

from __future__ import annotations

import hashlib
import hmac
import secrets as _secrets


def new_secret() -> str:
    """A bearer token, client secret or authorization code: 32 random bytes, 64 hex characters."""
    return _secrets.token_hex(32)


def new_client_id() -> str:
    return f"vp_client_{_secrets.token_hex(8)}"


def digest(value: str) -> str:
    """SHA-256 hex of a presented secret; what the tables store and index."""
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()


def same(a: str, b: str) -> bool:
    """Constant-time comparison of two strings (any text: compared as UTF-8 bytes)."""
    return hmac.compare_digest(a.encode("utf-8", "surrogatepass"), b.encode("utf-8", "surrogatepass"))
