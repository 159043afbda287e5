"""Settings: environment, then `.env` in the working directory (environment wins), then defaults.

A `.env` belongs to whatever project the agent happens to work in, so it contributes only `VP_*`
variables — unless it sets `VP_EMBEDDINGS` itself, which says it was written for vantage-peers
(then its `OPENAI_*` / `AI_GATEWAY_*` and other variables count too). An unrelated app's
`OPENAI_API_KEY` never switches embeddings on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, Field

from ..core.errors import InvalidArgument, VantageError
from ..db.dialect import is_postgres_url
from ..embedding.model_host import supported as model_host_supported
from .toolsets import parse_toolsets

APP_NAME = "vantage-peers"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def default_db_path() -> Path:
    import platformdirs

    return Path(platformdirs.user_data_dir(APP_NAME)) / f"{APP_NAME}.db"


def _flag(value: str | None, default: bool) -> bool:
    if value is None or value.strip() == "":
        return default
    v = value.strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    return default


class Settings(BaseModel):
    db_path: Path = Field(default_factory=default_db_path)
    # VP_DATABASE_URL=postgresql://… (issue #25): PostgreSQL instead of the SQLite file (db/postgres.py).
    database_url: str | None = None
    pg_pool_size: int = 10  # VP_PG_POOL_SIZE: connections per process (× processes ≤ max_connections)
    orchestrator: str | None = None
    instance_id: str | None = None
    journal_mode: str = "wal"
    # Total lock wait per tool call before the agent gets BUSY (VP_BUSY_TIMEOUT_MS), see db/busy.py.
    busy_timeout_ms: int = 5_000
    # Time budget of one search's SQL; past it the search answers what it has with truncated: true.
    search_budget_ms: int = 2_000
    # `serve`: a connection whose request headers are not complete this long after it opened (or after
    # its last response) is closed — idle and slow-header clients (#19, http/timeouts.py).
    http_header_timeout_seconds: float = 10.0
    # Per client address and `serve` process: /oauth/register and /oauth/token requests a minute (#19, http/limits.py).
    oauth_register_per_minute: float = 30.0
    oauth_token_per_minute: float = 120.0
    scheduler: bool = True
    tick_seconds: float = 15.0
    # Liveness (#30, docs/presence.md): every server process's heartbeat (VP_HEARTBEAT_SECONDS; None = the tick).
    heartbeat_seconds: float | None = None
    emit_ui_markers: bool = False
    # Tests only: CIMD client_id documents may be fetched over http:// from loopback (http/cimd.py).
    cimd_test_loopback: bool = False
    # VP_TOOLSETS: ("all",) or the toolset names listed at start-up (toolsets.py; core always on).
    toolsets: tuple[str, ...] = ("all",)
    # Embeddings (see DESIGN.md "Embeddings").
    embeddings: str = "local"  # from_env: "openai" when a key or base URL is set
    embedding_model: str = "text-embedding-3-small"
    embedding_dimensions: int | None = None
    # VP_EMBED_MODEL (#35): the local model — unset/"bundled" = all-MiniLM-L6-v2 int8 in the wheel, or a
    # folder holding model.onnx (or onnx/model.onnx) and tokenizer.json (embedding/local.py).
    embed_model: str | None = None
    # VP_RERANK_MODEL (#35): a cross-encoder (catalogue name or folder) reranking recall's fused top
    # VP_RERANK_TOP_K; off when unset.
    rerank_model: str | None = None
    rerank_top_k: int = 30
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    # VP_MODEL_HOST (#20): "shared" = one local-model process per user (search/model_host.py), default
    # where Unix sockets exist; "inprocess" = each server loads its own copy. Its folder: VP_MODEL_HOST_DIR.
    model_host: str = "shared"
    # Tasks: the longest single work segment complete_task accepts.
    max_segment_minutes: int = 8 * 60
    # Presence refresh is throttled so that a burst of calls costs one write, not one per call.
    presence_interval_seconds: float = 5.0
    # Leases (#22): the TTL of the claim checkout_task grants, renewed by the holder's presence.
    claim_ttl_seconds: int = 1800
    # Delivery (docs/delivery.md): redeliveries of an unacknowledged ackRequired receipt before it is
    # dead-lettered, the default wait for an acknowledgement, and the silence after which a
    # recipient is `stale` (broadcasts do not wait on it).
    max_delivery_attempts: int = 5
    ack_timeout_seconds: int = 600
    dead_after_seconds: int = 1800
    # HTTP / GitHub (used by `serve`).
    host: str = "127.0.0.1"  # HOST; 0.0.0.0 only when asked (see README "Remote teams / HTTP")
    port: int = 3000
    public_base_url: str | None = None
    bearer_secret_master: str | None = None
    github_token: str | None = None
    github_webhook_secret: str | None = None
    github_api_url: str = "https://api.github.com"  # GitHub Enterprise: https://<host>/api/v3
    github_retry_seconds: float = 30.0  # first outbox retry delay, doubled per attempt (max 1 h)
    access_token_ttl_seconds: int = 3600  # VP_ACCESS_TOKEN_TTL_SECONDS (OAuth access tokens)
    refresh_token_ttl_seconds: int = 30 * 24 * 3600  # VP_REFRESH_TOKEN_TTL_SECONDS
    clerk_jwt_issuer_domain: str | None = None
    allowed_ext_ids: tuple[str, ...] = ()  # VP_ALLOWED_EXT_IDS, comma-separated; unset = none

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, dotenv: bool = True) -> Settings:
        env: dict[str, str] = {}
        if dotenv:
            env.update(dotenv_contribution(_read_dotenv(Path.cwd() / ".env")))
        env.update(os.environ if environ is None else environ)

        def get(name: str) -> str | None:
            value = env.get(name)
            return value if value not in (None, "") else None

        key = get("OPENAI_API_KEY") or get("AI_GATEWAY_API_KEY")
        base = get("OPENAI_BASE_URL") or get("AI_GATEWAY_BASE_URL")
        # No key or base URL: the bundled local model (search/local.py), never keyword-only by default.
        embeddings = (get("VP_EMBEDDINGS") or ("openai" if (key or base) else "local")).lower()
        if embeddings not in ("local", "openai", "none"):
            raise InvalidArgument(f"VP_EMBEDDINGS must be 'local', 'openai' or 'none', got {embeddings!r}")
        model_host = (get("VP_MODEL_HOST") or ("shared" if model_host_supported() else "inprocess")).lower()
        if model_host not in ("shared", "inprocess"):
            raise InvalidArgument(f"VP_MODEL_HOST must be 'shared' or 'inprocess', got {model_host!r}")
        embed_model = get("VP_EMBED_MODEL")
        if embed_model is not None and embed_model.strip().lower() in ("bundled", "default", "all-minilm-l6-v2-int8"):
            embed_model = None
        from ..embedding.catalogue import CATALOGUE, RERANKERS

        named = embed_model is not None and embed_model in CATALOGUE
        if embed_model is not None and not named and not Path(embed_model).expanduser().is_dir():
            raise InvalidArgument(f"VP_EMBED_MODEL must be 'bundled', one of {', '.join(sorted(CATALOGUE))} or a "
                                  f"folder holding model.onnx and tokenizer.json, got {embed_model!r}")
        rerank = get("VP_RERANK_MODEL")
        named_rerank = rerank is not None and rerank in RERANKERS
        if rerank is not None and not named_rerank and not Path(rerank).expanduser().is_dir():
            raise InvalidArgument(f"VP_RERANK_MODEL must be one of {', '.join(sorted(RERANKERS))} or a folder "
                                  f"holding model.onnx and tokenizer.json, got {rerank!r}")
        journal = (get("VP_JOURNAL_MODE") or "wal").lower()
        if journal not in ("wal", "delete", "truncate", "persist"):
            raise InvalidArgument(f"VP_JOURNAL_MODE must be wal, delete, truncate or persist, got {journal!r}")
        data: dict[str, object] = {
            "orchestrator": get("VP_ORCHESTRATOR"),
            "instance_id": get("VP_INSTANCE_ID"),
            "journal_mode": journal,
            "scheduler": _flag(get("VP_SCHEDULER"), True),
            "emit_ui_markers": _flag(get("VP_EMIT_UI_MARKERS"), False),
            "cimd_test_loopback": _flag(get("VP_CIMD_TEST_LOOPBACK"), False),
            "toolsets": parse_toolsets(get("VP_TOOLSETS")),
            "embeddings": embeddings,
            "model_host": model_host,
            "rerank_model": (rerank if named_rerank else str(Path(rerank).expanduser().resolve())) if rerank else None,
            "embed_model": (embed_model if named else str(Path(embed_model).expanduser().resolve()))
            if embed_model else None,
            "openai_api_key": key,
            "openai_base_url": base,
            "public_base_url": get("PUBLIC_BASE_URL"),
            "bearer_secret_master": get("BEARER_SECRET_MASTER"),
            "github_token": get("GITHUB_TOKEN"),
            "github_webhook_secret": get("GITHUB_WEBHOOK_SECRET"),
            "host": get("HOST") or "127.0.0.1",
            "clerk_jwt_issuer_domain": get("CLERK_JWT_ISSUER_DOMAIN"),
            "allowed_ext_ids": tuple(x.strip() for x in (get("VP_ALLOWED_EXT_IDS") or "").split(",") if x.strip()),
        }
        if get("GITHUB_API_URL"):
            data["github_api_url"] = get("GITHUB_API_URL")
        url = get("VP_DATABASE_URL")
        if url is not None:
            if not is_postgres_url(url):
                raise InvalidArgument(f"VP_DATABASE_URL must start with postgresql://, got {url.split(':')[0]!r}")
            data["database_url"] = url
        if get("VP_DB_PATH"):
            data["db_path"] = Path(get("VP_DB_PATH")).expanduser()  # type: ignore[arg-type]
        if get("VP_EMBEDDING_MODEL"):
            data["embedding_model"] = get("VP_EMBEDDING_MODEL")
        for env_name, field, kind in (
            ("VP_TICK_SECONDS", "tick_seconds", float),
            ("VP_HEARTBEAT_SECONDS", "heartbeat_seconds", float),  # #30: docs/presence.md
            ("VP_EMBEDDING_DIMENSIONS", "embedding_dimensions", int),
            ("VP_BUSY_TIMEOUT_MS", "busy_timeout_ms", int),
            ("VP_PG_POOL_SIZE", "pg_pool_size", int),
            ("VP_SEARCH_BUDGET_MS", "search_budget_ms", int),
            ("VP_RERANK_TOP_K", "rerank_top_k", int),  # #35: candidates the reranker rescores
            ("VP_MAX_SEGMENT_MINUTES", "max_segment_minutes", int),
            ("VP_PRESENCE_INTERVAL_SECONDS", "presence_interval_seconds", float),
            ("VP_CLAIM_TTL_SECONDS", "claim_ttl_seconds", int),  # leases (#22)
            ("VP_MAX_DELIVERY_ATTEMPTS", "max_delivery_attempts", int),
            ("VP_ACK_TIMEOUT_SECONDS", "ack_timeout_seconds", int),
            ("VP_DEAD_AFTER_SECONDS", "dead_after_seconds", int),
            ("PORT", "port", int),
            ("VP_GITHUB_RETRY_SECONDS", "github_retry_seconds", float),
            ("VP_ACCESS_TOKEN_TTL_SECONDS", "access_token_ttl_seconds", int),
            ("VP_REFRESH_TOKEN_TTL_SECONDS", "refresh_token_ttl_seconds", int),
            ("VP_HTTP_HEADER_TIMEOUT_SECONDS", "http_header_timeout_seconds", float),  # #19: http/timeouts.py
            ("VP_OAUTH_REGISTER_PER_MINUTE", "oauth_register_per_minute", float),  # #19: http/limits.py
            ("VP_OAUTH_TOKEN_PER_MINUTE", "oauth_token_per_minute", float),  # #19: http/limits.py
        ):
            raw = get(env_name)
            if raw is not None:
                try:
                    data[field] = kind(raw)
                except ValueError:
                    raise InvalidArgument(f"{env_name} must be a number, got {raw!r}") from None
        return cls(**data)


def _read_dotenv(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    from dotenv import dotenv_values

    return {k: v for k, v in dotenv_values(path).items() if v is not None}


def dotenv_contribution(values: Mapping[str, str]) -> dict[str, str]:
    """What a `.env` may set: `VP_*` only, unless it sets VP_EMBEDDINGS (then all of it)."""
    if (values.get("VP_EMBEDDINGS") or "").strip():
        return dict(values)
    return {k: v for k, v in values.items() if k.startswith("VP_")}


class BadDatabasePath(VantageError):
    code = "BAD_DB_PATH"


def check_db_path(path: Path) -> None:
    """Refuse, in one sentence, a VP_DB_PATH that SQLite could not open for writing."""
    hint = "set VP_DB_PATH to a file in a directory you can write"
    if path.is_dir():
        raise BadDatabasePath(f"VP_DB_PATH={path} is a directory; {hint} (e.g. {path / 'vantage-peers.db'})")
    ancestor = path.parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise BadDatabasePath(f"VP_DB_PATH={path}: {ancestor} is not a directory; {hint}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise BadDatabasePath(f"VP_DB_PATH={path}: cannot create {path.parent} ({exc.strerror}); {hint}") from None
    try:
        read_only = bool(os.statvfs(path.parent).f_flag & os.ST_RDONLY)
    except (OSError, AttributeError):  # no statvfs on Windows
        read_only = False
    if read_only:
        raise BadDatabasePath(f"VP_DB_PATH={path} is on a read-only filesystem; {hint}")
    if not os.access(path.parent, os.W_OK | os.X_OK):
        raise BadDatabasePath(f"VP_DB_PATH={path}: directory {path.parent} is not writable; {hint}")
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise BadDatabasePath(f"VP_DB_PATH={path}: the file is not readable and writable; {hint}")
