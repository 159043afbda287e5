"""vantage-peers: a local MCP server on one SQLite file for teams of AI coding agents."""

__version__ = "0.1.0"
