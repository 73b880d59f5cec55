"""The vector seam, re-exported where features and tests have always found it.

The port (:class:`~memlane.ports.VectorIndex`, :class:`~memlane.ports.ModelInfo`,
:func:`~memlane.ports.check_model`) lives in :mod:`memlane.ports`; the SQLite
implementation in :mod:`memlane.store.sqlite_vectors`. Ask a store for its index with
``store.vector_index()``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memlane.ports import EMBEDDED_ROLES, ModelInfo, VectorIndex, check_model
from memlane.store.sqlite_vectors import SQLiteVectorIndex

if TYPE_CHECKING:
    from memlane.ports import Vectors as Vectors


def __getattr__(name: str) -> Any:
    if name == "Vectors":  # built on first use: it needs numpy
        from memlane import ports

        return ports.Vectors
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["EMBEDDED_ROLES", "ModelInfo", "SQLiteVectorIndex", "VectorIndex", "Vectors", "check_model"]
