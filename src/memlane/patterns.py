"""Regular expressions compiled on first use, not at import.

The EN/DE rules (note extraction, reference resolution, summaries) hold dozens of large
patterns. Compiling them all when a module is imported cost a Memory that only writes and
reads windows tens of milliseconds for rules it never runs (`memlane bench cold`); a
:func:`lazy_compile` pattern compiles the first time it is used and behaves as the
compiled pattern from then on.
"""

from __future__ import annotations

import re
from typing import Any, cast

__all__ = ["lazy_compile"]


class _LazyPattern:
    __slots__ = ("_args", "_compiled")

    def __init__(self, pattern: str, flags: int) -> None:
        self._args = (pattern, flags)
        self._compiled: re.Pattern[str] | None = None

    def __getattr__(self, name: str) -> Any:
        compiled = self._compiled
        if compiled is None:  # two threads may both compile: the same pattern either way
            compiled = self._compiled = re.compile(*self._args)
        return getattr(compiled, name)

    def __repr__(self) -> str:
        return f"lazy_compile({self._args[0]!r}, {self._args[1]!r})"


def lazy_compile(pattern: str, flags: int = 0) -> re.Pattern[str]:
    """``re.compile(pattern, flags)``, deferred until a method or attribute is first used."""
    return cast("re.Pattern[str]", _LazyPattern(pattern, flags))
