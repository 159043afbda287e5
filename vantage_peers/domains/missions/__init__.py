"""missions domain."""
