-- Version 10: GitHub issue tracking (spec §16-§20) — repo mappings, issues, daily issue stats,
-- monitored deployments and their deduplicated error logs, webhook deliveries (replay guard) and
-- the durable outbox every outbound GitHub call goes through.

-- spec 1.18. `issue_links.repo_mapping_for` (tasks domain) reads this table by project.
CREATE TABLE githubRepoMapping (
    seq             INTEGER PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    repo            TEXT NOT NULL UNIQUE COLLATE NOCASE,   -- owner/name; GitHub slugs ignore case
    orchestrator    TEXT NOT NULL,
    project         TEXT NOT NULL,
    active          INTEGER NOT NULL DEFAULT 1,
    lastDeployedSHA TEXT,
    lastDeployedAt  INTEGER,
    createdBy       TEXT,
    createdAt       INTEGER NOT NULL,
    updatedAt       INTEGER NOT NULL
);
CREATE INDEX githubRepoMapping_by_time ON githubRepoMapping (createdAt DESC, id DESC);
CREATE INDEX githubRepoMapping_by_project ON githubRepoMapping (project, active);

-- spec 1.13. One row per (repo, issueNumber); `mapped` = the repo had an active mapping when seen.
CREATE TABLE issues (
    seq                 INTEGER PRIMARY KEY,
    id                  TEXT NOT NULL UNIQUE,
    repo                TEXT NOT NULL COLLATE NOCASE,
    issueNumber         INTEGER NOT NULL,
    project             TEXT,
    orchestrator        TEXT,
    mapped              INTEGER NOT NULL DEFAULT 0,
    title               TEXT,
    body                TEXT,
    labels              TEXT,               -- JSON string[]
    author              TEXT,
    htmlUrl             TEXT,
    githubState         TEXT,               -- GitHub's own open/closed
    status              TEXT NOT NULL DEFAULT 'open'
                        CHECK (status IN ('open', 'in_progress', 'fixed', 'verified', 'closed')),
    linkedTaskIds       TEXT,               -- JSON string[]
    commitShas          TEXT,               -- JSON string[]
    linkedPatternIds    TEXT,               -- JSON string[]
    fixedBy             TEXT,
    fixedAt             INTEGER,
    verifiedBy          TEXT,
    verifiedAt          INTEGER,
    closedAt            INTEGER,
    missionId           TEXT,
    openedAt            INTEGER,            -- GitHub created_at (ms)
    firstResponseAt     INTEGER,            -- first comment by someone other than the author
    commentCount        INTEGER NOT NULL DEFAULT 0,
    externalRepo        TEXT,
    externalIssueNumber INTEGER,
    externalIssueUrl    TEXT,
    prUrl               TEXT,
    prStatus            TEXT CHECK (prStatus IN ('draft', 'open', 'merged', 'closed')),
    prReviewState       TEXT,
    forkRepo            TEXT,
    createdAt           INTEGER NOT NULL,
    updatedAt           INTEGER NOT NULL,
    UNIQUE (repo, issueNumber)
);
CREATE INDEX issues_by_time ON issues (createdAt DESC, id DESC);
CREATE INDEX issues_by_project ON issues (project, status, createdAt DESC, id DESC);
CREATE INDEX issues_by_pr ON issues (prStatus) WHERE prStatus IS NOT NULL;

-- spec 1.14: one snapshot per repo and UTC day, upserted by the daily job.
CREATE TABLE issueStats (
    seq                       INTEGER PRIMARY KEY,
    id                        TEXT NOT NULL UNIQUE,
    repo                      TEXT NOT NULL,
    project                   TEXT,
    day                       TEXT NOT NULL,   -- YYYY-MM-DD (UTC)
    totalIssues               INTEGER NOT NULL,
    resolvedIssues            INTEGER NOT NULL,
    medianTimeToFirstResponse REAL,
    medianTimeToFix           REAL,
    fastestResolution         REAL,
    slowestResolution         REAL,
    avgTimeToFix              REAL,
    beforeVantageOS           TEXT,            -- JSON {totalIssues, resolvedIssues, medianTimeToFix}
    afterVantageOS            TEXT,
    createdAt                 INTEGER NOT NULL,
    updatedAt                 INTEGER NOT NULL,
    UNIQUE (repo, day)
);

-- spec 1.19. The log cursor and the poll lease make one process read each batch of logs once.
CREATE TABLE monitoredDeployments (
    seq             INTEGER PRIMARY KEY,
    id              TEXT NOT NULL UNIQUE,
    name            TEXT NOT NULL UNIQUE,
    deploymentUrl   TEXT NOT NULL,
    deployKeyEnvVar TEXT NOT NULL,
    githubRepo      TEXT NOT NULL,
    orchestrator    TEXT NOT NULL,
    active          INTEGER NOT NULL DEFAULT 1,
    logCursor       REAL NOT NULL DEFAULT 0,
    leaseOwner      TEXT,
    leaseUntil      INTEGER,
    lastPolledAt    INTEGER,
    lastError       TEXT,
    createdAt       INTEGER NOT NULL,
    updatedAt       INTEGER NOT NULL
);

-- spec 1.20. Deduplicated by (deployment, sha256(functionName + errorMessage)).
CREATE TABLE errorLogs (
    seq               INTEGER PRIMARY KEY,
    id                TEXT NOT NULL UNIQUE,
    deploymentId      TEXT NOT NULL REFERENCES monitoredDeployments (id),
    deployment        TEXT NOT NULL,         -- the deployment's name (filter of list_errors)
    functionName      TEXT NOT NULL,
    errorMessage      TEXT NOT NULL,
    hash              TEXT NOT NULL,
    count             INTEGER NOT NULL DEFAULT 1,
    firstSeen         INTEGER NOT NULL,
    lastSeen          INTEGER NOT NULL,
    stackTrace        TEXT,
    udfType           TEXT,
    requestId         TEXT,
    githubRepo        TEXT NOT NULL,
    githubIssueNumber INTEGER,
    githubIssueUrl    TEXT,
    createdAt         INTEGER NOT NULL,
    updatedAt         INTEGER NOT NULL,
    UNIQUE (deploymentId, hash)
);
CREATE INDEX errorLogs_by_time ON errorLogs (createdAt DESC, id DESC);
CREATE INDEX errorLogs_by_deployment ON errorLogs (deployment, createdAt DESC, id DESC);

-- X-GitHub-Delivery ids already processed: a redelivery changes nothing.
CREATE TABLE githubDeliveries (
    deliveryId TEXT PRIMARY KEY,
    event      TEXT NOT NULL,
    action     TEXT,
    repo       TEXT,
    receivedAt INTEGER NOT NULL
);

-- Outbound GitHub calls, queued in the transaction that causes them and sent by a scheduler job.
-- `dedupKey` makes queueing idempotent; a row is claimed with a lease (leaseOwner, leaseUntil);
-- `inFlight` is set while a send may be under way and `maybeSent` remembers an attempt whose
-- outcome is unknown (timeout, 5xx, crash), so the next attempt first looks for its marker.
CREATE TABLE githubOutbox (
    seq           INTEGER PRIMARY KEY,
    id            TEXT NOT NULL UNIQUE,
    kind          TEXT NOT NULL CHECK (kind IN ('comment', 'create_issue', 'pr_status')),
    dedupKey      TEXT NOT NULL UNIQUE,
    repo          TEXT NOT NULL,
    issueNumber   INTEGER,
    payload       TEXT NOT NULL,          -- JSON
    status        TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'sent', 'failed')),
    attempts      INTEGER NOT NULL DEFAULT 0,
    nextAttemptAt INTEGER NOT NULL,
    leaseOwner    TEXT,
    leaseUntil    INTEGER,
    inFlight      INTEGER NOT NULL DEFAULT 0,
    maybeSent     INTEGER NOT NULL DEFAULT 0,
    lastStatus    INTEGER,
    lastError     TEXT,
    result        TEXT,                   -- JSON (comment id, issue number, PR state)
    sentAt        INTEGER,
    createdAt     INTEGER NOT NULL,
    updatedAt     INTEGER NOT NULL
);
CREATE INDEX githubOutbox_due ON githubOutbox (status, nextAttemptAt, seq);
