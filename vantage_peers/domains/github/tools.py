"""MCP tools for GitHub issues (§16), repo mappings (§17), deployments (§19) and errors (§20).

`register` also plugs the domain into the rest of the app: the `/github/webhook` route, the
complete_task seam (`issue_links`), the issue side of `link_issue_to_pattern`, and the scheduler
jobs (outbox sender, error monitor, PR monitor, issue stats).
"""

from __future__ import annotations

import re
from typing import Any, Literal
from urllib.parse import urlparse

from ...core.errors import InvalidArgument
from ...core.ids import now_ms
from ...core.validators import check_name
from ...db.paging import Fields
from ...pipeline.app import App
from ...pipeline.policy import Owns, declared_loader
from ..fix_patterns import store as fix_patterns
from ..tasks import issue_links
from . import deployments, irp, issues, mappings, monitors, webhook
from .common import check_number, check_repo
from .sender import Sender

IssueStatus = Literal["open", "in_progress", "fixed", "verified", "closed"]
COMMIT_SHA = re.compile(r"^[0-9a-fA-F]{7,40}$")
# A deploy key is sent to the deployment URL: only variables named for that purpose may be read, so a
# caller cannot have this server send GITHUB_TOKEN or another secret to a URL of their choosing.
DEPLOY_KEY_VAR = re.compile(r"^(?:DEPLOY_KEY_|CONVEX_DEPLOY_KEY)[A-Z0-9_]{0,100}$")


def _url(value: str) -> str:
    parsed = urlparse(value.strip()) if isinstance(value, str) else None
    if (parsed is None or parsed.scheme not in ("http", "https") or not parsed.hostname or parsed.username
            or parsed.password or parsed.query or parsed.fragment or len(value) > 500):
        raise InvalidArgument(f"deploymentUrl must be an http(s) URL such as https://calm-gerbil-63.convex.cloud "
                              f"(no credentials, query or fragment), got {value!r}")
    return value.strip().rstrip("/")


# GitHub issues are the team's work queue (any teammate moves one along); mappings have owners.
ISSUES_SHARED = "GitHub issues are the team's work queue: any teammate updates one"


def register(app: App) -> None:
    db = app.db
    # A mapping written without an identity (or seeded) has no creator: only master/system may change it.
    app.add_record("repo mapping", declared_loader("repo mapping"))
    # Per-App hooks (#18): a done task's `#NNN` title links the issue (and wakes this App's outbox);
    # a fix pattern linked to an issue is recorded on the issue row (link_issue_to_pattern passes it).
    app.on_task_done(lambda conn, task: issue_links.link_issues_on_completion(
        conn, task, lambda c, t, numbers, mapping: irp.on_task_completed(c, t, numbers, mapping, wake=app.wake)))
    app.extensions[fix_patterns.ISSUE_SIDE] = issues.link_pattern
    app.add_route(webhook.make_route(app))
    sender = Sender(app)
    app.add_job("github.outbox", sender.run)
    # The poll interval is also enforced per deployment (lastPolledAt), so a scheduler that runs
    # every job on every tick still polls each deployment every 5 minutes, not every tick.
    app.add_job("github.error_monitor", lambda: monitors.run_error_monitor(
        app, min_interval_ms=monitors.POLL_INTERVAL_MS - 10_000), every_seconds=300)
    app.add_job("github.pr_monitor", lambda: monitors.run_pr_monitor(app), cron="0 * * * *")
    app.add_job("github.issue_stats", lambda: monitors.run_issue_stats(app), cron="0 6 * * *")

    # -- issues ---------------------------------------------------------------------------------
    @app.tool("read")
    def list_issues(project: str | None = None, status: IssueStatus | None = None, limit: int | None = None,
                    cursor: str | None = None, fields: Fields = "full") -> dict[str, Any]:
        """List tracked GitHub issues newest first, by `project` or `status`; returns `{count, issues, nextCursor?}`."""
        scope = check_name(project, "project") if project is not None else None
        return db.read(lambda c: issues.list_issues(c, project_name=scope, status=status, limit=limit,
                                                    cursor=cursor, fields=fields))

    @app.tool("read")
    def get_issue(repo: str, issueNumber: int) -> dict[str, Any] | None:
        """Fetch a tracked issue by `repo` (owner/name) and `issueNumber`."""
        slug, number = check_repo(repo), check_number(issueNumber)
        return db.read(lambda c: issues.get(c, repo=slug, number=number))

    @app.tool("write", shared=ISSUES_SHARED)
    def update_issue_status(repo: str, issueNumber: int, status: IssueStatus) -> dict[str, Any]:
        """Move an issue along open → in_progress → fixed → verified → closed; returns the issue.

        A move not allowed is refused (INVALID_STATE names the allowed ones).
        """
        slug, number = check_repo(repo), check_number(issueNumber)
        now = now_ms()
        return db.write(lambda c: issues.set_status(c, repo=slug, number=number, status=status, now=now))

    @app.tool("write", identity="fixedBy", identity_required=False, shared=ISSUES_SHARED)
    def link_commit_to_issue(repo: str, issueNumber: int, commitSha: str, fixedBy: str | None = None) -> dict[str, Any]:
        """Record a commit SHA on an issue, moving an open or in_progress one to `fixed`; returns the issue."""
        slug, number = check_repo(repo), check_number(issueNumber)
        if not isinstance(commitSha, str) or not COMMIT_SHA.match(commitSha.strip()):
            raise InvalidArgument(f"commitSha must be 7-40 hexadecimal characters, got {commitSha!r}")
        who = fixedBy
        now = now_ms()
        return db.write(lambda c: issues.link_commit(c, repo=slug, number=number, sha=commitSha.strip().lower(),
                                                     fixed_by=who, now=now))

    @app.tool("write", identity="verifiedBy", shared=ISSUES_SHARED)
    def verify_issue(repo: str, issueNumber: int, verifiedBy: str | None = None) -> dict[str, Any]:
        """Mark a `fixed` issue `verified` (the fix works), recording `verifiedBy`; returns the issue."""
        slug, number = check_repo(repo), check_number(issueNumber)
        who = verifiedBy
        now = now_ms()
        return db.write(lambda c: issues.verify(c, repo=slug, number=number, verified_by=who, now=now))

    @app.tool("read")
    def issue_stats(project: str | None = None) -> dict[str, Any]:
        """Count issues by status, of one `project` or of all (with `byProject`); returns the counts."""
        scope = check_name(project, "project") if project is not None else None
        return db.read(lambda c: issues.counts(c, project_name=scope))

    # -- repo mappings ----------------------------------------------------------------------------
    @app.tool("idempotent", owns=Owns("repo mapping", "repo", action="change"))
    def add_repo_mapping(repo: str, orchestrator: str, project: str) -> dict[str, Any]:
        """Map a GitHub repo (owner/name) to the orchestrator and project handling its issues; returns the mapping.

        Adding it again re-points it; new issues of a mapped repo start the IRP.
        """
        slug = check_repo(repo)
        who, proj = check_name(orchestrator, "orchestrator"), check_name(project, "project")
        now = now_ms()
        return db.write(lambda c: mappings.add(c, repo=slug, orchestrator=who, project=proj,
                                               created_by=app.actor().identity, now=now))

    @app.tool("read")
    def list_repo_mappings(limit: int | None = None, cursor: str | None = None,
                           fields: Fields = "full") -> dict[str, Any]:
        """List repo → orchestrator mappings, newest first."""
        return db.read(lambda c: mappings.list_mappings(c, limit=limit, cursor=cursor, fields=fields))

    @app.tool("read")
    def get_repo_mapping(repo: str) -> dict[str, Any] | None:
        """Fetch a repo mapping by owner/name (case-insensitive)."""
        slug = check_repo(repo)
        return db.read(lambda c: mappings.get(c, repo=slug))

    @app.tool("destructive", owns=Owns("repo mapping", "repo", action="change"))
    def remove_repo_mapping(repo: str) -> dict[str, Any]:
        """Delete a repo mapping: its issues stay, new ones start nothing; returns `{repo, deleted}`."""
        slug = check_repo(repo)
        return db.write(lambda c: mappings.remove(c, repo=slug))

    # -- deployments and errors ---------------------------------------------------------------------
    @app.tool("idempotent", master_only="it decides where the server sends a deploy key")
    def add_deployment(name: str, deploymentUrl: str, deployKeyEnvVar: str, githubRepo: str,
                       orchestrator: str) -> dict[str, Any]:
        """Register a Convex deployment for error monitoring; its new errors become `[Auto]` issues on `githubRepo`; returns it.

        `deployKeyEnvVar`: this server's variable holding the deploy key (DEPLOY_KEY_…).
        """
        label = check_name(name, "name")
        url = _url(deploymentUrl)
        if not isinstance(deployKeyEnvVar, str) or not DEPLOY_KEY_VAR.match(deployKeyEnvVar):
            raise InvalidArgument("deployKeyEnvVar must be an environment variable name starting with DEPLOY_KEY_ "
                                  f"or CONVEX_DEPLOY_KEY in capitals (e.g. DEPLOY_KEY_MYREELDREAM), got {deployKeyEnvVar!r}")
        slug = check_repo(githubRepo, "githubRepo")
        owner = check_name(orchestrator, "orchestrator")
        now = now_ms()
        return db.write(lambda c: deployments.add(c, name=label, url=url, key_env=deployKeyEnvVar,
                                                  github_repo=slug, orchestrator=owner, now=now))

    @app.tool("destructive", master_only="it decides where the server sends a deploy key")
    def remove_deployment(name: str) -> dict[str, Any]:
        """Stop monitoring a deployment (deactivated, its errors kept); returns it."""
        label = check_name(name, "name")
        now = now_ms()
        return db.write(lambda c: deployments.deactivate(c, name=label, now=now))

    @app.tool("read")
    def list_errors(deployment: str | None = None, limit: int | None = None, cursor: str | None = None,
                    fields: Fields = "full") -> dict[str, Any]:
        """List detected deployment errors newest first, with dedup counts and linked issues."""
        label = check_name(deployment, "deployment") if deployment is not None else None
        return db.read(lambda c: deployments.list_errors(c, deployment=label, limit=limit, cursor=cursor,
                                                         fields=fields))

    @app.tool("read")
    def get_error(errorId: str) -> dict[str, Any] | None:
        """Fetch an error-log entry by id with its full details and stack trace."""
        return db.read(lambda c: deployments.get_error(c, error_id=errorId))
