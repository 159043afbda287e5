"""pgvector's text form of a vector (search/pg_vectors.py `literal`, #34): 9 significant digits of the
float32 value, which PostgreSQL reads back as exactly that float32 — what it stores, what a KNN compares."""

from __future__ import annotations

import numpy as np
import pytest

from vantage_peers.search import pg_vectors
from vantage_peers.search.vectors import VecTable

TABLE = VecTable(name="test_literal_vec", label="row", columns_ddl="kind TEXT", columns=("kind",))


def _parsed(text: str) -> np.ndarray:
    assert text[0] == "[" and text[-1] == "]"
    return np.array(text[1:-1].split(","), dtype=np.float32)  # strtof, as pgvector's vector_in


def _awkward(rng: np.random.Generator) -> list[np.ndarray]:
    """Unit vectors, and values far from them: tiny, subnormal, huge, negative zero, float32's extremes."""
    unit = rng.standard_normal((200, 384)).astype(np.float32)
    unit /= np.linalg.norm(unit, axis=1, keepdims=True)
    spread = (rng.standard_normal((50, 64)) * 10.0 ** rng.integers(-40, 38, size=(50, 64))).astype(np.float32)
    edges = np.array([0.0, -0.0, 1e-45, -1e-45, 1.1754944e-38, 3.4028235e38, -3.4028235e38, 1 / 3, 0.1],
                     dtype=np.float32)
    return [*unit, *spread, edges]


def test_the_literal_reads_back_as_the_same_float32_values():
    rng = np.random.default_rng(34)
    for vec in _awkward(rng):
        text = pg_vectors.literal(vec)
        assert np.array_equal(_parsed(text), vec) and np.array_equal(np.signbit(_parsed(text)), np.signbit(vec))
        assert pg_vectors.literal(vec.tolist()) == text  # a list of the same values: the same text
    doubles = rng.standard_normal(384).tolist()  # float64 (an API's floats): rounded to float32 like numpy
    assert np.array_equal(_parsed(pg_vectors.literal(doubles)), np.asarray(doubles, dtype=np.float32))
    assert max(len(v) for v in pg_vectors.literal(_awkward(rng)[0]).strip("[]").split(",")) <= 15  # 9 digits


@pytest.mark.parametrize("backend", ["postgres"], indirect=True)
def test_postgresql_stores_exactly_the_float32_values(db):
    rng = np.random.default_rng(35)
    vectors = [v[:8] if len(v) >= 8 else np.resize(v, 8) for v in _awkward(rng)]
    vectors = [v for v in vectors if np.isfinite(v).all()]

    def fill(c):
        pg_vectors.create(c, TABLE, 8)
        pg_vectors.replace(c, TABLE, [(i + 1, ("a",), v.tolist()) for i, v in enumerate(vectors)])
        return [text for (text,) in c.rows(f"SELECT embedding::text FROM {TABLE.name} ORDER BY seq")]

    stored = db.write(fill)
    assert len(stored) == len(vectors)
    for text, vec in zip(stored, vectors, strict=True):
        assert np.array_equal(_parsed(text), vec)
