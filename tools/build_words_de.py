"""Build the German word frequencies compound splitting uses (src/memlane/data/words_de.txt).

Offline, once, by a maintainer. The words are ``wordfreq``'s most frequent German words
(letters only, at least three), each with its Zipf frequency; memlane.compounds splits a
compound where its parts are, on the geometric mean, more frequent than the whole word
(Koehn & Knight 2003, "Empirical Methods for Compound Splitting").

    pip install wordfreq
    python tools/build_words_de.py --words 100000

Measured with ``memlane eval recall`` (German, keyword index).
"""

from __future__ import annotations

import argparse
from pathlib import Path


def main() -> None:
    from wordfreq import top_n_list, zipf_frequency

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--words", type=int, default=100_000)
    ap.add_argument("--out", type=Path, default=Path("src/memlane/data/words_de.txt"))
    args = ap.parse_args()
    rows = [(w, zipf_frequency(w, "de")) for w in top_n_list("de", args.words) if w.isalpha() and len(w) >= 3]
    # Sorted as memlane.sorted_table searches it (by "word\t" as UTF-8 bytes): a process
    # looks its first words up in place instead of building a dictionary of all of them.
    rows.sort(key=lambda row: (row[0] + "\t").encode())
    with args.out.open("w", encoding="utf-8") as out:
        out.write(f"# {len(rows)} most frequent German words of wordfreq with Zipf frequency, sorted by word "
                  "(UTF-8 bytes) for memlane.sorted_table. tools/build_words_de.py\n")
        for w, z in rows:
            out.write(f"{w}\t{z:.2f}\n")


if __name__ == "__main__":
    main()
