"""The language layer (memlane.language): language id, tokenizer, stems, sentences."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlane.language import STOPWORDS, content_words, detect_language, sentences, stem, stems, words

# Issue 17: the function-word counter labelled three of these English.
GERMAN_SHELL_REQUESTS = [
    "Kubernetes Pod neu starten", "Festplatte voll, Speicherplatz freigeben", "Logdateien anzeigen",
    "Apache neu starten", "Benutzer anlegen", "Docker Container stoppen", "nginx Konfiguration prüfen",
    "Netzwerk neu starten",
]
ENGLISH_SHELL_REQUESTS = [
    "restart the kubernetes pod", "disk full, free space", "show log files", "create user",
    "stop docker container", "check nginx config", "restart the network",
]


@pytest.mark.parametrize("text", GERMAN_SHELL_REQUESTS)
def test_short_german_requests_are_german(text: str) -> None:
    assert detect_language(text) == "de"


@pytest.mark.parametrize("text", ENGLISH_SHELL_REQUESTS)
def test_short_english_requests_are_english(text: str) -> None:
    assert detect_language(text, default="de") == "en"


def test_text_without_language_keeps_the_conversations() -> None:
    for text in ("2", "`ls -la`", "ok", "!!"):
        assert detect_language(text, default="de") == "de"
        assert detect_language(text, default="en") == "en"
    assert detect_language("it", default="de") == "en"  # a function word of one language decides
    # Two words the model is unsure about ("restart apache" 0.59, "ok, los" 0.70) follow the conversation.
    assert detect_language("ok, los", default="de") == "de"


def test_one_tokenizer() -> None:
    assert words("Don’t delete /var/log/syslog, e-mail Max!") == ["don't", "delete", "var", "log", "syslog", "e-mail", "max"]
    assert "the" in STOPWORDS and "und" in STOPWORDS and "mein" in STOPWORDS
    assert content_words("the server and the backup") == ["server", "backup"]


def test_snowball_stems_in_both_languages() -> None:
    assert stem("Datenbanken", "de") == stem("Datenbank", "de")
    assert stem("Häuser", "de") == "haus"
    assert stem("running", "en") == stem("runs", "en") == "run"
    assert stems("Die Datenbanken sichern") == ["datenbank", "sich"]


def test_stemming_from_many_threads_matches_one_thread() -> None:
    """Stemmer objects are not thread-safe (the pure-Python one raised IndexError under
    concurrent keyword searches): every thread stems with its own and gets the same stems."""
    from concurrent.futures import ThreadPoolExecutor

    from memlane import language

    vocabulary = [f"{base}{ending}" for base in ("datenbank", "connect", "häus", "laufen", "walk", "sicher")
                  for ending in ("", "en", "ing", "ed", "ungen", "er", "s", "lich")]
    expected = {(w, lng): language.stem.__wrapped__(w, lng) for w in vocabulary for lng in ("en", "de")}

    def stem_all(_: int) -> tuple[int, dict[tuple[str, str], str]]:
        got = {(w, lng): language.stem.__wrapped__(w, lng) for _ in range(20) for w in vocabulary for lng in ("en", "de")}
        return id(language._stemmer("de")), got

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(stem_all, range(8)))
    assert all(got == expected for _, got in results)
    # each worker thread stemmed with a stemmer of its own, not the main thread's
    assert id(language._stemmer("de")) not in {owner for owner, _ in results}


def test_sentences_by_pysbd_keep_abbreviations_files_and_code() -> None:
    text = "Führe `sudo apt update` aus, z.B. mit sudo. Datei a.txt ist 1.5 MB groß. Fertig!"
    assert sentences(text, "de") == [
        "Führe `sudo apt update` aus, z.B. mit sudo.", "Datei a.txt ist 1.5 MB groß.", "Fertig!"
    ]
    assert sentences("Dr. Smith said so.\n1. Restart\n2. Reboot") == ["Dr. Smith said so.", "1. Restart", "2. Reboot"]
    assert sentences("   ") == []


SEGMENTER_CASES = [
    "Dr. Smith went to Washington. He said: \"hi!\" Then left...  Ok?  ",
    "z.B. das ist 1.5 Mal so gut. Wirklich!  Ja. Nein.",
    "Hello.Hello. Hello.   Hello.",  # the same sentence again: each found past the previous one
    "a. a. a. a.",
    "I went to the U.S. last year. It was great!\tReally great. (Yes.) \"Sure.\" Fine",
    "Wait... what? No! Mr. and Mrs. Doe arrived at 5 p.m. sharp. Then 3.14 pies.",
]


@pytest.mark.parametrize("lang", ["en", "de"])
def test_sentences_are_pysbd_segment_s_own(lang: str) -> None:
    """memlane finds pysbd's sentences in the text without pysbd's per-sentence regex
    (language._segment): the same sentences, whitespace and all, as Segmenter.segment."""
    import pysbd

    from memlane import language

    reference = pysbd.Segmenter(language=lang, clean=False, char_span=False)
    for text in SEGMENTER_CASES:
        assert language._segment(text, lang) == reference.segment(text), text


def test_sentences_from_many_threads_at_once() -> None:
    """The segmenter is shared by the state tracker's and the summaries' threads; pysbd's
    segment() kept the text being split on it, so two threads could swap texts."""
    import sys
    from concurrent.futures import ThreadPoolExecutor

    from memlane import language

    texts = [f"Sentence {i} is here. Another {i} follows! And a third {i}?" for i in range(400)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often: pysbd's segment() got ~1 in 10 wrong so
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            got = list(pool.map(lambda t: language._segment(t, "en"), texts))
    finally:
        sys.setswitchinterval(interval)
    assert got == [[f"Sentence {i} is here. ", f"Another {i} follows! ", f"And a third {i}?"] for i in range(400)]


def test_the_cached_language_model_gives_py3langid_s_own_numbers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The English/German part of py3langid's model kept uncompressed in the cache directory
    (so a write does not inflate the whole model) scores every text exactly as py3langid does."""
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    from memlane import language

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    filled = language._load_identifier()  # first use: fills the cache
    cache = language._cache_dir()
    assert str(cache).startswith(str(tmp_path)) and (cache / "nextmove.npy").exists()
    cached = language._load_identifier()  # later processes: maps it
    reference = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    reference.set_languages(list(language.LANGUAGES))
    texts = [
        "When does the train to Sintra leave?", "Docker Container stoppen", "ok, los", "yes", "12345",
        "Ich schicke dir morgen die Unterlagen", "Schönen Tag noch! See you", "self-care matters",
        "Kannst du mir mit dem Server helfen?", "mach das nochmal", "ÄÖÜ", "",
    ]
    for text in texts:
        assert filled.classify(text) == cached.classify(text) == reference.classify(text), text
