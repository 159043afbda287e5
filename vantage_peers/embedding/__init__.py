"""Embedding: the bundled local model (ONNX, int8 weights kept int8), the shared model host process
one user's servers share, its runtime folder checks, and OpenAI-compatible embedders. Knows nothing
of search or the domains; `search/` and the memory domain call it (docs/recall.md)."""
