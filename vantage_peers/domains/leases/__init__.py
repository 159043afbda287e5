"""Leases: task claims, path reservations and named slots that expire with their holder (docs/leases.md)."""
