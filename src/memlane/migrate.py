"""``memlane migrate``: re-exported from :mod:`memlane.store.migrate` (copying one store to
another is the stores' business: it reads and writes their tables)."""

from memlane.store.migrate import MigrationReport, migrate

__all__ = ["MigrationReport", "migrate"]
