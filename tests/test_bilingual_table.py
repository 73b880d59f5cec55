"""The lexicon's lookup table: bisection over sorted lines, built once and kept in the user's
cache directory (a fresh process reads it instead of building dictionaries of the lexicon)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane import bilingual
from memlane.bilingual import _build_table, _Table, translations


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    bilingual.lexicon.cache_clear()
    yield tmp_path / "memlane"
    bilingual.lexicon.cache_clear()


def test_bisection_finds_every_key_and_nothing_else() -> None:
    keys = ["a", "kaffee", "kaffeebohne", "kaffeel", "müde", "zz"]  # prefixes of each other, non-ASCII
    lines = sorted(f"w\tde\t{k}\tt-{k}\tu-{k}\n".encode() for k in keys)
    table = _Table(b"".join(lines))
    for k in keys:
        assert table.get("w", "de", k) == (f"t-{k}", f"u-{k}")
    for missing in ["", "0", "kaff", "kaffeeb", "kaffeebohnen", "m", "zzz", "\uffff"]:
        assert table.get("w", "de", missing) == ()
    assert table.get("s", "de", "kaffee") == () and table.get("w", "en", "kaffee") == ()
    assert _Table(b"").get("w", "de", "kaffee") == ()


def test_the_table_keeps_the_best_translations_of_each_word_and_stem() -> None:
    text = "# header\nhund\tdog\t0.9\thund\tdog\nhund\thound\t0.7\thund\thound\nhund\tpuppy\t0.8\thund\tpuppi\n"
    table = _Table(_build_table(text))
    assert table.get("w", "de", "hund") == ("dog", "puppy")  # two per word, best first
    assert table.get("w", "en", "hound") == ("hund",)
    assert table.get("s", "en", "puppi") == ("hund",)


def test_the_table_is_built_once_and_read_by_later_processes(
    cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = cache_home / "lexicon-de-en-from-an-older-lexicon.tsv"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"w\tde\tschwester\tbrother\n")
    assert translations("Schwester", "de")[0] == "sister"
    [kept] = cache_home.glob("lexicon-de-en-*.tsv")  # the older table is gone
    bilingual.lexicon.cache_clear()  # as a fresh process would start

    def no_build(text: str) -> bytes:
        raise AssertionError("the kept table should have been read, not built again")

    monkeypatch.setattr(bilingual, "_build_table", no_build)
    assert "sister" in translations("Schwester", "de")
    assert "eltern" in translations("parents", "en")
    assert kept.is_file()


def test_without_a_writable_cache_the_table_is_built_in_memory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    bilingual.lexicon.cache_clear()
    try:
        assert "coffee" in translations("Kaffee", "de")
    finally:
        bilingual.lexicon.cache_clear()
