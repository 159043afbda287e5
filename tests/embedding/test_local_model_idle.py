"""#20: an idle server gives the local model's memory back and loads it again on demand."""

from __future__ import annotations

import time

import numpy as np
import pytest

from vantage_peers.embedding import local


def _wait_until(condition, seconds: float = 30.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.05)
    return condition()


def test_the_model_is_unloaded_when_idle_and_reloads_on_demand():
    embedder = local.LocalEmbedder(idle_unload_s=0.2)  # its own instance: the process-wide one stays
    first = embedder.embed_array(["Rotate the OKLCH palette tokens", "PR-1234 fixed the webhook retries"])
    assert embedder.loaded
    assert _wait_until(lambda: not embedder.loaded), "never unloaded after being idle"
    again = embedder.embed_array(["Rotate the OKLCH palette tokens", "PR-1234 fixed the webhook retries"])
    assert embedder.loaded and np.allclose(first, again, atol=1e-5)  # same model, same vectors


@pytest.mark.slow
def test_use_keeps_the_model_loaded_and_none_never_unloads():
    busy = local.LocalEmbedder(idle_unload_s=3.0)
    busy.embed_array(["warm"])
    for _ in range(4):  # used every 0.3 s: never idle for 3 s
        time.sleep(0.3)
        assert busy.loaded
        busy.embed_array(["still busy"])
    kept = local.LocalEmbedder(idle_unload_s=None)
    kept.embed_array(["kept"])
    time.sleep(0.5)
    assert kept.loaded and kept._timer is None
