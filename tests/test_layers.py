"""The import contracts (`lint-imports` in CI, pyproject's [tool.importlinter]): every module of the
package sits in a layer, every domain in the domains' order, no contract is weakened by an
exclusion or an ignore, the contracts hold, and they catch the loops they exist to forbid."""

from __future__ import annotations

import os
import pkgutil
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import vantage_peers
from vantage_peers import domains

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def config() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]


def named(layers: list[str]) -> set[str]:
    return {name.strip() for layer in layers for name in layer.replace(":", "|").split("|")}


def contract_of(container: str) -> dict:
    return next(c for c in config()["contracts"] if c.get("containers") == [container])


def lint_imports(cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(LINT_IMPORTS), "--no-cache"], cwd=cwd, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(cwd)})


def test_every_top_level_module_is_in_a_layer():
    layers = next(c for c in config()["contracts"] if c["type"] == "layers")["layers"]
    listed = named(layers)
    modules = {f"vantage_peers.{m.name}" for m in pkgutil.iter_modules(vantage_peers.__path__)}
    assert modules - listed == set(), "add these to a layer in pyproject.toml"
    assert listed - modules == set(), "these layers name modules that no longer exist"


def test_every_domain_is_in_the_domains_order():
    listed = named(contract_of("vantage_peers.domains")["layers"])
    modules = {m.name for m in pkgutil.iter_modules(domains.__path__)}
    assert modules - listed == set(), "add these domains to the domains' layers in pyproject.toml"
    assert listed - modules == set(), "these domain layers name modules that no longer exist"


def test_no_contract_is_weakened():
    """TYPE_CHECKING imports count (an upward import only for typing is still a loop to untie), and no
    contract ignores an import."""
    assert "exclude_type_checking_imports" not in config()
    assert [c["name"] for c in config()["contracts"] if "ignore_imports" in c] == []


def test_lint_imports_keeps_every_contract():
    done = lint_imports(ROOT)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


# What each contract exists to forbid, appended to a module of a copy of the package:
# (module, the import added, the broken rule as lint-imports words it).
LOOPS = {
    "domain loop": ("domains/leases/sweep.py", "from ..tasks import claims\n",
                    "vantage_peers.domains.leases is not allowed to import vantage_peers.domains.tasks"),
    "mission vocabulary back in tasks": ("domains/missions/store.py", "from ..tasks.rules import PRIORITIES\n",
                                         "vantage_peers.domains.missions is not allowed to import "
                                         "vantage_peers.domains.tasks"),
    "typing-only import of app": ("pipeline/toolsets.py", "if TYPE_CHECKING:\n    from .app import App\n",
                                  "vantage_peers.pipeline.toolsets is not allowed to import vantage_peers.pipeline.app"),
    "http into the dashboard": ("http/serve.py", "from ..dashboard import mount\n",
                                "vantage_peers.http is not allowed to import vantage_peers.dashboard"),
}


@pytest.mark.slow  # one `lint-imports` run over a copy of the package each
@pytest.mark.parametrize("case", list(LOOPS))
def test_the_contracts_catch_an_injected_loop(tmp_path, case):
    shutil.copytree(ROOT / "vantage_peers", tmp_path / "vantage_peers", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    path, source, rule = LOOPS[case]
    module = tmp_path / "vantage_peers" / path
    text = module.read_text()
    module.write_text(text + ("" if "TYPE_CHECKING" not in source or "import TYPE_CHECKING" in text
                              else "from typing import TYPE_CHECKING\n") + source)
    done = lint_imports(tmp_path)
    out = done.stdout.replace("\n", "")
    assert done.returncode != 0 and rule in out, done.stdout
    assert "1 broken" in out, "only the injected import breaks a contract"
