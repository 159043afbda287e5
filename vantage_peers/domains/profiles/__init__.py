"""Profiles and presence: who the orchestrators are, which instances run, what they are doing."""
