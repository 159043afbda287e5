"""templates domain."""
