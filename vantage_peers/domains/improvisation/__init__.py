"""improvisation_digest: an advisory scan for fleet-state claims made without a VP-Sources footer."""
