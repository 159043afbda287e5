"""Search building blocks: FTS5 query quoting (and, later, embeddings, vectors and fusion)."""
