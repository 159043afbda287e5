"""Memories: typed, namespaced knowledge with hybrid (BM25 + vector) recall."""
