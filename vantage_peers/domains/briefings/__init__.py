"""Briefing notes: structured session hand-offs, meetings and decisions."""
