"""Fix-pattern knowledge base: bugs, root causes, attempts and validated fixes, searched by meaning."""
