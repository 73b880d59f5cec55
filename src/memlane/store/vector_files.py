"""The vector index of a SQLite store as memory-mapped files beside the database.

``<db>-vectors/`` holds one *generation* of the base segment (see
:mod:`memlane.search.matrix`) as ``.npy`` files: message ids, vector seqs, session
ordinals, float32 rows, their int8 codes and scales, the row range of each session, an id
lookup, and the sessions and their owners (JSON). ``current.json`` names the generation
and says how far it has caught up with the table (``seq``) and with the table's deletion
log (``applied``). Opening is ``np.load(mmap_mode="r")``: milliseconds whatever the size,
and every process on the machine shares the same pages through the OS page cache instead
of holding its own copy of the matrix.

The files are derived data: rebuilt from ``message_vectors`` when missing, stale or
damaged. Erasing is in place: a forgotten message's row gets id -1 and zero bytes in the
current generation (and any older one still on disk), so forgotten vectors are gone from
these files as they are from the database (see :meth:`VectorFiles.erase`). All writers
hold ``lock`` (an ``flock`` on ``<db>-vectors/lock``).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Literal

import numpy as np
from numpy.typing import NDArray

from memlane.search import ivf
from memlane.search.ivf import Lists
from memlane.search.matrix import ERASED, Segment, Sessions, quantize
from memlane.store.vector_paths import files_dir

__all__ = ["Base", "FileSink", "MemorySink", "VectorFiles"]

FORMAT = 1
_ROWS = ("ids", "seqs", "sess", "scales", "codes", "data")
_DTYPES = {"ids": "<i8", "seqs": "<i8", "sess": "<i4", "scales": "<f4", "codes": "|i1", "data": "<f4"}
#: The inverted lists (memlane.search.ivf) of a generation with more than ANN_ABOVE rows.
_LISTS = ("ivf_centroids", "ivf_rows", "ivf_starts", "ivf_list_of")


@dataclass
class Base:
    """A base segment and what is needed to search it."""

    segment: Segment
    starts: NDArray[np.int64]  # rows of session ordinal o: starts[o]:starts[o + 1]
    sessions: Sessions
    by_id: NDArray[np.int64]  # message ids, sorted
    by_id_rows: NDArray[np.int64]  # the row of each of by_id
    seq: int  # every vector with seq <= this was read into it
    applied: int  # deletion log entries up to this one are applied
    generation: int | None = None  # None: held in memory only
    model: tuple[str, int, str] | None = None
    owners: int = 0  # the table's owner-change counter when the base was read
    lists: Lists | None = None  # approximate search of large selections (memlane.search.ivf)

    def row_of(self, ids: Sequence[int] | NDArray[np.int64]) -> tuple[NDArray[np.int64], NDArray[np.int64]]:
        """(ids found, their rows)."""
        wanted = np.asarray(ids, dtype=np.int64)
        if not len(self.by_id) or not len(wanted):
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        pos = np.clip(np.searchsorted(self.by_id, wanted), 0, len(self.by_id) - 1)
        hit = self.by_id[pos] == wanted
        rows = self.by_id_rows[pos[hit]]
        live = self.segment.ids[rows] == wanted[hit]  # an erased row keeps its lookup entry
        return wanted[hit][live], rows[live]


def _header(f: IO[bytes], dtype: str, shape: tuple[int, ...]) -> None:
    np.lib.format.write_array_header_1_0(f, {"descr": dtype, "fortran_order": False, "shape": shape})


class MemorySink:
    """Collects a base segment's rows in memory (an encrypted or in-memory database)."""

    def __init__(self, rows: int, dimension: int) -> None:
        self.rows, self.dimension = rows, dimension
        self._parts: dict[str, list[NDArray[Any]]] = {name: [] for name in _ROWS}

    def add(self, ids: NDArray[np.int64], seqs: NDArray[np.int64], sess: NDArray[np.int32],
            data: NDArray[np.float32]) -> None:
        codes, scales = quantize(data)
        parts: tuple[NDArray[Any], ...] = (ids, seqs, sess, scales, codes, data)
        for name, part in zip(_ROWS, parts, strict=True):
            self._parts[name].append(part)

    def arrays(self) -> dict[str, NDArray[Any]]:
        out: dict[str, NDArray[Any]] = {}
        for name in _ROWS:
            parts = self._parts[name]
            shape: tuple[int, ...] = (0, self.dimension) if name in ("codes", "data") else (0,)
            out[name] = np.concatenate(parts) if parts else np.zeros(shape, dtype=_DTYPES[name])
        return out

    def finish(self, starts: NDArray[np.int64], sessions: Sessions, seq: int, applied: int,
               model: tuple[str, int, str], owners: int) -> Base:
        a = self.arrays()
        segment = Segment(a["ids"], a["seqs"], a["sess"], a["data"], a["codes"], a["scales"])
        order = np.argsort(segment.ids, kind="stable").astype(np.int64)
        lists = ivf.build(segment.data, segment.ids) if len(segment) > ivf.ANN_ABOVE else None
        return Base(segment, starts, sessions, np.asarray(segment.ids[order]), order, seq, applied, None, model,
                    owners, lists)


class FileSink:
    """Writes a base segment's rows, in order, straight to a new generation's files: plain
    sequential writes, so building a million rows never holds them all in memory."""

    def __init__(self, files: VectorFiles, generation: int, rows: int, dimension: int) -> None:
        self.files, self.generation, self.rows, self.dimension = files, generation, rows, dimension
        self.dir = files.generation_dir(generation)
        shutil.rmtree(self.dir, ignore_errors=True)  # a build that died half way
        self.dir.mkdir(parents=True)
        self._out: dict[str, IO[bytes]] = {}
        for name in _ROWS:
            f = open(self.dir / f"{name}.npy", "wb")  # noqa: SIM115 - closed in finish()
            _header(f, _DTYPES[name], (rows, dimension) if name in ("codes", "data") else (rows,))
            self._out[name] = f
        self._written = 0

    def add(self, ids: NDArray[np.int64], seqs: NDArray[np.int64], sess: NDArray[np.int32],
            data: NDArray[np.float32]) -> None:
        codes, scales = quantize(data)
        for name, part in zip(_ROWS, (ids, seqs, sess, scales, codes, data), strict=True):
            self._out[name].write(np.ascontiguousarray(part, dtype=_DTYPES[name]).tobytes())
        self._written += len(ids)

    def finish(self, starts: NDArray[np.int64], sessions: Sessions, seq: int, applied: int,
               model: tuple[str, int, str], owners: int) -> Base:
        for f in self._out.values():
            f.flush()
            os.fsync(f.fileno())
            f.close()
        if self._written != self.rows:
            raise RuntimeError(f"vector index build wrote {self._written} rows of {self.rows}")
        np.save(self.dir / "starts.npy", starts)
        ids = np.load(self.dir / "ids.npy", mmap_mode="r")
        order = np.argsort(ids, kind="stable").astype(np.int64)
        np.save(self.dir / "by_id.npy", np.asarray(ids[order]))
        np.save(self.dir / "by_id_rows.npy", order)
        if self.rows > ivf.ANN_ABOVE:
            lists = ivf.build(np.load(self.dir / "data.npy", mmap_mode="r"), ids)
            if lists is not None:
                parts: tuple[NDArray[Any], ...] = (lists.centroids, lists.rows, lists.starts, lists.list_of)
                for name, arr in zip(_LISTS, parts, strict=True):
                    np.save(self.dir / f"{name}.npy", arr)
        del ids
        (self.dir / "sessions.json").write_text(json.dumps(
            {"ids": sessions.ids, "users": sessions.users, "agents": sessions.agents, "tenants": sessions.tenants}
        ))
        self.files.publish({"format": FORMAT, "generation": self.generation, "rows": self.rows,
                            "dimension": self.dimension, "seq": seq, "applied": applied, "model": list(model),
                            "owners": owners})
        base = self.files.open()
        assert base is not None
        return base


class VectorFiles:
    """The ``<db>-vectors`` directory of one SQLite database."""

    def __init__(self, db_path: str) -> None:
        self.dir = Path(files_dir(db_path))
        self._current = self.dir / "current.json"

    def exists(self) -> bool:
        return self.dir.exists()

    @contextmanager
    def lock(self) -> Iterator[None]:
        self.dir.mkdir(exist_ok=True)
        with open(self.dir / "lock", "a+b") as f:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f.fileno(), fcntl.LOCK_UN)

    def generation_dir(self, generation: int) -> Path:
        return self.dir / f"g{generation}"

    def stamp(self) -> int:
        """Changes whenever another generation is published or marks move (cheap: one stat)."""
        try:
            return self._current.stat().st_mtime_ns
        except FileNotFoundError:
            return 0

    def meta(self) -> dict[str, Any] | None:
        try:
            meta: dict[str, Any] = json.loads(self._current.read_text())
        except (FileNotFoundError, ValueError):
            return None
        return meta if meta.get("format") == FORMAT else None

    def publish(self, meta: dict[str, Any]) -> None:
        tmp = self.dir / "current.json.tmp"
        tmp.write_text(json.dumps(meta))
        os.replace(tmp, self._current)
        # Older generations go, but the one just replaced stays a while for processes that
        # still have it mapped (they switch on their next search; erase() still reaches it).
        for old in self.dir.glob("g*"):
            try:
                number = int(old.name[1:])
            except ValueError:
                continue
            if number < meta["generation"] - 1:
                shutil.rmtree(old, ignore_errors=True)

    def next_generation(self) -> int:
        numbers = [int(p.name[1:]) for p in self.dir.glob("g*") if p.name[1:].isdigit()]
        return max(numbers, default=0) + 1

    def open(self) -> Base | None:
        """The current generation, memory-mapped; None when there is none or it is damaged."""
        meta = self.meta()
        if meta is None:
            return None
        d = self.generation_dir(int(meta["generation"]))
        try:
            arrays = {name: np.load(d / f"{name}.npy", mmap_mode="r") for name in _ROWS}
            starts = np.load(d / "starts.npy")
            by_id = np.load(d / "by_id.npy", mmap_mode="r")
            by_id_rows = np.load(d / "by_id_rows.npy", mmap_mode="r")
            raw = json.loads((d / "sessions.json").read_text())
        except (OSError, ValueError):
            return None
        if any(len(a) != meta["rows"] for a in arrays.values()):
            return None
        lists = _open_lists(d, "r")
        data = arrays["data"]
        assert isinstance(data, np.memmap)
        segment = Segment(arrays["ids"], arrays["seqs"], arrays["sess"], data, arrays["codes"],
                          arrays["scales"], RowReader(d / "data.npy", data.offset, data.shape[1]))
        sessions = Sessions(raw["ids"], raw["users"], raw["agents"], raw["tenants"], base=len(raw["ids"]))
        model = meta.get("model")
        return Base(segment, starts, sessions, by_id, by_id_rows, int(meta["seq"]), int(meta["applied"]),
                    int(meta["generation"]), (str(model[0]), int(model[1]), str(model[2])) if model else None,
                    int(meta.get("owners", 0)), lists)

    def erase(self, entries: Sequence[tuple[int, int, int]]) -> int:
        """Apply deletion log entries ``(log seq, message id, vector seq)`` to every
        generation on disk: the row gets id -1 and zero bytes. Returns rows erased in the
        current generation. Call under :meth:`lock`."""
        meta = self.meta()
        if meta is None or not entries:
            return 0
        erased = 0
        for d in sorted(self.dir.glob("g*")):
            if not (d / "by_id.npy").exists():
                continue
            current = d.name == f"g{meta['generation']}"
            n = _erase_in(d, entries)
            erased += n if current else 0
        meta["applied"] = max(int(meta["applied"]), max(e[0] for e in entries))
        self.publish(meta)
        return erased

    def remove(self) -> None:
        """Every generation (reindex, a new model): the next search builds anew. Under lock."""
        for path in self.dir.iterdir():
            if path.name != "lock":
                shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)

    def mark_applied(self, applied: int) -> None:
        meta = self.meta()
        if meta is not None and applied > int(meta["applied"]):
            meta["applied"] = applied
            self.publish(meta)


class RowReader:
    """Float32 rows of a ``data.npy`` read with ``pread`` (see Segment.rows_of)."""

    def __init__(self, path: Path, offset: int, dimension: int) -> None:
        self._fd = os.open(path, os.O_RDONLY)
        self._offset, self._dimension = offset, dimension
        self._size = 4 * dimension

    def __call__(self, rows: NDArray[np.int64]) -> NDArray[np.float32]:
        fd, size, offset = self._fd, self._size, self._offset
        raw = b"".join(os.pread(fd, size, offset + size * r) for r in rows.tolist())
        return np.frombuffer(raw, dtype="<f4").reshape(len(rows), self._dimension)

    def __del__(self) -> None:
        os.close(self._fd)


def _erase_in(d: Path, entries: Sequence[tuple[int, int, int]]) -> int:
    by_id = np.load(d / "by_id.npy", mmap_mode="r")
    by_id_rows = np.load(d / "by_id_rows.npy", mmap_mode="r")
    ids = np.load(d / "ids.npy", mmap_mode="r+")
    seqs = np.load(d / "seqs.npy", mmap_mode="r")
    wanted = np.array([e[1] for e in entries], dtype=np.int64)
    vseq = np.array([e[2] for e in entries], dtype=np.int64)
    if not len(by_id):
        return 0
    pos = np.clip(np.searchsorted(by_id, wanted), 0, len(by_id) - 1)
    hit = by_id[pos] == wanted
    rows = np.asarray(by_id_rows[pos[hit]])
    # Only the vector that was deleted: a message re-embedded since has a newer seq.
    rows = rows[(ids[rows] == wanted[hit]) & (seqs[rows] == vseq[hit])]
    if not len(rows):
        return 0
    rows = np.unique(rows)
    for name in ("data", "codes", "scales"):
        arr = np.load(d / f"{name}.npy", mmap_mode="r+")
        arr[rows] = 0
        arr.flush()
        del arr
    lists = _open_lists(d, "r+")
    if lists is not None:  # no centroid may keep anything of an erased row
        ivf.refresh(lists, rows, np.load(d / "data.npy", mmap_mode="r"), ids)
        assert isinstance(lists.centroids, np.memmap)
        lists.centroids.flush()
    # The ids last: a crash before this line leaves the rows to be erased again (the log
    # entries are applied once current.json says so).
    ids[rows] = ERASED
    ids.flush()
    return len(rows)


def _open_lists(d: Path, mode: Literal["r", "r+"]) -> Lists | None:
    """A generation's inverted lists, memory-mapped (``mode`` "r+" to update centroids);
    None when it has none (too few rows) or they are damaged (exact search then)."""
    if not (d / f"{_LISTS[0]}.npy").exists():
        return None
    try:
        centroids, rows, starts, list_of = (np.load(d / f"{name}.npy", mmap_mode=mode if name == _LISTS[0] else "r")
                                            for name in _LISTS)
    except (OSError, ValueError):
        return None
    if len(starts) != len(centroids) + 1 or int(starts[-1]) != len(rows):
        return None
    return Lists(centroids, rows, starts, list_of)
