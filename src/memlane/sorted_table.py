"""A lookup table kept as sorted text lines, searched by bisection in place.

Shipped word lists (the German-English lexicon, German word frequencies) are asked about a
few words per query or message, but building a dictionary of all of them cost a fresh
process tens to hundreds of milliseconds. Sorted once and kept in the user's cache
directory, they are read as one bytes object and each lookup is ~20 comparisons.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable

from memlane.user_cache import keep, prune, touch, user_cache_dir

__all__ = ["SortedTable", "cached_table"]


class SortedTable:
    """Lines ``key \\t value`` sorted by ``key + "\\t"`` as UTF-8 bytes; keys hold no tab or newline."""

    def __init__(self, data: bytes) -> None:
        self._data = data

    @classmethod
    def build(cls, rows: Iterable[tuple[str, str]]) -> SortedTable:
        lines = sorted((f"{key}\t".encode(), value.encode()) for key, value in rows)
        return cls(b"".join(key + value + b"\n" for key, value in lines))

    @property
    def data(self) -> bytes:
        return self._data

    def get(self, key: str) -> str | None:
        target = f"{key}\t".encode()
        data = self._data
        lo, hi = 0, len(data)
        # Invariant: every line starting before lo sorts below target, every line starting
        # at or after hi sorts at or above it ("\t" ends each key and sorts below any
        # character of a word, so a key sorts before the keys it is a prefix of).
        while lo < hi:
            mid = (lo + hi) // 2
            start = data.rfind(b"\n", lo, mid)
            start = lo if start < 0 else start + 1
            end = data.find(b"\n", start)
            if data[start : start + len(target)] < target:
                lo = end + 1
            else:
                hi = start
        if data[lo : lo + len(target)] != target:
            return None
        return data[lo + len(target) : data.find(b"\n", lo)].decode("utf-8")


def cached_table(name: str, source: bytes, salt: str, rows: Callable[[], Iterable[tuple[str, str]]]) -> SortedTable:
    """The table ``rows()`` makes from ``source``, kept as ``<name>-<hash>.tsv`` in the user's
    cache directory; ``salt`` names whatever else the rows depend on (code versions, word
    lists). Without a writable cache it is built in memory each time."""
    digest = hashlib.sha256(source)
    digest.update(salt.encode())
    path = user_cache_dir() / f"{name}-{digest.hexdigest()[:24]}.tsv"
    try:
        table = SortedTable(path.read_bytes())
    except OSError:
        pass
    else:
        touch(path)
        return table
    table = SortedTable.build(rows())
    if keep(path, table.data):
        prune(path, f"{name}-*.tsv")
    return table
