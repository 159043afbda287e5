"""Inter-agent messaging with per-recipient read receipts."""
