"""`doctor` lines for the GitHub integration: what is configured and what waits in the outbox."""

from __future__ import annotations

from ...db import Database
from ...pipeline.settings import Settings


def doctor_checks(settings: Settings, db: Database) -> list[tuple[str, str, str]]:
    def count(sql: str) -> int:
        try:
            return int(db.read(lambda c: c.scalar(sql)) or 0)
        except Exception:  # noqa: BLE001 - a file from before migration 010 has no outbox yet
            return 0

    pending = count("SELECT count(*) FROM githubOutbox WHERE status = 'pending'")
    failed = count("SELECT count(*) FROM githubOutbox WHERE status = 'failed'")
    out = []
    if settings.github_token:
        out.append(("ok", "github", f"GITHUB_TOKEN set; API {settings.github_api_url}; outbox: {pending} pending, "
                                    f"{failed} failed"))
    else:
        out.append(("WARN", "github", f"GITHUB_TOKEN is not set: nothing is sent to GitHub (comments, [Auto] "
                                      f"issues, PR reads wait in the outbox: {pending} pending)"))
    if not settings.github_webhook_secret:
        out.append(("WARN", "github webhook", "GITHUB_WEBHOOK_SECRET is not set: POST /github/webhook answers "
                                              "401 to every delivery"))
    else:
        out.append(("ok", "github webhook", "GITHUB_WEBHOOK_SECRET set; POST /github/webhook verifies signatures"))
    return out
