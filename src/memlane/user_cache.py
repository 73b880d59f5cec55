"""Where memlane keeps files it derives from installed packages (a model in a faster shape).

Everything there can be rebuilt from the packages, so a missing or unwritable directory
only costs start-up time, never data.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/memlane``, else ``~/.cache/memlane`` (not created here)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memlane"


def keep(path: Path, data: bytes) -> bool:
    """Write ``data`` to ``path`` in the cache atomically (a reader sees the whole file or
    none); False when the directory cannot be written, which callers treat as no cache."""
    import tempfile

    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}-", dir=path.parent)
    except OSError:
        return False
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        return False
    return True


#: A cached copy nobody opened for this long belongs to a version no longer in use.
UNUSED_DAYS = 30


def touch(path: Path) -> None:
    """Mark a cached file as in use (its mtime), so :func:`prune` keeps it."""
    with contextlib.suppress(OSError):
        os.utime(path)


def prune(kept: Path, pattern: str) -> None:
    """Remove the files beside ``kept`` that match ``pattern`` and were not used for
    :data:`UNUSED_DAYS` days: copies made by older versions of memlane or of a model. One in
    use by another installation sharing this home directory stays (each use touches it), so
    two versions side by side do not delete each other's copies at every start."""
    import time

    cutoff = time.time() - UNUSED_DAYS * 86400
    for other in kept.parent.glob(pattern):
        with contextlib.suppress(OSError):
            if other != kept and other.stat().st_mtime < cutoff:
                other.unlink()
