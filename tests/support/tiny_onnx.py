"""A tiny cross-encoder built as an ONNX graph in the test (no `onnx` package: the protobuf helpers of
embedding/int8_graph.py): score = sum over the pair's tokens of a per-token weight, so a candidate
holding a boosted word scores higher — enough to check that reranking reorders by the model."""

from __future__ import annotations

from array import array
from pathlib import Path

from vantage_peers.embedding import int8_graph as g

INT64 = 7


def _value_info(name: str, elem: int, dims: list[str]) -> bytes:
    shape = b"".join(g._len_field(1, g._str(2, d)) for d in dims)  # TensorShapeProto.dim { dim_param }
    tensor_type = g._int_field(1, elem) + g._len_field(2, shape)
    return g._str(1, name) + g._len_field(2, g._len_field(1, tensor_type))


def _node(op: str, inputs: list[str], outputs: list[str], attrs: bytes = b"") -> bytes:
    return bytes(g.Node(op=op, inputs=inputs, outputs=outputs, attrs=attrs, name=f"{op}_{outputs[0]}").encode())


def cross_encoder(folder: Path, tokenizer_json: str, boosted: list[int], vocab: int) -> Path:
    """Write `model.onnx` (a weight of 1.0 on the `boosted` token ids) and `tokenizer.json` to `folder`."""
    weights = array("f", [0.0] * vocab)
    for token in boosted:
        weights[token] = 1.0
    axes = g._len_field(g.TENSOR_DIMS, g._enc_varint(1)) + g._int_field(g.TENSOR_TYPE, INT64) + \
        g._str(g.TENSOR_NAME, "axes") + g._len_field(g.TENSOR_RAW, array("q", [1]).tobytes())
    nodes = [
        _node("Gather", ["weights", "input_ids"], ["per_token"]),
        _node("Cast", ["attention_mask"], ["mask_f"], g._len_field(g.NODE_ATTR, g._str(g.ATTR_NAME, "to")
                                                                  + g._int_field(g.ATTR_I, g.FLOAT)
                                                                  + g._int_field(g.ATTR_TYPE, g.ATTR_INT))),
        _node("Mul", ["per_token", "mask_f"], ["masked"]),
        _node("ReduceSum", ["masked", "axes"], ["logits"], g._int_attr("keepdims", 1)),
    ]
    graph = b"".join(g._len_field(g.GRAPH_NODE, n) for n in nodes) + g._str(2, "tiny_cross_encoder")
    graph += g._len_field(g.GRAPH_INITIALIZER, g.float_tensor("weights", [vocab], weights.tobytes()))
    graph += g._len_field(g.GRAPH_INITIALIZER, axes)
    graph += g._len_field(11, _value_info("input_ids", INT64, ["batch", "tokens"]))
    graph += g._len_field(11, _value_info("attention_mask", INT64, ["batch", "tokens"]))
    graph += g._len_field(12, _value_info("logits", g.FLOAT, ["batch", "one"]))
    model = g._int_field(1, 8) + g._len_field(g.MODEL_OPSET, g._str(1, "") + g._int_field(2, 17))
    model += g._len_field(g.MODEL_GRAPH, graph)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.onnx").write_bytes(model)
    (folder / "tokenizer.json").write_text(tokenizer_json, encoding="utf-8")
    return folder
