"""Mandates: inter-agent service requests with a token budget and spending limits (AP2)."""
