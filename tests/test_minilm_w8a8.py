"""Int8 activations for MiniLM: the graph rewrite on a small real ONNX graph, the shipped
calibration, the calibration fallback for other model files, and databases embedded with
the float32-activation variant."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from memlane import EmbedderMismatchError, Memory
from memlane.cli.main import main as cli_main
from memlane.cli.minilm_w8a8 import compare_variants, main
from memlane.errors import EmbedderError
from memlane.search.embedders import (
    MINILM_F32_MODEL_ID,
    MINILM_MODEL_ID,
    MiniLMEmbedder,
    _default_model_path,
)
from memlane.search.minilm_w8a8 import (
    _file_sha256,
    _gather_int8_tables,
    _shipped_maxima,
    calibration_texts,
    quantizable_matmuls,
    rewrite,
    u8s8_is_exact,
    w8a8_cache_name,
)

K, N = 16, 8


def _tiny_model(opset: int, *, int8_weight: bool = True) -> onnx.ModelProto:
    """x -> LayerNorm -> x @ dequant(W) -> y, shaped like one MiniLM projection."""
    rng = np.random.default_rng(3)
    gamma = np.ones(K, np.float32)
    gamma[5] = 12.0  # an outlier channel, as MiniLM's channel 99
    beta = rng.normal(0, 0.1, K).astype(np.float32)
    weight = rng.normal(0, 0.2, (K, N)).astype(np.float32)
    scale = (np.abs(weight).max(axis=0, keepdims=True) / 127).astype(np.float32)
    q = np.round(weight / scale).astype(np.int8)
    inits = [numpy_helper.from_array(gamma, "gamma"), numpy_helper.from_array(beta, "beta")]
    if int8_weight:
        inits += [numpy_helper.from_array(q, "w_q"), numpy_helper.from_array(scale, "w_scale")]
        weight_nodes = [
            helper.make_node("Cast", ["w_q"], ["w_f"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["w_f", "w_scale"], ["w"]),
        ]
    else:
        inits += [numpy_helper.from_array(q.astype(np.float32) * scale, "w")]
        weight_nodes = []
    graph = helper.make_graph(
        [
            helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"], axis=-1),
            *weight_nodes,
            helper.make_node("MatMul", ["ln", "w"], ["y"]),
        ],
        "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["b", "s", K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "s", N])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _run(model: bytes, x: np.ndarray) -> np.ndarray:
    session = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    return np.asarray(session.run(["y"], {"x": x})[0])


def _maxima(model: onnx.ModelProto, x: np.ndarray) -> dict[str, np.ndarray]:
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    probe.graph.output.append(helper.make_tensor_value_info("ln", TensorProto.FLOAT, None))
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    ln = np.asarray(session.run(["ln"], {"x": x})[0])
    return {"ln": np.abs(ln).reshape(-1, K).max(axis=0)}


@pytest.mark.parametrize("opset", [17, 18])
def test_rewrite_matches_float_model_and_is_row_independent(opset: int) -> None:
    model = _tiny_model(opset)
    x = np.random.default_rng(5).normal(0, 1, (3, 7, K)).astype(np.float32)
    expected = _run(model.SerializeToString(), x)
    found = quantizable_matmuls(model)
    assert [(m.activation, m.weight_q, m.from_layer_norm) for m in found] == [("ln", "w_q", True)]

    rewritten = rewrite(model, _maxima(model, x), unsigned_weights=False)
    onnx.checker.check_model(onnx.load_from_string(rewritten))
    smoothed = _run(rewritten, x)
    plain = _run(rewrite(model, {}, unsigned_weights=False), x)

    def rel(y: np.ndarray) -> float:
        return float(np.abs(y - expected).max() / np.abs(expected).max())

    assert rel(smoothed) < 0.02
    assert rel(plain) < 0.05
    assert rel(smoothed) < rel(plain)  # smoothing the outlier channel helps

    # Each row is quantized on its own: a row's output does not depend on the others.
    alone = _run(rewrite(model, _maxima(model, x), unsigned_weights=False), x[1:2, 2:3])
    np.testing.assert_allclose(alone[0, 0], smoothed[1, 2], atol=1e-6)


def test_unsigned_weights_give_the_same_integers() -> None:
    model = _tiny_model(17)
    x = np.random.default_rng(8).normal(0, 1, (2, 5, K)).astype(np.float32)
    signed = _run(rewrite(model, _maxima(model, x), unsigned_weights=False), x)
    unsigned = _run(rewrite(model, _maxima(model, x), unsigned_weights=True), x)
    if u8s8_is_exact():
        np.testing.assert_array_equal(signed, unsigned)
    else:  # the signed kernel may saturate on this CPU, which is why it is not used here
        np.testing.assert_allclose(signed, unsigned, atol=0.05)


def _table_model(scale_shape: tuple[int, ...]) -> onnx.ModelProto:
    """ids -> Gather(Cast(table_q) * scale): how the packaged model looks its embeddings up."""
    rng = np.random.default_rng(4)
    table = rng.integers(-127, 128, (50, K)).astype(np.int8)
    scale = rng.uniform(0.001, 0.02, scale_shape).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["t_q"], ["t_f"], to=TensorProto.FLOAT),
            helper.make_node("Mul", ["t_f", "t_scale"], ["t"]),
            helper.make_node("Gather", ["t", "ids"], ["y"]),
        ],
        "table",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["b", "s"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["b", "s", K])],
        [numpy_helper.from_array(table, "t_q"), numpy_helper.from_array(scale, "t_scale")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


@pytest.mark.parametrize("scale_shape", [(50, 1), (1, 1), ()])
def test_embedding_tables_stay_int8_and_give_the_same_rows(scale_shape: tuple[int, ...]) -> None:
    model = _table_model(scale_shape)
    ids = np.array([[0, 7, 49, 7], [3, 3, 1, 0]], dtype=np.int64)

    def run(m: onnx.ModelProto) -> np.ndarray:
        session = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        return np.asarray(session.run(["y"], {"ids": ids})[0])

    expected = run(model)
    inits = {init.name: init for init in model.graph.initializer}
    nodes = _gather_int8_tables(list(model.graph.node), inits)
    # The whole table is never cast to float: only gathered rows are.
    assert [n.op_type for n in nodes if "t_q" in n.input] == ["Gather"]
    rewritten = onnx.ModelProto()
    rewritten.CopyFrom(model)
    del rewritten.graph.node[:]
    rewritten.graph.node.extend(nodes)
    onnx.checker.check_model(rewritten)
    np.testing.assert_array_equal(run(rewritten), expected)  # bit for bit


def test_a_model_without_int8_weights_is_a_clear_error() -> None:
    with pytest.raises(EmbedderError, match="minilm-f32"):
        rewrite(_tiny_model(17, int8_weight=False), {}, unsigned_weights=False)


def test_shipped_smoothing_matches_a_fresh_calibration(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--check"]) == 0, capsys.readouterr().out
    texts = calibration_texts()
    assert len(texts) >= 50 and any("Ich" in t for t in texts)


def test_another_model_file_is_calibrated_at_load(tmp_path: Path) -> None:
    # A re-saved copy has another sha256, so the shipped maxima do not apply and the
    # embedder calibrates on the shipped texts; the result is the same vectors.
    model = onnx.load(str(_default_model_path()))
    # The packaged model's rewrite is a valid ONNX model (memlane skips the check at load).
    shipped = rewrite(model, _shipped_maxima(_file_sha256(_default_model_path())) or {}, unsigned_weights=False)
    onnx.checker.check_model(onnx.load_from_string(shipped))
    model.doc_string = "re-saved by a memlane test"
    copy = tmp_path / "minilm-copy.onnx"
    onnx.save(model, str(copy))
    texts = ["I painted a sunrise last week.", "Wir fahren im August an die Ostsee."]
    # Equal up to float noise: on another CPU the calibration's float activations may
    # differ in their last bits from those the shipped maxima were made with.
    cosines = (MiniLMEmbedder(model_path=copy).embed(texts) * MiniLMEmbedder().embed(texts)).sum(axis=1)
    assert cosines.min() > 0.9999, cosines


def test_database_of_the_float32_variant_keeps_working(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with Memory(path, embedder="minilm-f32") as mem:
        mem.add("s1", "We adopted a beagle called Max who loves carrots.")
        mem.add("s1", "The quarterly report shows revenue up twelve percent.")
        mem.flush()
        assert mem.parts.recall.index.model_info().model_id == MINILM_F32_MODEL_ID

    # The default spec ("minilm") goes on with the variant that made the vectors ...
    with Memory(path) as mem:
        assert mem.parts.indexer.embedder.activations == "float32"
        mem.add("s1", "Max chewed through another pair of shoes.")
        mem.flush()
        assert "beagle" in mem.search("what kind of dog did they adopt")[0].message.content
    # ... `memlane reindex` moves it to the int8 default ...
    cli_main(["--store", str(path), "reindex"])
    with Memory(path) as mem:
        assert mem.parts.indexer.embedder.activations == "int8"
        assert mem.parts.recall.index.model_info().model_id == MINILM_MODEL_ID
        assert mem.parts.recall.index.count() == 3
    # ... after which asking for the old variant by name is the usual mismatch error.
    with pytest.raises(EmbedderMismatchError, match="memlane reindex"):
        Memory(path, embedder="minilm-f32")


def test_compare_variants_reports_cosine_and_speed() -> None:
    figures = compare_variants(calibration_texts()[:20], rounds=1)
    assert figures["texts"] == 20
    assert 0.99 <= figures["cosine_min"] <= figures["cosine_p01"] <= figures["cosine_mean"] <= 1.0
    assert figures["int8_texts_per_s"] > 0 and figures["float32_texts_per_s"] > 0


_LOAD_SCRIPT = """
import json, sys
from memlane.search.embedders import MiniLMEmbedder
vectors = MiniLMEmbedder().embed(["I painted a sunrise last week.", "Wir fahren im August an die Ostsee."])
print(json.dumps({"vectors": vectors.tolist(), "rewrote": "onnx" in sys.modules}))
"""


def _load_in_fresh_process(tmp_path: Path, cache_home: Path) -> tuple[np.ndarray, bool]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"),
           "HOME": str(tmp_path), "XDG_CACHE_HOME": str(cache_home)}
    proc = subprocess.run([sys.executable, "-c", _LOAD_SCRIPT], env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    return np.asarray(out["vectors"], dtype=np.float32), bool(out["rewrote"])


def test_the_rewritten_model_is_kept_for_the_next_process(tmp_path: Path) -> None:
    cache_home = tmp_path / "cache"
    stale = cache_home / "memlane" / "minilm-w8a8-from-an-older-memlane.onnx"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"an older rewrite")
    os.utime(stale, (0, 0))  # unused for decades: another version's copy
    first, rewrote = _load_in_fresh_process(tmp_path, cache_home)
    assert rewrote  # the first process rewrites the graph (which needs the onnx package) ...
    [cached] = (cache_home / "memlane").glob("minilm-w8a8-*.onnx")  # ... and drops older copies
    second, rewrote = _load_in_fresh_process(tmp_path, cache_home)
    assert not rewrote  # ... the next one opens the kept file and never imports onnx
    np.testing.assert_array_equal(second, first)
    # The word embeddings stay int8 (12 MB): folded to float32 they were 47 MB of the file.
    assert cached.stat().st_size < 30_000_000

    # A damaged copy (a disk error, a half-copied home directory) is made again, not an error.
    cached.write_bytes(b"not an onnx model")
    third, rewrote = _load_in_fresh_process(tmp_path, cache_home)
    assert rewrote
    np.testing.assert_array_equal(third, first)
    assert onnx.load(str(cached)).graph.node  # the file is whole again

    # Without a writable cache directory the model still loads, rewritten in memory.
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    fourth, rewrote = _load_in_fresh_process(tmp_path, blocker / "cache")
    assert rewrote
    np.testing.assert_array_equal(fourth, first)


def test_the_cache_name_follows_the_model_file(tmp_path: Path) -> None:
    # Another model file (or the same path rewritten) must not be served the old rewrite.
    copy = tmp_path / "model.onnx"
    shutil.copyfile(_default_model_path(), copy)
    first = w8a8_cache_name(copy)
    assert w8a8_cache_name(copy) == first
    assert w8a8_cache_name(_default_model_path()) != first
    os.utime(copy, ns=(1_000_000_000, 1_000_000_000))  # same bytes, another file version
    assert w8a8_cache_name(copy) != first
