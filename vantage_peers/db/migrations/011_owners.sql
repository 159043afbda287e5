-- Issue 18: embed sessions record who created them, so only that orchestrator (or master/system)
-- may touch or revoke one. Sessions created before this version have no owner: master/system only
-- over HTTP, anyone on a local stdio server (local trust).
ALTER TABLE iframeEmbedSessions ADD COLUMN createdBy TEXT;
