"""`vantage-peers serve`: the same MCP tools over streamable HTTP, with OAuth 2.1 and bearer auth.

Modules: `tokens` (token minting and hashing), `profiles` (scope profiles), `store` (SQL of the
OAuth tables), `provider` (the SDK's `OAuthAuthorizationServerProvider` and `TokenVerifier` on
SQLite), `handlers` (where the SDK's endpoints are extended), `consent` (the approve/deny page),
`cimd*` (client id metadata documents), `admin`, `clerk`, `asgi` (the app factory), `serve` and
`token_cli` (the subcommands), `doctor` (HTTP checks), `health` / `metrics*` / `logs` (probes,
Prometheus metrics, request ids and JSON logs: the operator's view, issue #31). The HTTP layer only turns a token into a
`principal.Principal`; what a principal may do is decided by the call pipeline (calls.py, policy.py).
"""
