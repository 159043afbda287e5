"""Shared helpers of the real-client tests (the fixtures are in conftest.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run(argv: list[str], env: dict[str, str], cwd: Path, timeout: float = 180) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, check=False)
