"""The local model's runs (#34): texts grouped by padded tokens and, for long rows, by rows × longest
row² (the attention scores each layer holds), so a reindex of abstracts stays within its memory; the
grouping changes neither the vectors nor their order."""

from __future__ import annotations

import random

import numpy as np
import pytest

from vantage_peers.embedding import local


def _check(lengths: list[int], groups: list[list[int]], *, budget: int, attention: int, cap: int) -> None:
    assert sorted(i for g in groups for i in g) == list(range(len(lengths)))  # every row once
    widths = [max(max(lengths[i] for i in g), 1) for g in groups]
    for g, width in zip(groups, widths, strict=True):
        assert len(g) <= cap
        if len(g) > 1:  # one row always runs, whatever its length
            assert len(g) * width <= budget, (len(g), width)
            assert len(g) * width * width <= attention, (len(g), width)
    assert widths == sorted(widths)  # shortest first: little padding


@pytest.mark.parametrize("seed", range(6))
def test_no_run_exceeds_the_token_or_the_attention_budget(seed):
    rng = random.Random(seed)
    budget, attention, cap = rng.choice([(512, 65536, 64), (2048, 131072, 64), (300, 20000, 7)])
    lengths = [rng.choice([rng.randint(0, 40), rng.randint(40, 256), 256]) for _ in range(rng.randint(1, 400))]
    groups = local.batches(lengths, budget=budget, attention=attention, cap=cap)
    _check(lengths, groups, budget=budget, attention=attention, cap=cap)


def test_the_defaults_run_a_long_row_alone_and_fill_runs_of_short_ones():
    lengths = [256] * 5 + [128] * 8 + [16] * 100 + [4] * 100
    groups = local.batches(lengths)
    _check(lengths, groups, budget=local.TOKEN_BUDGET, attention=local.ATTENTION_BUDGET, cap=local.MAX_BATCH)
    sizes: dict[int, int] = {}
    for g in groups:  # the largest run of each length (the last one holds what is left)
        sizes[lengths[g[0]]] = max(sizes.get(lengths[g[0]], 0), len(g))
    assert sizes[256] == 1  # a 256-piece row alone: ≈26 MB of activations, not 8 × that
    assert sizes[128] == 4  # 4 × 128² = 256²
    assert sizes[16] == local.TOKEN_BUDGET // 16
    assert sizes[4] == local.MAX_BATCH


@pytest.mark.slow
def test_grouping_changes_neither_the_vectors_nor_their_order():
    rng = random.Random(3)
    words = ["lease", "window", "deploy", "cache", "billing", "ledger", "boundary", "layer", "flow", "pressure", "gradient", "wing"]
    texts = [" ".join(rng.choice(words) for _ in range(rng.choice([3, 12, 60, 150, 300]))) for _ in range(40)]
    texts += ["", "x"]
    embedder = local.LocalEmbedder(idle_unload_s=None)
    together = embedder.embed_array(texts)
    assert len(embedder.runs(texts)) < len(texts)  # several rows share runs
    alone = np.vstack([embedder.embed_array([t]) for t in texts])  # one row per run, unpadded
    assert np.abs(together - alone).max() <= 1e-6
