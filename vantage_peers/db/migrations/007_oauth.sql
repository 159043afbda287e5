-- Version 7: HTTP auth for `vantage-peers serve` — OAuth clients, scope profiles, authorization
-- requests and codes, access and refresh tokens, Clerk-issued user bearers and their audit log
-- (which also paces issuance: 5 a minute per Clerk user). Every secret (client secret, code,
-- token) is stored as its SHA-256 hex only.
CREATE TABLE oauth_scope_profiles (
    profileId              TEXT PRIMARY KEY,
    description            TEXT NOT NULL DEFAULT '',
    fromAllowList          TEXT NOT NULL DEFAULT '[]',  -- JSON string[]: orchestrators a token may act as
    namespaceReadPrefixes  TEXT NOT NULL DEFAULT '[]',  -- JSON string[]
    namespaceWritePrefixes TEXT NOT NULL DEFAULT '[]',  -- JSON string[]
    createdAt              INTEGER NOT NULL,
    updatedAt              INTEGER NOT NULL
);

CREATE TABLE oauth_clients (
    clientId          TEXT PRIMARY KEY,                 -- vp_client_<hex>
    clientSecretHash  TEXT,                             -- sha256 hex; NULL for a public client
    name              TEXT,
    redirectUris      TEXT NOT NULL DEFAULT '[]',       -- JSON string[]
    grantTypes        TEXT NOT NULL DEFAULT '[]',       -- JSON string[]
    authMethod        TEXT NOT NULL DEFAULT 'client_secret_post',
    scope             TEXT,
    scopeProfile      TEXT NOT NULL,
    metadata          TEXT,                             -- JSON: the rest of the RFC 7591 metadata
    registeredVia     TEXT NOT NULL DEFAULT 'dcr',      -- dcr | admin | cli
    createdAt         INTEGER NOT NULL,
    revokedAt         INTEGER
);

-- A pending /oauth/authorize request waiting on the consent page (the id travels in the URL;
-- the CSRF value is bound to the browser by a cookie and to this row by its hash).
CREATE TABLE oauth_authorization_requests (
    requestHash       TEXT PRIMARY KEY,
    csrfHash          TEXT NOT NULL,
    clientId          TEXT NOT NULL REFERENCES oauth_clients (clientId),
    params            TEXT NOT NULL,                    -- JSON AuthorizationParams
    expiresAt         INTEGER NOT NULL,
    decidedAt         INTEGER
);

CREATE TABLE oauth_authorization_codes (
    codeHash          TEXT PRIMARY KEY,
    clientId          TEXT NOT NULL REFERENCES oauth_clients (clientId),
    params            TEXT NOT NULL,                    -- JSON: scopes, challenge, redirect, resource
    expiresAt         INTEGER NOT NULL,
    usedAt            INTEGER
);

CREATE TABLE oauth_access_tokens (
    tokenHash         TEXT PRIMARY KEY,                 -- by_tokenHash
    clientId          TEXT NOT NULL REFERENCES oauth_clients (clientId),
    scopes            TEXT NOT NULL DEFAULT '[]',
    resource          TEXT,
    familyId          TEXT NOT NULL,                    -- one grant: its refresh chain shares it
    expiresAt         INTEGER NOT NULL,
    createdAt         INTEGER NOT NULL,
    revokedAt         INTEGER
);
CREATE INDEX oauth_access_tokens_by_client ON oauth_access_tokens (clientId);
CREATE INDEX oauth_access_tokens_by_family ON oauth_access_tokens (familyId);

CREATE TABLE oauth_refresh_tokens (
    tokenHash         TEXT PRIMARY KEY,
    clientId          TEXT NOT NULL REFERENCES oauth_clients (clientId),
    scopes            TEXT NOT NULL DEFAULT '[]',
    resource          TEXT,
    familyId          TEXT NOT NULL,
    expiresAt         INTEGER NOT NULL,
    createdAt         INTEGER NOT NULL,
    rotatedAt         INTEGER,                          -- exchanged once: a second use is a replay
    revokedAt         INTEGER
);
CREATE INDEX oauth_refresh_tokens_by_client ON oauth_refresh_tokens (clientId);
CREATE INDEX oauth_refresh_tokens_by_family ON oauth_refresh_tokens (familyId);

-- Clerk flow (§30.6): 7-day user bearers.
CREATE TABLE userBearerTokens (
    tokenHash         TEXT PRIMARY KEY,                 -- by_token_hash
    clerkUserId       TEXT NOT NULL,
    workspaceId       TEXT NOT NULL,
    userName          TEXT NOT NULL,
    extId             TEXT NOT NULL,
    expiresAt         INTEGER NOT NULL,
    createdAt         INTEGER NOT NULL,
    revoked           INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX userBearerTokens_by_user ON userBearerTokens (clerkUserId);

CREATE TABLE credentialsAuditLog (
    seq               INTEGER PRIMARY KEY,
    clerkUserId       TEXT NOT NULL,
    workspaceId       TEXT NOT NULL,
    extId             TEXT NOT NULL,
    extVersion        TEXT,
    issuedAt          INTEGER NOT NULL,
    ip                TEXT,
    userAgent         TEXT
);
CREATE INDEX credentialsAuditLog_by_user ON credentialsAuditLog (clerkUserId, issuedAt);
