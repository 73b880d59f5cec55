"""The lexicon's lookup table: bisection over sorted lines, built once and kept in the user's
cache directory (a fresh process reads it instead of building dictionaries of the lexicon)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from memlane import bilingual
from memlane.bilingual import _rows, translations
from memlane.sorted_table import SortedTable


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    bilingual.lexicon.cache_clear()
    yield tmp_path / "memlane"
    bilingual.lexicon.cache_clear()


def test_bisection_finds_every_key_and_nothing_else() -> None:
    keys = ["a", "kaffee", "kaffeebohne", "kaffeel", "müde", "zz"]  # prefixes of each other, non-ASCII
    table = SortedTable.build((k, f"t-{k}\tu-{k}") for k in reversed(keys))
    for k in keys:
        assert table.get(k) == f"t-{k}\tu-{k}"
    for missing in ["", "0", "kaff", "kaffeeb", "kaffeebohnen", "m", "zzz", "\uffff"]:
        assert table.get(missing) is None
    assert SortedTable(b"").get("kaffee") is None


def test_the_lexicon_keeps_the_best_translations_of_each_word_and_stem() -> None:
    text = "# header\nhund\tdog\t0.9\thund\tdog\nhund\thound\t0.7\thund\thound\nhund\tpuppy\t0.8\thund\tpuppi\n"
    table = SortedTable.build(_rows(text))
    assert table.get("w\tde\thund") == "dog\tpuppy"  # two per word, best first
    assert table.get("w\ten\thound") == "hund"
    assert table.get("s\ten\tpuppi") == "hund"
    assert table.get("s\tde\tpuppi") is None


def test_the_table_is_built_once_and_read_by_later_processes(
    cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stale = cache_home / "lexicon-de-en-from-an-older-lexicon.tsv"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"w\tde\tschwester\tbrother\n")
    os.utime(stale, (0, 0))  # unused for decades: another version's copy
    in_use = cache_home / "lexicon-de-en-of-another-installation.tsv"
    in_use.write_bytes(b"w\tde\tschwester\tsister\n")  # used just now
    assert translations("Schwester", "de")[0] == "sister"
    assert not stale.exists() and in_use.exists()  # the unused table is gone, the one in use stays
    [kept] = [p for p in cache_home.glob("lexicon-de-en-*.tsv") if p != in_use]
    bilingual.lexicon.cache_clear()  # as a fresh process would start

    def no_build(text: str) -> list[tuple[str, str]]:
        raise AssertionError("the kept table should have been read, not built again")

    monkeypatch.setattr(bilingual, "_rows", no_build)
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
