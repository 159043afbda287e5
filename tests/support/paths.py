"""Where things are, for tests at any depth of tests/ (they are laid out like the package)."""

import shutil
import sys
from pathlib import Path

SUPPORT = Path(__file__).resolve().parent  # tests/support: helpers and the worker scripts tests start
TESTS = SUPPORT.parent
REPO = TESTS.parent
SHARED = REPO.parent / "shared"  # the workplace's shared folder (spec, seeds), beside the clone


def console_script() -> str:
    """The `vantage-peers` console script of the environment running the tests."""
    local = Path(sys.executable).parent / "vantage-peers"
    return str(local) if local.exists() else shutil.which("vantage-peers")  # type: ignore[return-value]
