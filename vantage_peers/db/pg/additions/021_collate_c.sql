-- After version 21 (issue #32): namespace prefixes in byte order whatever the database's collation.
-- A scope's prefix is the range [P/, P0) compared COLLATE "C" (scopes.byte_range): in a linguistic
-- collation (en_US.UTF-8, the official image's default) that range holds `PROJECT/A` and `projecta`
-- and misses `project/a/sub`. The indexes translated from SQLite's schema are in the database's
-- collation and cannot answer a "C" range; these can. Exact lookups keep using those (equality is byte
-- for byte in any deterministic collation). SQLite's columns are BINARY already: its step 021 is empty.
CREATE INDEX memories_by_namespace_c ON memories ((namespace COLLATE "C"), createdAt DESC, id DESC);

CREATE INDEX memories_latest_by_namespace_c ON memories ((namespace COLLATE "C"), createdAt DESC, id DESC)
    WHERE isLatest = 1;
