"""The `oauth_clients` row of a CIMD client (no schema change: `registeredVia = 'cimd'`)."""

from __future__ import annotations

import json
from typing import Any

from . import profiles
from .cimd import ClientDocument
from .handlers import SCOPES


def upsert_cimd_client(conn: Any, doc: ClientDocument, *, now: int) -> None:
    """First sight: a public client on `client-generic`. Later: the document's name and redirect
    URIs refreshed; the profile an operator set and a revocation are kept."""
    meta = {k: v for k, v in doc.raw.items() if k in ("client_uri", "logo_uri", "software_id", "software_version",
                                                      "contacts", "tos_uri", "policy_uri")}
    conn.execute(
        "INSERT INTO oauth_clients (clientId, clientSecretHash, name, redirectUris, grantTypes, authMethod, scope, "
        "scopeProfile, metadata, registeredVia, createdAt) VALUES (?, NULL, ?, ?, ?, 'none', ?, ?, ?, 'cimd', ?) "
        "ON CONFLICT (clientId) DO UPDATE SET name = excluded.name, redirectUris = excluded.redirectUris, "
        "grantTypes = excluded.grantTypes, metadata = excluded.metadata "
        "WHERE oauth_clients.registeredVia = 'cimd' AND oauth_clients.revokedAt IS NULL",
        (doc.client_id, doc.client_name, json.dumps(list(doc.redirect_uris)), json.dumps(list(doc.grant_types)),
         " ".join(SCOPES), profiles.CLIENT_GENERIC, json.dumps(meta), now))
