"""German compound splitting: "Stromrechnung" -> "strom", "rechnung".

German writes compounds as one word, so a query for "Stromrechnung" misses a memory about
"die Rechnungen für den Strom" in a keyword index. A word is split where its parts are, on
the geometric mean, more frequent than the whole word (Koehn & Knight 2003, "Empirical
Methods for Compound Splitting"), with the linking elements German puts between parts
("Lieblings|farbe", "Arbeit|s|platz"). The frequencies are wordfreq's, shipped as
``data/words_de.txt`` (built once by ``tools/build_words_de.py``), so nothing is
downloaded and a split never depends on what a store holds.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources

from memlane.stopwords import STOPWORDS

__all__ = ["WORDS_DE", "compound_parts", "zipf_de"]

WORDS_DE = "words_de.txt"
#: Shorter words are rarely compounds, and their splits are mostly accidents ("Bei|spiel" is fine, "Ab|end" is not).
MIN_COMPOUND = 8
#: Shortest modifier: "Log|dateien", "Eis|becher".
MIN_PART = 3
#: Shortest head: three-letter heads are mostly inflection endings ("Druck|ern").
MIN_HEAD = 4
#: What German puts between a modifier and the head ("Arbeit-s-platz", "Sonne-n-schein", "Hund-e-hütte").
LINKS = ("", "s", "es", "n", "en", "e", "er")


@lru_cache(maxsize=1)
def _frequencies() -> dict[str, float]:
    text = resources.files("memlane").joinpath("data", WORDS_DE).read_text("utf-8")
    # The first German message a process stores splits its compounds (the keyword index
    # holds their parts): one split() and zip() over the file, not a loop per line, keeps
    # that first write from paying for 98,000 Python-level line splits.
    body = text.split("\n", 1)[1] if text.startswith("#") else text  # one header line
    fields = iter(body.split())  # word, zipf, word, zipf, ...
    return dict(zip(fields, map(float, fields), strict=False))


def zipf_de(word: str) -> float:
    """The Zipf frequency of a lower-cased German word (0.0 when it is not among the shipped words)."""
    return _frequencies().get(word, 0.0)


def _modifier(text: str) -> tuple[str, float] | None:
    """``text`` as a known modifier, with its linking element dropped when that makes it one."""
    for link in LINKS:
        if link and not text.endswith(link):
            continue
        stem = text[: len(text) - len(link)] if link else text
        z = zipf_de(stem)
        if len(stem) >= MIN_PART and z > 0 and stem not in STOPWORDS:
            return stem, z  # the text as written first: "Drucker|düsen", not "Druck|er|düsen"
    return None


@lru_cache(maxsize=16384)
def compound_parts(word: str) -> tuple[str, ...]:
    """The parts of a German compound (lower-cased), or () when ``word`` is not one.

    The best binary split is kept when its parts' mean Zipf frequency beats the whole
    word's. Parts are never function words ("Bei|spiel" stays whole)."""
    w = word.lower()
    if len(w) < MIN_COMPOUND or not w.isalpha():
        return ()
    best: tuple[float, str, str] | None = None
    for i in range(MIN_PART, len(w) - MIN_HEAD + 1):
        head = w[i:]
        z_head = zipf_de(head)
        if z_head == 0 or head in STOPWORDS:
            continue
        mod = _modifier(w[:i])
        if mod is None:
            continue
        score = (mod[1] + z_head) / 2  # Zipf is a logarithm: the mean is the geometric mean's
        if best is None or score > best[0]:
            best = (score, mod[0], head)
    if best is None or best[0] <= zipf_de(w):
        return ()
    return best[1], best[2]
