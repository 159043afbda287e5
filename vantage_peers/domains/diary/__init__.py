"""Diary: one daily log per orchestrator and date (write_diary upserts on that key)."""
