"""``memlane backup`` / ``restore``: re-exported from :mod:`memlane.store.sqlite_backup`."""

from memlane.store.sqlite_backup import BackupReport, backup_database, check_database, restore_database

__all__ = ["BackupReport", "backup_database", "check_database", "restore_database"]
