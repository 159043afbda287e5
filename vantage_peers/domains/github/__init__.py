"""GitHub issue tracking: repo mappings, issues, the IRP flow, deployments, error monitoring, the outbox."""
