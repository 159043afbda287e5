"""Settings: environment, then `.env` in the working directory (environment wins), then defaults."""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from pydantic import BaseModel, Field

from .errors import InvalidArgument

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
    orchestrator: str | None = None
    instance_id: str | None = None
    journal_mode: str = "wal"
    busy_timeout_ms: int = 10_000
    scheduler: bool = True
    tick_seconds: float = 15.0
    emit_ui_markers: bool = False
    # Embeddings (see DESIGN.md "Embeddings").
    embeddings: str = "local"  # from_env: "openai" when a key or base URL is set
    embedding_model: str = "text-embedding-3-small"
    embedding_dimensions: int | None = None
    openai_api_key: str | None = None
    openai_base_url: str | None = None
    # Tasks: the longest single work segment complete_task accepts.
    max_segment_minutes: int = 8 * 60
    # Presence refresh is throttled so that a burst of calls costs one write, not one per call.
    presence_interval_seconds: float = 5.0
    # HTTP / GitHub (used by `serve`).
    port: int = 3000
    public_base_url: str | None = None
    bearer_secret_master: str | None = None
    github_token: str | None = None
    github_webhook_secret: str | None = None

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, dotenv: bool = True) -> Settings:
        env: dict[str, str] = {}
        if dotenv:
            env.update(_read_dotenv(Path.cwd() / ".env"))
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
        journal = (get("VP_JOURNAL_MODE") or "wal").lower()
        if journal not in ("wal", "delete", "truncate", "persist"):
            raise InvalidArgument(f"VP_JOURNAL_MODE must be wal, delete, truncate or persist, got {journal!r}")
        data: dict[str, object] = {
            "orchestrator": get("VP_ORCHESTRATOR"),
            "instance_id": get("VP_INSTANCE_ID"),
            "journal_mode": journal,
            "scheduler": _flag(get("VP_SCHEDULER"), True),
            "emit_ui_markers": _flag(get("VP_EMIT_UI_MARKERS"), False),
            "embeddings": embeddings,
            "openai_api_key": key,
            "openai_base_url": base,
            "public_base_url": get("PUBLIC_BASE_URL"),
            "bearer_secret_master": get("BEARER_SECRET_MASTER"),
            "github_token": get("GITHUB_TOKEN"),
            "github_webhook_secret": get("GITHUB_WEBHOOK_SECRET"),
        }
        if get("VP_DB_PATH"):
            data["db_path"] = Path(get("VP_DB_PATH")).expanduser()  # type: ignore[arg-type]
        if get("VP_EMBEDDING_MODEL"):
            data["embedding_model"] = get("VP_EMBEDDING_MODEL")
        for env_name, field, kind in (
            ("VP_TICK_SECONDS", "tick_seconds", float),
            ("VP_EMBEDDING_DIMENSIONS", "embedding_dimensions", int),
            ("VP_BUSY_TIMEOUT_MS", "busy_timeout_ms", int),
            ("VP_MAX_SEGMENT_MINUTES", "max_segment_minutes", int),
            ("VP_PRESENCE_INTERVAL_SECONDS", "presence_interval_seconds", float),
            ("PORT", "port", int),
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
