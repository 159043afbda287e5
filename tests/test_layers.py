"""Every module of the package sits in a layer of the import-linter contract (`lint-imports` in CI): a
new top-level module cannot escape the "nothing imports upward" rule by not being listed."""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path

import vantage_peers

ROOT = Path(__file__).resolve().parents[1]


def test_every_top_level_module_is_in_a_layer():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    layers = next(c for c in config["contracts"] if c["type"] == "layers")["layers"]
    listed = {name.strip() for layer in layers for name in layer.replace(":", "|").split("|")}
    modules = {f"vantage_peers.{m.name}" for m in pkgutil.iter_modules(vantage_peers.__path__)}
    assert modules - listed == set(), "add these to a layer in pyproject.toml"
    assert listed - modules == set(), "these layers name modules that no longer exist"
