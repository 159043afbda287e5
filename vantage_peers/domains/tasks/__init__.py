"""tasks domain."""
