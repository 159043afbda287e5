"""The call pipeline: the `App` the domains register on, settings and toolsets, and what runs around
every tool call — identity and policy, argument checks, idempotency, busy budgets — plus the scheduler
that runs the domains' periodic jobs (docs/policy.md, docs/internals.md)."""
