-- Version 23 (issue #32): a scope profile may widen whose messages and tasks its tokens read.
-- `own` (the default, and every existing profile's): the records its identities are parties to;
-- `team`: every message and task (docs/policy.md, "Who reads what"). Checked in http/profiles.py.
ALTER TABLE oauth_scope_profiles ADD COLUMN recordReadScope TEXT NOT NULL DEFAULT 'own';
