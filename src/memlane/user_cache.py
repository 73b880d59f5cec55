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


def prune(kept: Path, pattern: str) -> None:
    """Remove the files beside ``kept`` that match ``pattern`` (older versions of it: each
    upgrade of memlane or of a model would otherwise leave its copy behind)."""
    for other in kept.parent.glob(pattern):
        if other != kept:
            with contextlib.suppress(OSError):
                other.unlink()
