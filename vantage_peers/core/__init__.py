"""Shared core: what every layer may use and that imports nothing of the package above it — coded
errors, ids and clocks, limits, argument validators, the answer envelope, namespace scopes, RBAC's
parties, cron parsing, the outbound-URL check and the SDK seams (docs/internals.md)."""
