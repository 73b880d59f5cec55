"""``python -m memlane.cli.minilm_w8a8``: regenerate or check the shipped smoothing maxima of
the int8-activation MiniLM, or compare it with the float32 variant (``--compare``).

The rewrite itself is library code (:mod:`memlane.search.minilm_w8a8`); this is the tool
around it, kept out of the library so the embedder and the rewrite do not import each
other.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from memlane.search.embedders import (
    MINILM_MAX_TOKENS,
    MiniLMEmbedder,
    _default_model_path,
    _default_tokenizer_path,
    minilm_tokenizer,
)
from memlane.search.minilm_w8a8 import (
    _SHA_KEY,
    FloatArray,
    _data_path,
    _file_sha256,
    _onnx,
    _shipped_maxima,
    calibrate,
    calibration_texts,
)

__all__ = ["compare_variants", "main"]


def compare_variants(texts: Sequence[str], rounds: int = 2) -> dict[str, float]:
    """Cosine of int8- to float32-activation vectors over ``texts``, and each one's texts/s."""
    variants = {"int8": MiniLMEmbedder(), "float32": MiniLMEmbedder(activations="float32")}
    vectors: dict[str, FloatArray] = {}
    rates: dict[str, float] = {}
    for embedder in variants.values():
        embedder.embed(["warm up"])  # model load is not throughput
    for _ in range(rounds):  # interleaved, best of rounds: the machine's load hits both alike
        for name, embedder in variants.items():
            start = time.perf_counter()
            vectors[name] = embedder.embed(list(texts))
            rates[name] = max(rates.get(name, 0.0), len(texts) / (time.perf_counter() - start))
    cosines = (vectors["int8"] * vectors["float32"]).sum(axis=1)
    return {
        "texts": float(len(texts)),
        "cosine_mean": round(float(cosines.mean()), 5),
        "cosine_p01": round(float(np.percentile(cosines, 1)), 5),
        "cosine_min": round(float(cosines.min()), 5),
        "int8_texts_per_s": round(rates["int8"], 1),
        "float32_texts_per_s": round(rates["float32"], 1),
        "speedup": round(rates["int8"] / rates["float32"], 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Regenerate the shipped smoothing maxima for the packaged model (``--check`` compares
    them, ``--compare`` measures the int8 variant against the float32 one)."""
    import argparse
    import json

    parser = argparse.ArgumentParser(prog="python -m memlane.cli.minilm_w8a8", description=main.__doc__)
    parser.add_argument("--check", action="store_true", help="compare with the shipped file instead of writing it")
    parser.add_argument(
        "--compare", nargs="*", metavar="LOCOMO_JSON",
        help="print cosine and speed of int8 vs float32 activations on LoCoMo turns "
        "(default: the LoCoMo files memlane finds) and exit",
    )
    args = parser.parse_args(argv)
    if args.compare is not None:
        from memlane.eval.locomo_data import load_locomo, locomo_files

        files = args.compare or locomo_files()
        if not files:
            parser.error("no LoCoMo files given or found; pass their paths after --compare")
        turns = [t.as_text() for f in files for conv in load_locomo(f) for _s, t in conv.iter_turns()]
        print(json.dumps(compare_variants(turns), indent=2))
        return 0
    tokenizer = minilm_tokenizer(_default_tokenizer_path(), MINILM_MAX_TOKENS)
    model_path = _default_model_path()
    maxima = calibrate(_onnx().load(str(model_path)), tokenizer, calibration_texts())
    sha = _file_sha256(model_path)
    target = _data_path("minilm-w8a8-smoothing.npz")
    if args.check:
        shipped = _shipped_maxima(sha)
        same = shipped is not None and shipped.keys() == maxima.keys() and all(
            np.allclose(shipped[k], maxima[k], rtol=1e-4, atol=1e-5) for k in maxima
        )
        print("shipped smoothing maxima match" if same else f"{target} is stale; rerun without --check")
        return 0 if same else 1
    arrays: dict[str, Any] = {_SHA_KEY: np.array(sha), **maxima}
    np.savez(target, **arrays)
    print(f"wrote {target} ({len(maxima)} activations, model sha256 {sha[:12]})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
