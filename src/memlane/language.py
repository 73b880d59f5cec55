"""The language layer: one tokenizer, one stopword source, language id, stemming, sentences.

Everything that reads English or German text in memlane goes through here, so the
keyword index, keyphrases, topics, the state tracker and the reference resolver
agree on what a word is and which language a message is in:

* :func:`words` - the one word tokenizer (letters and digits, inner apostrophes and
  hyphens kept: "don't", "e-mail", "/var/log" -> "var", "log").
* :data:`STOPWORDS_EN`, :data:`STOPWORDS_DE`, :data:`STOPWORDS` - the one stopword source
  (defined in memlane.stopwords, re-exported here).
* :func:`detect_language` - ``py3langid`` (a maintained langid.py fork, 4 MB, ~0.5 ms a
  call) restricted to English and German; short or unclear text keeps the caller's default.
* :func:`stem` / :func:`stems` - Snowball (``snowballstemmer``, in C through ``PyStemmer``)
  for English and German.
* :func:`keyword_text` / :func:`keyword_stems` - what the keyword index stores for a message
  (each word's stem in the message's language, a German compound's parts beside it) and the stems a query word is looked up by
  (its stem in either language, so a message whose language was misjudged is still found);
  :func:`compound_text` - those parts alone, for PostgreSQL's ``parts`` column.
* :func:`sentences` - ``pysbd`` rule-based sentence splitting; code spans stay whole.

Deterministic and offline: the language-id model ships inside the ``py3langid`` wheel.
"""

from __future__ import annotations

import re
import threading
from array import array
from functools import lru_cache
from pathlib import Path
from typing import Any, Literal

from memlane.compounds import compound_parts
from memlane.stopwords import FILLER_DE, FILLER_EN, STOPWORDS, STOPWORDS_DE, STOPWORDS_EN

__all__ = [
    "FILLER_DE",
    "FILLER_EN",
    "LANGUAGES",
    "STOPWORDS",
    "STOPWORDS_DE",
    "STOPWORDS_EN",
    "Language",
    "compound_text",
    "content_stems",
    "content_words",
    "detect_language",
    "grouping_form",
    "index_parts",
    "is_stopword",
    "keyword_stems",
    "keyword_text",
    "language_scores",
    "sentences",
    "stem",
    "stems",
    "with_compound_parts",
    "words",
]

Language = Literal["en", "de"]
LANGUAGES: tuple[Language, ...] = ("en", "de")

#: A word: letters or digits, with inner apostrophes or hyphens ("don't", "e-mail").
_WORD_RE = re.compile(r"[^\W_]+(?:['’\-][^\W_]+)*", re.UNICODE)

# Words only one language uses: what decides a text too short for character n-grams.
_EN_ONLY = (STOPWORDS_EN | FILLER_EN) - (STOPWORDS_DE | FILLER_DE)
_DE_ONLY = (STOPWORDS_DE | FILLER_DE) - (STOPWORDS_EN | FILLER_EN)


def words(text: str) -> list[str]:
    """The words of ``text``, lower-cased (the one tokenizer; typographic apostrophes as ')."""
    return [w.lower().replace("’", "'") for w in _WORD_RE.findall(text)]


def surface_words(text: str) -> list[str]:
    """The words of ``text`` in their original case (German nouns keep their capital)."""
    return [w.replace("’", "'") for w in _WORD_RE.findall(text)]


def is_stopword(word: str) -> bool:
    return word.lower() in STOPWORDS


def content_words(text: str) -> list[str]:
    """Lower-cased words that are not stopwords nor single letters; all words if none remain."""
    found = words(text)
    kept = [w for w in found if w not in STOPWORDS and len(w) > 1]
    return kept or found


# ----------------------------------------------------------------- language id

_identifier: Any = None
_identifier_lock = threading.Lock()
#: Below this probability (of two languages, so 0.5 is a coin) a text of three or more
#: words keeps the default; "Docker Container stoppen" is German at 0.53.
MIN_CONFIDENCE = 0.52
#: The same for one or two words ("ok, los" is "English" at 0.70): only a sure call counts.
MIN_CONFIDENCE_SHORT = 0.95
_DE_LETTERS = re.compile(r"[äöüß]", re.IGNORECASE)


def _langid() -> Any:
    global _identifier
    if _identifier is None:
        with _identifier_lock:
            if _identifier is None:
                _identifier = _load_identifier()
    return _identifier


def _cache_dir() -> Path:
    # The package's own __version__, not importlib.metadata: importing that (email parsing
    # and all) and scanning the installed distributions cost a first search ~30 ms.
    import py3langid

    from memlane.user_cache import user_cache_dir

    version = getattr(py3langid, "__version__", None)
    if not isinstance(version, str):  # a release without it
        from importlib.metadata import version as installed

        version = installed("py3langid")
    return user_cache_dir() / f"py3langid-{version}-{'-'.join(LANGUAGES)}"


def _load_identifier() -> Any:
    """py3langid restricted to our languages, the same numbers it computes from its model.

    Its model ships xz-compressed (every process would spend about half a second and 70 MB
    inflating it, on the write path: messages are stored with their language). So the first
    process keeps the parts our two languages use, uncompressed, in the user's cache
    directory, and every later one maps them (pages are read as texts need them). Without
    a writable cache it loads the model as py3langid does.
    """
    from py3langid.langid import LanguageIdentifier

    try:
        return _identifier_from_cache(_cache_dir(), LanguageIdentifier)
    except (OSError, ValueError, KeyError):
        pass
    from py3langid.langid import MODEL_FILE

    ident = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    ident.set_languages(list(LANGUAGES))
    return ident


def _identifier_from_cache(cache: Path, identifier_class: Any) -> Any:
    import json

    import numpy as np
    from py3langid.modelio import _to_array

    if not (cache / "classes.json").exists():
        _fill_cache(cache)
    classes = json.loads((cache / "classes.json").read_text(encoding="utf-8"))
    nextmove = np.load(cache / "nextmove.npy", mmap_mode="r")  # 40 MB; texts touch parts of it
    row = np.load(cache / "row.npy")
    # The feature of each of the 104,583 states in an int32 array (0.4 MB), not a list of
    # Python ints (.tolist(): 4.4 MB resident in every process that judges a language);
    # the walk reads it by index either way, the same numbers.
    ident = identifier_class(
        np.load(cache / "ptc.npy"), np.load(cache / "pc.npy"), classes, nextmove,
        array("i", np.load(cache / "out.npy").astype(np.int32).tobytes()), norm_probs=True,
        tk_row=_to_array(row),
    )
    rowbase = getattr(ident, "_rowbase", None)
    if isinstance(rowbase, list) and len(rowbase) == len(row):
        # Likewise its row offsets (state's row << 8), a list of ints py3langid makes in
        # __init__ (3.7 MB): the same numbers as a uint32 array.
        ident._rowbase = array("I", (row.astype(np.uint32) << 8).tobytes())
    ident.set_languages(list(LANGUAGES))
    return ident


def _fill_cache(cache: Path) -> None:
    import json
    import shutil
    import tempfile

    import numpy as np
    from py3langid.langid import MODEL_DIR, MODEL_FILE
    from py3langid.modelio import load_model

    ptc, pc, classes, nextmove, row, out = load_model(MODEL_DIR / MODEL_FILE)
    keep = [i for i, c in enumerate(classes) if c in LANGUAGES]  # as set_languages picks them
    cache.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-", dir=cache.parent))
    try:
        np.save(tmp / "ptc.npy", np.ascontiguousarray(np.asarray(ptc)[:, keep]))
        np.save(tmp / "pc.npy", np.asarray(pc)[keep])
        np.save(tmp / "nextmove.npy", np.frombuffer(nextmove, dtype=np.dtype(f"u{nextmove.itemsize}")))
        np.save(tmp / "row.npy", np.frombuffer(row, dtype=np.dtype(f"u{row.itemsize}")))
        np.save(tmp / "out.npy", np.asarray(out))
        (tmp / "classes.json").write_text(json.dumps([classes[i] for i in keep]), encoding="utf-8")
        try:
            tmp.rename(cache)  # atomic: a process that loses the race keeps the winner's copy
        except OSError:
            if not (cache / "classes.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@lru_cache(maxsize=8192)
def language_scores(text: str) -> tuple[Language, float]:
    """The likelier of English and German for ``text`` and its probability (0.5-1.0)."""
    label, prob = _langid().classify(text)
    return ("de" if label == "de" else "en"), float(prob)


def detect_language(text: str, default: Language = "en") -> Language:
    """``"de"`` or ``"en"``; ``default`` when ``text`` says too little to tell.

    Short replies ("ok", "2", "`ls -la`") carry no language, so the caller passes what
    the conversation used so far as ``default``. German letters (ä ö ü ß) settle a close call.
    """
    found = words(text)  # once: a message may be megabytes
    if all(w.isdigit() for w in found):
        return default
    label, prob = language_scores(text.strip()[:2000])
    # Two words ("ok, los") are thin evidence for character n-grams: the conversation's
    # language stands unless the model is sure.
    if prob >= (MIN_CONFIDENCE if len(found) > 2 else MIN_CONFIDENCE_SHORT):
        return label
    # Too short for character n-grams ("it", "yes"): function words of one language decide.
    en = sum(1 for w in found if w in _EN_ONLY)
    de = sum(1 for w in found if w in _DE_ONLY)
    if _DE_LETTERS.search(text):
        de += 1
    if en != de:
        return "en" if en > de else "de"
    return default


# ----------------------------------------------------------------- stemming

# A stemmer object keeps per-call buffers (and PyStemmer a cache) and is not thread-safe:
# search threads, the indexer and SQLite's memlane_stems() callback each get their own.
_stemmers = threading.local()
_ALGORITHM = {"en": "english", "de": "german"}


def _stemmer(language: Language) -> Any:
    mine: dict[str, Any] | None = getattr(_stemmers, "by_language", None)
    if mine is None:
        mine = _stemmers.by_language = {}
    stemmer = mine.get(language)
    if stemmer is None:
        import snowballstemmer  # PyStemmer's C stemmers when installed (a dependency), else pure Python

        stemmer = mine[language] = snowballstemmer.stemmer(_ALGORITHM[language])
    return stemmer


@lru_cache(maxsize=65536)
def stem(word: str, language: Language = "en") -> str:
    """The Snowball stem of a lower-cased ``word`` ("Datenbanken" -> "datenbank")."""
    return str(_stemmer(language).stemWord(word.lower()))


def grouping_form(word: str, language: Language = "en") -> str:
    """The form keyphrases, summaries' terms and note slots group a word by: lower-cased, a
    possessive dropped, its Snowball stem in ``language`` ("Datenbanken" -> "datenbank",
    "Caroline's" -> "carolin")."""
    w = word.lower().replace("’", "'")
    if w.endswith("'s"):
        w = w[:-2]
    return stem(w, language)


def stems(text: str, language: Language | None = None, *, drop_stopwords: bool = True) -> list[str]:
    """Stems of the words of ``text`` (its own language when ``language`` is None)."""
    lng = language or detect_language(text)
    return [stem(w, lng) for w in words(text)
            if not (drop_stopwords and (w in STOPWORDS or len(w) < 2))]


def content_stems(text: str, language: Language | None = None) -> set[str]:
    """What ``text`` is about, for comparing two texts: the Snowball stems of its content
    words (not function words nor chat filler; hyphenated words with their parts) in its language, and for German the stems of its compounds' parts, so
    "Sicherungen der Datenbanken" and "Datenbanksicherung" share "sicher" and "datenbank"
    as "backups of the databases" and "database backup" share "backup" and "databas"."""
    lng = language or detect_language(text)
    found = [part for w in words(text) if w not in _NO_TOPIC and len(w) > 2 and not w.isdigit()
             for part in dict.fromkeys((w, *w.split("-"))) if len(part) > 2]
    if lng == "de":
        found = with_compound_parts(found)
    return {stem(w, lng) for w in found}


# Function words and chat filler ("machen", "heute", "really") name nothing a text is about.
_NO_TOPIC = STOPWORDS | FILLER_EN | FILLER_DE


def keyword_text(text: str, language: str | None) -> str:
    """``text`` as the keyword index stores it: every word (function words too, so document
    lengths stay those of the text) as its Snowball stem in ``language`` ("de"; anything
    else stems as English). German stems fold umlauts and ß ("Größe" -> "gross")."""
    lng: Language = "de" if language == "de" else "en"
    # FTS5 cuts "self-care" and "caroline's" at the hyphen and the apostrophe; stemming the
    # parts (not the whole, whose last part alone would lose its ending) keeps every index
    # term equal to the stem a query word gets.
    tokens = index_parts(text)
    if lng == "de":
        tokens = with_compound_parts(tokens)
    return " ".join(_stemmer(lng).stemWords(tokens))


def with_compound_parts(tokens: list[str]) -> list[str]:
    """``tokens`` with each German compound followed by its parts ("datenbanksicherung",
    "datenbank", "sicherung"): a question that names the parts ("Sicherung der Datenbank")
    then finds the message that wrote the compound. The compound itself stays, so a query
    for the whole word still matches it, and the document length grows only by the parts."""
    out: list[str] = []
    for token in tokens:
        out.append(token)
        out.extend(compound_parts(token))
    return out


def compound_text(text: str, language: str | None) -> str:
    """The parts of the German compounds of ``text``, space-separated ("" unless
    ``language`` is "de"): what :func:`with_compound_parts` adds to the SQLite keyword row,
    for a store that keeps it in a column of its own (PostgreSQL generates its tsvector
    from the row: ``to_tsvector(text || ' ' || parts)`` stems them as keyword_text does)."""
    if language != "de":
        return ""
    return " ".join(part for token in index_parts(text) for part in compound_parts(token))


#: What FTS5's unicode61 tokenizer calls a token: a run of letters and digits.
_INDEX_PART_RE = re.compile(r"[^\W_]+", re.UNICODE)


def index_parts(text: str) -> list[str]:
    """The lower-cased tokens FTS5 sees in ``text`` ("Caroline's" -> "caroline", "s")."""
    return _INDEX_PART_RE.findall(text.lower())


def keyword_stems(word: str) -> tuple[str, ...]:
    """The index terms a query word is looked up by: its stem in each language, deduplicated.

    A message is stemmed in its own language, which short or mixed messages may be judged
    wrongly; the query asks for both stems, and the other language's stem of a word
    rarely equals a different word's stem ("sisters": "sister", "sist")."""
    # "caroline's" is a phrase of two index terms, "carolin s": the possessive itself, as
    # the user typed it (a bare "carolin" also matches every turn that greets Caroline).
    return tuple(dict.fromkeys(" ".join(stem(p, lng) for p in index_parts(word)) for lng in LANGUAGES))


# ----------------------------------------------------------------- sentences

_CODE_SPAN = re.compile(r"`[^`]*`")
# Only text with end punctuation before more text can hold two sentences; the rest skips pysbd.
_MAYBE_BREAK = re.compile(r"[.!?…][\"')\]]*\s+\S")
_segmenters: dict[str, Any] = {}


def _segmenter(language: Language) -> Any:
    seg = _segmenters.get(language)
    if seg is None:
        import pysbd

        seg = pysbd.Segmenter(language=language, clean=False, char_span=False)
        _segmenters[language] = seg
    return seg


def _segment(text: str, language: Language) -> list[str]:
    """``pysbd.Segmenter.segment(text)`` (clean=False: each sentence as it stands in
    ``text``, with its trailing whitespace), finding the sentences with ``str.find``.

    pysbd finds each sentence again with a regex made from that sentence's own text: a
    compile per sentence (half of segment()'s time on chat turns) that also pushes pysbd's
    own patterns out of ``re``'s cache. And segment() keeps the text on the shared
    Segmenter, which the state tracker and the summaries use from different threads at
    once. Same sentences as segment(), checked on LoCoMo's turns in English and German.
    """
    found: list[str] = []
    prior_end = 0
    for sent in _segmenter(language).processor(text).process():
        start = 0
        while (at := text.find(sent, start)) >= 0:
            end = at + len(sent)
            while end < len(text) and text[end].isspace():  # pysbd's r"\s*" after the sentence
                end += 1
            if end > prior_end:  # the first occurrence past the previous sentence
                found.append(text[at:end])
                prior_end = end
                break
            start = end if end > at else at + 1
    return found


@lru_cache(maxsize=4096)
def _sentences(text: str, language: Language) -> tuple[str, ...]:
    spans: list[str] = []

    def hide(m: re.Match[str]) -> str:
        spans.append(m.group(0))
        return f"\x00{len(spans) - 1}\x00"

    masked = _CODE_SPAN.sub(hide, text)
    out: list[str] = []
    for block in masked.split("\n"):  # a line break always ends a sentence (lists, commands)
        if not block.strip():
            continue
        parts = _segment(block, language) if _MAYBE_BREAK.search(block) else [block]
        for part in parts:
            part = re.sub(r"\x00(\d+)\x00", lambda m: spans[int(m.group(1))], part).strip()
            if part:
                out.append(part)
    return tuple(out)


def sentences(text: str, language: Language | None = None) -> list[str]:
    """The sentences of ``text``, trimmed, by ``pysbd`` ("z.B.", "Dr.", "1.5", "a.txt" do
    not end one); a line break ends one, and `code spans` are never split."""
    if not text.strip():
        return []
    return list(_sentences(text, language or detect_language(text)))
