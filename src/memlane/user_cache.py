"""Where memlane keeps files it derives from installed packages (a model in a faster shape).

Everything there can be rebuilt from the packages, so a missing or unwritable directory
only costs start-up time, never data.
"""

from __future__ import annotations

import os
from pathlib import Path


def user_cache_dir() -> Path:
    """``$XDG_CACHE_HOME/memlane``, else ``~/.cache/memlane`` (not created here)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memlane"
