"""Where a SQLite database's vector index files live: named apart from the index and its
files' module so that checking for them imports neither (numpy stays unloaded)."""

from __future__ import annotations


def files_dir(db_path: str) -> str:
    """The directory of the vector index files of the SQLite database at ``db_path``."""
    return db_path + "-vectors"
