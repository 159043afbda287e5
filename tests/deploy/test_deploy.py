"""The deploy a team can copy (#31, docs/deploy.md): deploy/compose.yaml, deploy/Caddyfile,
deploy/vantage-peers.service and the Containerfile, checked against what `serve` really reads and
runs; and the image built and started when asked (VP_CONTAINER_BUILD=1) with podman or docker.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import socket
import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest
import yaml
from support.http_helpers import script

from vantage_peers.http.logs import log_format
from vantage_peers.http.proxies import trusted_from_env
from vantage_peers.pipeline.settings import Settings

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
REPLICAS = ("serve-a", "serve-b")
# What a deploy must set for `serve` behind a proxy on PostgreSQL.
REQUIRED = {"VP_DATABASE_URL", "BEARER_SECRET_MASTER", "VP_TRUSTED_PROXIES", "HOST", "PUBLIC_BASE_URL"}
SAMPLE = {"VP_PG_PASSWORD": "pw", "BEARER_SECRET_MASTER": "m" * 64, "VP_DOMAIN": "vp.example.com"}


def compose() -> dict[str, Any]:
    return yaml.safe_load((DEPLOY / "compose.yaml").read_text())


def substituted(value: str) -> str:
    """Compose's `${NAME}` / `${NAME:?message}` interpolation, with the sample values."""
    return re.sub(r"\$\{(\w+)(?::\?[^}]*)?\}", lambda m: SAMPLE[m.group(1)], value)


def names_read_by_the_package() -> set[str]:
    """Every environment variable name the package spells out (Settings.from_env, serve's own)."""
    found: set[str] = set()
    for path in (ROOT / "vantage_peers").rglob("*.py"):
        found.update(re.findall(r"""["']((?:VP_|BEARER_|PUBLIC_|HOST\b|PORT\b)[A-Z0-9_]*)["']""", path.read_text()))
    return found


def test_compose_runs_two_replicas_of_one_image_on_postgresql_18_with_pgvector_behind_tls():
    doc = compose()
    services = doc["services"]
    assert set(REPLICAS) | {"postgres", "proxy"} <= set(services)
    a, b = (services[r] for r in REPLICAS)
    assert a["build"] == b["build"] and a["build"]["dockerfile"] == "Containerfile"
    assert (DEPLOY / a["build"]["context"] / "Containerfile").is_file()
    assert "pgvector" in services["postgres"]["image"] and services["postgres"]["image"].endswith("pg18")
    for replica in (a, b):
        assert "ports" not in replica  # reached through the proxy only
        assert "/readyz" in " ".join(replica["healthcheck"]["test"])
        assert replica["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "pg_isready" in " ".join(services["postgres"]["healthcheck"]["test"])
    proxy = services["proxy"]
    assert "caddy" in proxy["image"] and "443:443" in proxy["ports"]
    assert all(proxy["depends_on"][r]["condition"] == "service_healthy" for r in REPLICAS)
    caddy = (DEPLOY / "Caddyfile").read_text()
    mounted = {v.split(":")[0] for v in proxy["volumes"]}
    assert "./Caddyfile" in mounted and "{$VP_DOMAIN}" in caddy
    assert all(f"{r}:3000" in caddy for r in REPLICAS) and "health_uri /readyz" in caddy
    assert "flush_interval -1" in caddy  # server-sent events pass unbuffered


def test_compose_sets_the_settings_serve_reads_and_trusts_only_its_proxy():
    doc = compose()
    read = names_read_by_the_package()
    proxy_ip = doc["services"]["proxy"]["networks"]["vp"]["ipv4_address"]
    for replica in REPLICAS:
        env = {k: substituted(str(v)) for k, v in doc["services"][replica]["environment"].items()}
        assert set(env) >= REQUIRED, replica
        assert set(env) <= read, f"{replica} sets variables serve never reads: {sorted(set(env) - read)}"
        settings = Settings.from_env(env, dotenv=False)
        assert settings.database_url == "postgresql://vantage:pw@postgres:5432/vantage"
        assert settings.bearer_secret_master == SAMPLE["BEARER_SECRET_MASTER"]
        assert settings.host == "0.0.0.0" and settings.port == 3000
        assert settings.public_base_url == "https://vp.example.com"
        assert settings.model_host == "inprocess"
        trusted = trusted_from_env(env)
        assert [str(n) for n in trusted] == [f"{proxy_ip}/32"]  # the proxy, and nothing else
        assert log_format(env) == "json"
    # the postgres password and the replicas' URL are the same variable
    assert "${VP_PG_PASSWORD" in doc["services"]["postgres"]["environment"]["POSTGRES_PASSWORD"]


def unit() -> dict[str, list[str]]:
    """deploy/vantage-peers.service as key -> values (systemd allows a key more than once)."""
    keys: dict[str, list[str]] = {}
    for line in (DEPLOY / "vantage-peers.service").read_text().splitlines():
        line = line.strip()
        if line and not line.startswith(("#", ";", "[")):
            key, _, value = line.partition("=")
            keys.setdefault(key.strip(), []).append(value.strip())
    return keys


def test_the_systemd_unit_starts_a_real_command_with_hardening():
    keys = unit()
    argv = shlex.split(keys["ExecStart"][0])
    assert argv[0].endswith("/bin/vantage-peers") and argv[1] == "serve"
    # The same arguments parse on the CLI of this checkout: `--help` exits 0 only for a real command.
    done = subprocess.run([script(), *argv[1:], "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    # (argparse prints help before it would refuse an unknown option: each one must be in the help)
    assert all(a.split("=")[0] in done.stdout for a in argv[2:] if a.startswith("--")), done.stdout
    hardening = {"NoNewPrivileges": "yes", "ProtectSystem": "strict", "ProtectHome": "yes", "PrivateTmp": "yes",
                 "PrivateDevices": "yes", "DynamicUser": "yes", "RestrictSUIDSGID": "yes", "CapabilityBoundingSet": ""}
    for key, value in hardening.items():
        assert keys.get(key) == [value], key
    assert any(v.startswith("~@privileged") for v in keys["SystemCallFilter"])
    env = dict(pair.split("=", 1) for line in keys["Environment"] for pair in shlex.split(line))
    assert set(env) <= names_read_by_the_package() | {"HOME", "XDG_CACHE_HOME"}
    assert env["HOST"] == "127.0.0.1"  # behind a proxy on the same host
    assert keys["EnvironmentFile"] == ["/etc/vantage-peers/env"]
    analyze = shutil.which("systemd-analyze")
    if analyze:  # the unit's syntax, where systemd is installed (the ExecStart path is the host's)
        out = subprocess.run([analyze, "verify", str(DEPLOY / "vantage-peers.service")], capture_output=True,
                             text=True, timeout=60)
        assert "Unknown key" not in out.stderr and "Invalid" not in out.stderr, out.stderr


def test_the_containerfile_builds_from_the_lock_and_runs_serve_as_a_user():
    text = (ROOT / "Containerfile").read_text()
    stages = re.findall(r"^FROM\s+(\S+)", text, re.M)
    assert stages and all(s.endswith("/python:3.11-slim") for s in stages)
    assert "uv sync --frozen --no-dev" in text
    user = re.findall(r"^USER\s+(\S+)", text, re.M)
    assert user and user[-1] not in ("root", "0")
    assert re.search(r"^HEALTHCHECK .*\n?.*?/healthz", text, re.M | re.S)
    assert re.search(r'^ENTRYPOINT \["vantage-peers"\]', text, re.M) and re.search(r'^CMD \["serve"\]', text, re.M)
    ignore = (ROOT / ".containerignore").read_text().splitlines()
    assert (ROOT / ".dockerignore").read_text().splitlines() == ignore
    for src in re.findall(r"^COPY (?!--from)(.+) \S+$", text, re.M):
        for name in src.split():
            assert (ROOT / name).exists(), name
            assert f"!{name.rstrip('/')}" in ignore or f"!{name.rstrip('/')}/" in ignore, f"{name} is not sent"


# -- the real build (opt-in) ------------------------------------------------------------------------
def _builder() -> str | None:
    for tool in ("podman", "docker"):
        path = shutil.which(tool)
        if path and subprocess.run([path, "info"], capture_output=True, timeout=60).returncode == 0:
            return path
    return None


def _offline() -> str | None:
    """Why the build cannot fetch what it needs (the base image, PyPI), or None."""
    for host in ("registry-1.docker.io", "pypi.org", "files.pythonhosted.org"):
        try:
            socket.create_connection((host, 443), timeout=5).close()
        except OSError as exc:
            return f"offline: {host}:443 unreachable ({exc.__class__.__name__})"
    return None


@pytest.mark.slow
def test_the_container_image_builds_and_runs_the_cli_as_a_user():
    if os.environ.get("VP_CONTAINER_BUILD") != "1":
        pytest.skip("opt-in: VP_CONTAINER_BUILD=1 builds the image (pulls python:3.11-slim and every wheel)")
    builder = _builder()
    if builder is None:
        pytest.skip("no working podman or docker (`info` failed or absent)")
    why = _offline()
    if why:
        pytest.skip(why)
    tag = f"localhost/vantage-peers-test:{uuid.uuid4().hex[:8]}"
    try:
        built = subprocess.run([builder, "build", "-t", tag, "-f", "Containerfile", "."], cwd=ROOT,
                               capture_output=True, text=True, timeout=1800)
        assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
        ran = subprocess.run([builder, "run", "--rm", tag, "serve", "--help"], capture_output=True, text=True,
                             timeout=300)
        assert ran.returncode == 0 and "--workers" in ran.stdout, ran.stderr
        uid = subprocess.run([builder, "run", "--rm", "--entrypoint", "id", tag, "-u"], capture_output=True,
                             text=True, timeout=300)
        assert uid.returncode == 0 and uid.stdout.strip() not in ("", "0"), uid.stdout + uid.stderr
    finally:
        subprocess.run([builder, "rmi", "-f", tag], capture_output=True, timeout=300)
