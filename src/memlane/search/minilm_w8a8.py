"""Int8 activations for the packaged MiniLM ("w8a8"): twice the embedding speed, same vectors per text.

The packaged model keeps its weights in int8 but dequantizes them to float32, so every
matrix product runs in float32; that was 76% of embedding time. This module rewrites the
graph once at load time so each of those products runs in integer arithmetic:

* **Per-row (per-token) activation scales.** Each token's activation row gets its own int8
  scale, computed on the fly from that row alone. A text's vector therefore never depends on
  which texts share its batch, or on padding (the per-tensor scale of onnxruntime's own
  dynamic quantization does depend on both, which would make stored vectors irreproducible).
* **Smoothing of LayerNorm outputs.** A few channels of this model's LayerNorm outputs (99,
  223, 63, ...) run many times larger than the rest, so one scale per row would spend most
  int8 steps on them. As in SmoothQuant (Xiao et al., 2022), each such input channel is
  divided by ``s_j = max|x_j|^0.5 / max|w_j|^0.5`` and the matching weight row multiplied by
  it, which leaves the product unchanged and evens out the channels before rounding. The
  ``max|x_j|`` come from a calibration run over ``data/minilm-calibration.txt``; they are
  shipped in ``data/minilm-w8a8-smoothing.npz`` for the packaged model (regenerate with
  ``python -m memlane.cli.minilm_w8a8``) and computed at load time for any other file.

``python -m memlane.cli.minilm_w8a8 --compare`` measures both variants on LoCoMo's turns:
the cosine of each text's two vectors and the texts/s of each.

Integer products are exact, so the vectors are the same on every CPU: where the fast
unsigned x signed kernel could saturate (x86 without VNNI), weights are stored unsigned
instead, which is slower but gives the same integers.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.resources
import platform
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Final

import numpy as np
from numpy.typing import NDArray

from memlane.errors import EmbedderError

__all__ = [
    "SMOOTHING_ALPHA",
    "calibrate",
    "calibration_texts",
    "quantizable_matmuls",
    "w8a8_cache_name",
    "w8a8_model",
]

#: SmoothQuant's migration strength: 0.5 splits the range evenly between activations and
#: weights. 0.5 to 0.8 measured alike here; smoothing inputs other than LayerNorm outputs
#: (attention output, GELU) made the vectors worse, so only those are smoothed.
SMOOTHING_ALPHA: Final = 0.5
_QMAX: Final = 127.0
_SHA_KEY: Final = "__model_sha256__"
_PREFIX: Final = "memlane_w8a8"
_MS_DOMAIN: Final = "com.microsoft"

FloatArray = NDArray[np.float32]


@dataclass(frozen=True)
class QuantizableMatMul:
    """A MatMul whose right operand is a dequantized int8 weight: ``x @ (q * scale)``."""

    node_name: str
    activation: str
    output: str
    weight_q: str  # int8 initializer (K, N)
    weight_scale: str  # float32 initializer (1, N) or scalar
    from_layer_norm: bool


def _data_path(name: str) -> Path:
    return Path(str(importlib.resources.files("memlane.search") / "data" / name))


def calibration_texts() -> list[str]:
    """The shipped calibration texts: chat turns in English and German, code, errors."""
    lines = _data_path("minilm-calibration.txt").read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip()]


def _onnx() -> Any:
    try:
        import onnx
    except ImportError as exc:  # pragma: no cover - a declared dependency
        raise EmbedderError(
            "int8 activations for MiniLM need the onnx package (pip install 'onnx>=1.16'); "
            "or use the float32-activation variant, embedder 'minilm-f32'"
        ) from exc
    return onnx


def quantizable_matmuls(model: Any) -> list[QuantizableMatMul]:
    """The MatMuls of ``model`` (an onnx ModelProto) that multiply by a dequantized int8 weight."""
    graph = model.graph
    inits = {init.name: init for init in graph.initializer}
    producers = {out: node for node in graph.node for out in node.output}
    found: list[QuantizableMatMul] = []
    for node in graph.node:
        if node.op_type != "MatMul":
            continue
        mul = producers.get(node.input[1])
        if mul is None or mul.op_type != "Mul":
            continue
        cast = producers.get(mul.input[0])
        if cast is None or cast.op_type != "Cast" or cast.input[0] not in inits or mul.input[1] not in inits:
            continue
        if inits[cast.input[0]].data_type != _onnx().TensorProto.INT8:
            continue
        source = producers.get(node.input[0])
        found.append(
            QuantizableMatMul(
                node_name=node.name or node.output[0],
                activation=node.input[0],
                output=node.output[0],
                weight_q=cast.input[0],
                weight_scale=mul.input[1],
                from_layer_norm=source is not None and source.op_type == "LayerNormalization",
            )
        )
    return found


def calibrate(model: Any, tokenizer: Any, texts: Sequence[str]) -> dict[str, FloatArray]:
    """Per-channel max |activation| of every LayerNorm output that feeds an int8 MatMul.

    Runs the float32-activation model one text at a time (no padding rows in the maxima).
    ``tokenizer`` is a ``tokenizers.Tokenizer`` set up as MiniLMEmbedder uses it.
    """
    import onnxruntime as ort

    onnx = _onnx()
    names = sorted({m.activation for m in quantizable_matmuls(model) if m.from_layer_norm})
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    for name in names:
        probe.graph.output.append(onnx.helper.make_tensor_value_info(name, onnx.TensorProto.FLOAT, None))
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    inputs = {node.name for node in session.get_inputs()}
    maxima: dict[str, FloatArray] = {}
    for text in texts:
        ids = np.asarray([tokenizer.encode(text).ids], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": np.ones_like(ids)}
        if "token_type_ids" in inputs:
            feeds["token_type_ids"] = np.zeros_like(ids)
        for name, value in zip(names, session.run(names, feeds), strict=True):
            row_max = np.abs(np.asarray(value, dtype=np.float32)).reshape(-1, value.shape[-1]).max(axis=0)
            maxima[name] = np.maximum(maxima[name], row_max) if name in maxima else row_max
    return maxima


def _file_sha256(path: Path) -> str:
    with path.open("rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _shipped_maxima(model_sha: str) -> dict[str, FloatArray] | None:
    path = _data_path("minilm-w8a8-smoothing.npz")
    if not path.is_file():
        return None
    with np.load(path, allow_pickle=False) as data:
        if str(data[_SHA_KEY]) != model_sha:
            return None
        return {key: np.asarray(data[key], dtype=np.float32) for key in data.files if key != _SHA_KEY}


@lru_cache(maxsize=1)
def u8s8_is_exact() -> bool:
    """Whether onnxruntime's uint8 x int8 kernel sums without int16 saturation here.

    On x86 without VNNI it multiplies pairs into int16 (vpmaddubsw), which saturates for
    large weights; with VNNI (and on ARM's dot-product kernels) it accumulates in int32.
    """
    machine = platform.machine().lower()
    if machine not in ("x86_64", "amd64", "i386", "i686"):
        return True
    if not sys.platform.startswith("linux"):
        return False  # cannot tell cheaply; the unsigned path is exact everywhere
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace")
    except OSError:
        return False
    return "avx512_vnni" in flags or "avx_vnni" in flags


def _smoothing(maxima: FloatArray, weights: list[FloatArray]) -> FloatArray:
    # One factor per input channel, shared by every weight that reads this activation (Q, K,
    # V and the feed-forward input read the same LayerNorm output).
    w_max = np.max(np.stack([np.abs(w).max(axis=1) for w in weights]), axis=0)
    x_max = np.asarray(maxima, dtype=np.float32)
    factors = np.maximum(x_max, 1e-5) ** SMOOTHING_ALPHA / np.maximum(w_max, 1e-5) ** (1 - SMOOTHING_ALPHA)
    return np.asarray(factors, dtype=np.float32)


def _requantize(weight: FloatArray) -> tuple[NDArray[np.int8], FloatArray]:
    scale = np.maximum(np.abs(weight).max(axis=0, keepdims=True), 1e-12) / _QMAX
    q = np.clip(np.round(weight / scale), -_QMAX, _QMAX).astype(np.int8)
    return q, scale.astype(np.float32)


def rewrite(model: Any, maxima: Mapping[str, FloatArray], *, unsigned_weights: bool) -> bytes:
    """The serialized model with every dequantized-int8 MatMul run as a w8a8 integer product."""
    onnx = _onnx()
    helper, numpy_helper, tensor = onnx.helper, onnx.numpy_helper, onnx.TensorProto
    model = _copy(model)
    graph = model.graph
    matmuls = {m.output: m for m in quantizable_matmuls(model)}
    if not matmuls:
        raise EmbedderError(
            "this ONNX model has no int8-weight MatMuls to run with int8 activations; "
            "use the float32-activation variant (embedder 'minilm-f32')"
        )
    inits = {init.name: init for init in graph.initializer}
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 17)

    def array(name: str) -> NDArray[Any]:
        return np.asarray(numpy_helper.to_array(inits[name]))

    def constant(name: str, value: NDArray[Any]) -> str:
        graph.initializer.append(numpy_helper.from_array(value, name))
        return name

    zero_point = constant(f"{_PREFIX}_zero_point", np.array(128, dtype=np.uint8))
    qmax = constant(f"{_PREFIX}_qmax", np.array(_QMAX, dtype=np.float32))
    eps = constant(f"{_PREFIX}_eps", np.array(1e-12, dtype=np.float32))
    # +128 moves [-127, 127] to [1, 255]; the extra 0.5 lets the float-to-uint8 Cast, which
    # truncates, round to nearest (half up) without a Round pass over the tensor.
    offset = constant(f"{_PREFIX}_offset", np.array(128.5, dtype=np.float32))
    one = constant(f"{_PREFIX}_one", np.array(1.0, dtype=np.float32))
    axes = constant(f"{_PREFIX}_axes", np.array([-1], dtype=np.int64)) if opset >= 18 else None

    # Weights: smoothed (LayerNorm inputs) and requantized, or kept as packaged.
    by_activation: dict[str, list[QuantizableMatMul]] = {}
    for m in matmuls.values():
        by_activation.setdefault(m.activation, []).append(m)
    smoothing: dict[str, FloatArray] = {}
    weight_inputs: dict[str, tuple[str, str]] = {}
    for activation, group in by_activation.items():
        dequantized = {m.output: array(m.weight_q).astype(np.float32) * array(m.weight_scale) for m in group}
        if group[0].from_layer_norm and activation in maxima:
            factors = _smoothing(maxima[activation], list(dequantized.values()))
            smoothing[activation] = factors
        for m in group:
            if activation in smoothing:
                q, scale = _requantize(dequantized[m.output] * smoothing[activation][:, None])
            else:
                q = array(m.weight_q).astype(np.int8)
                scale = np.asarray(array(m.weight_scale), dtype=np.float32)
            stored: NDArray[Any] = (q.astype(np.int16) + 128).astype(np.uint8) if unsigned_weights else q
            weight_inputs[m.output] = (
                constant(f"{_PREFIX}_{m.output}_w", stored),
                constant(f"{_PREFIX}_{m.output}_w_scale", scale),
            )

    nodes: list[Any] = []
    quantized: dict[str, tuple[str, str]] = {}  # activation -> (uint8 tensor, row scale)

    def quantize(activation: str) -> tuple[str, str]:
        if activation in quantized:
            return quantized[activation]
        p = f"{_PREFIX}_{len(quantized)}"
        source = activation
        if activation in smoothing:
            inverse = constant(f"{p}_inv_smooth", (1.0 / smoothing[activation]).astype(np.float32))
            nodes.append(helper.make_node("Mul", [activation, inverse], [f"{p}_smoothed"]))
            source = f"{p}_smoothed"
        reduce = (
            helper.make_node("ReduceMax", [f"{p}_abs", axes], [f"{p}_max"], keepdims=1)
            if axes is not None
            else helper.make_node("ReduceMax", [f"{p}_abs"], [f"{p}_max"], keepdims=1, axes=[-1])
        )
        nodes.extend([
            helper.make_node("Abs", [source], [f"{p}_abs"]),
            reduce,
            helper.make_node("Max", [f"{p}_max", eps], [f"{p}_max_safe"]),
            helper.make_node("Div", [f"{p}_max_safe", qmax], [f"{p}_scale"]),
            # One division per row, then a multiply per element (a Div per element is slower).
            helper.make_node("Div", [qmax, f"{p}_max_safe"], [f"{p}_inv_scale"]),
            helper.make_node("Mul", [source, f"{p}_inv_scale"], [f"{p}_scaled"]),
            # |scaled| <= 127 (up to one rounding step), so +128.5 lands in [1, 256) and
            # truncates to [1, 255].
            helper.make_node("Add", [f"{p}_scaled", offset], [f"{p}_shifted"]),
            helper.make_node("Cast", [f"{p}_shifted"], [f"{p}_u8"], to=tensor.UINT8),
        ])
        quantized[activation] = (f"{p}_u8", f"{p}_scale")
        return quantized[activation]

    for node in graph.node:
        target = matmuls.get(node.output[0]) if node.op_type == "MatMul" else None
        if target is None:
            nodes.append(node)
            continue
        a_u8, a_scale = quantize(target.activation)
        w, w_scale = weight_inputs[target.output]
        zero_points = [zero_point, zero_point] if unsigned_weights else [zero_point]
        o = target.output
        nodes.extend([
            # The integer product, its conversion to float and the weight's column scales in
            # one kernel (onnxruntime's contrib op), so only the row scale is a pass of its own.
            # Its a_scale is one number per tensor (or per column of A), never per row.
            helper.make_node(
                "MatMulIntegerToFloat", [a_u8, w, one, w_scale, *zero_points], [f"{o}_{_PREFIX}_cols"],
                domain=_MS_DOMAIN,
            ),
            helper.make_node("Mul", [f"{o}_{_PREFIX}_cols", a_scale], [o]),
        ])
    del graph.node[:]
    rewritten = _gather_int8_tables(_fuse_bias_gelu(_drop_nan_guards(nodes), inits), inits)
    graph.node.extend(_live(rewritten, {out.name for out in graph.output}))
    if not any(o.domain == _MS_DOMAIN for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid(_MS_DOMAIN, 1))
    used = {name for node in graph.node for name in node.input}
    live_inits = [init for init in graph.initializer if init.name in used]
    del graph.initializer[:]
    graph.initializer.extend(live_inits)
    # No onnx.checker here: it would re-validate the same rewrite at every start-up;
    # tests/test_minilm_w8a8.py runs it on the rewritten model instead.
    data: bytes = model.SerializeToString()
    return data


def _drop_nan_guards(nodes: list[Any]) -> list[Any]:
    """Drop ``Where(IsNaN(softmax), 0, softmax)`` after each attention softmax.

    The exporter guards against rows whose every key is masked; here every row keeps at
    least [CLS] unmasked, so the guard never fires and only costs two passes per layer.
    """
    producers = {out: node for node in nodes for out in node.output}
    renames: dict[str, str] = {}
    dropped: set[int] = set()
    for node in nodes:
        if node.op_type != "Where" or len(node.input) != 3:
            continue
        isnan = producers.get(node.input[0])
        if isnan is None or isnan.op_type != "IsNaN" or node.input[2] != isnan.input[0]:
            continue
        source = producers.get(isnan.input[0])
        if source is None or source.op_type != "Softmax":
            continue
        renames[node.output[0]] = isnan.input[0]
        dropped.update((id(node), id(isnan)))
    kept = [node for node in nodes if id(node) not in dropped]
    for node in kept:
        for i, name in enumerate(node.input):
            if name in renames:
                node.input[i] = renames[name]
    return kept


def _fuse_bias_gelu(nodes: list[Any], inits: Mapping[str, Any]) -> list[Any]:
    """``x = a + bias; x * 0.5 * (1 + erf(x / sqrt 2))`` as one com.microsoft ``BiasGelu``.

    The exporter writes GELU as five elementwise operators over the widest activations of
    the model (1536 per token), after the bias Add: six passes that one kernel does. The
    pattern is matched exactly (with its constants); anything else is left as it is.
    """
    producers = {out: node for node in nodes for out in node.output}
    consumers: dict[str, list[Any]] = {}
    for node in nodes:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def only_consumer(name: str, op_type: str) -> Any:
        found = consumers.get(name, [])
        return found[0] if len(found) == 1 and found[0].op_type == op_type else None

    def constant(name: str) -> float | None:
        init = inits.get(name)
        if init is None:
            return None
        value = np.asarray(_onnx().numpy_helper.to_array(init))
        return float(value) if value.size == 1 else None

    replaced: dict[int, Any] = {}
    dropped: set[int] = set()
    for erf in nodes:
        if erf.op_type != "Erf":
            continue
        div = producers.get(erf.input[0])
        if div is None or div.op_type != "Div" or not np.isclose(constant(div.input[1]) or 0.0, np.sqrt(2.0)):
            continue
        x = div.input[0]
        bias_add = producers.get(x)
        add_one = only_consumer(erf.output[0], "Add")
        if bias_add is None or bias_add.op_type != "Add" or add_one is None:
            continue
        if constant(next((n for n in add_one.input if n != erf.output[0]), "")) != 1.0:
            continue
        half = only_consumer(add_one.output[0], "Mul")
        if half is None or constant(next((n for n in half.input if n != add_one.output[0]), "")) != 0.5:
            continue
        times_x = only_consumer(half.output[0], "Mul")
        if times_x is None or x not in times_x.input or len(consumers.get(x, [])) != 2:
            continue
        biases = [n for n in bias_add.input if n in inits and inits[n].dims and len(inits[n].dims) == 1]
        if len(biases) != 1:
            continue
        a = next(n for n in bias_add.input if n != biases[0])
        replaced[id(times_x)] = _onnx().helper.make_node(
            "BiasGelu", [a, biases[0]], [times_x.output[0]], domain=_MS_DOMAIN
        )
        dropped.update((id(bias_add), id(div), id(erf), id(add_one), id(half)))
    return [replaced.get(id(node), node) for node in nodes if id(node) not in dropped]


def _gather_int8_tables(nodes: list[Any], inits: Mapping[str, Any]) -> list[Any]:
    """Look rows up in the int8 embedding tables, then dequantize only those rows.

    The packaged graph dequantizes a whole table (``Cast(q) * scale``) before its
    ``Gather``; onnxruntime folds that into a float32 constant, so the word embeddings
    (30,522 x 384) took 47 MB of float32 in every process and in the cached model file
    instead of 12 MB of int8 (~80% of the file), and reading them made every session
    start slower. ``Gather(q) -> Cast -> * Gather(scale)`` does the same float32 multiply
    per element on the rows the batch uses, so the vectors are bit for bit the same.
    Only tables with one scale per row (or one for all) read by nothing but Gathers
    are rewritten.
    """
    helper, tensor = _onnx().helper, _onnx().TensorProto
    producers = {out: node for node in nodes for out in node.output}
    consumers: dict[str, list[Any]] = {}
    for node in nodes:
        for name in node.input:
            consumers.setdefault(name, []).append(node)
    replaced: dict[int, list[Any]] = {}
    dropped: set[int] = set()
    for mul in nodes:
        if mul.op_type != "Mul" or len(mul.input) != 2:
            continue
        cast = producers.get(mul.input[0])
        scale = inits.get(mul.input[1])
        if cast is None or cast.op_type != "Cast" or scale is None or len(cast.input) != 1:
            continue
        if any(a.name == "to" and a.i != tensor.FLOAT for a in cast.attribute):
            continue
        table = inits.get(cast.input[0])
        if table is None or table.data_type != tensor.INT8 or len(table.dims) != 2:
            continue
        scale_dims = list(scale.dims)
        per_row = scale_dims == [table.dims[0], 1]
        if not per_row and any(d != 1 for d in scale_dims):
            continue
        users = consumers.get(mul.output[0], [])
        if not users or any(u.op_type != "Gather" or u.input[0] != mul.output[0] for u in users):
            continue
        if len(consumers.get(cast.output[0], [])) != 1 or any(
            a.name == "axis" and a.i != 0 for u in users for a in u.attribute
        ):
            continue
        for gather in users:
            out = gather.output[0]
            rows, ids = f"{out}_{_PREFIX}_q", gather.input[1]
            new = [
                helper.make_node("Gather", [table.name, ids], [rows], axis=0),
                helper.make_node("Cast", [rows], [f"{rows}_f"], to=tensor.FLOAT),
            ]
            row_scale = scale.name
            if per_row:
                row_scale = f"{out}_{_PREFIX}_scale"
                new.append(helper.make_node("Gather", [scale.name, ids], [row_scale], axis=0))
            new.append(helper.make_node("Mul", [f"{rows}_f", row_scale], [out]))
            replaced[id(gather)] = new
        dropped.update((id(cast), id(mul)))
    return [new for node in nodes if id(node) not in dropped for new in replaced.get(id(node), [node])]


def _copy(model: Any) -> Any:
    onnx = _onnx()
    clone = onnx.ModelProto()
    clone.CopyFrom(model)
    return clone


def _live(nodes: list[Any], outputs: set[str]) -> list[Any]:
    """Nodes that (transitively) feed a graph output, in their original order."""
    needed = set(outputs)
    keep: list[bool] = [False] * len(nodes)
    for i in range(len(nodes) - 1, -1, -1):
        if any(out in needed for out in nodes[i].output):
            keep[i] = True
            needed.update(nodes[i].input)
    return [node for node, k in zip(nodes, keep, strict=True) if k]


def w8a8_model(model_path: Path, tokenizer: Any) -> bytes:
    """The packaged (or given) int8-weight MiniLM rewritten for int8 activations, serialized."""
    onnx = _onnx()
    try:
        model = onnx.load(str(model_path))
    except Exception as exc:  # onnx raises DecodeError & co. for a bad file
        raise EmbedderError(f"cannot read ONNX model {model_path}: {exc}") from exc
    maxima = _shipped_maxima(_file_sha256(model_path))
    if maxima is None:
        maxima = calibrate(model, tokenizer, calibration_texts())
    return rewrite(model, maxima, unsigned_weights=not u8s8_is_exact())


def w8a8_cache_name(model_path: Path) -> str:
    """A name for the rewrite of ``model_path`` that changes with whatever the rewrite
    depends on: the model file (by identity, not by content: hashing 23 MB would cost what
    a cache saves), this module's code, the shipped smoothing and calibration data, and
    the weight signedness chosen for this CPU. Raises OSError when the file is unreadable.
    """
    digest = hashlib.sha256()
    stat = model_path.stat()
    digest.update(f"{model_path.resolve()}|{stat.st_size}|{stat.st_mtime_ns}|{u8s8_is_exact()}".encode())
    for part in (Path(__file__), _data_path("minilm-w8a8-smoothing.npz"), _data_path("minilm-calibration.txt")):
        with contextlib.suppress(OSError):  # a missing data file is part of the key too
            digest.update(part.read_bytes())
    return f"minilm-w8a8-{digest.hexdigest()[:24]}"
