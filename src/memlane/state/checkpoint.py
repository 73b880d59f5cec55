"""Checkpoints, startup hydration and clean shutdown (PRD-014 §5-§7).

After every turn a :class:`ConversationCheckpointSnapshot` — the session
state, the last K turns and the summary with its newest delta — is written as
one JSON file per session, atomically: a temp file in the same directory,
fsync, rename, fsync of the directory. A crash leaves the previous snapshot or
the new one, never half of one. The write runs on the background summary
thread right after the summary update, never on the caller's write path.

A checkpoint is derived, like everything but the log: hydration (``memlane/resume.py``) uses it
when it is *fresh* (it ends at the log's newest message) and otherwise —
missing, stale, unreadable, tampered with — rebuilds from the log with a
warning and writes a new one. It never raises because of a checkpoint.

Where: ``settings.checkpoint_dir``; by default a ``<db name>.checkpoints``
folder beside a SQLite file, ``~/.memlane/checkpoints/<db hash>`` for
PostgreSQL, and nowhere for an in-memory store (nothing survives it anyway).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from memlane.config import DEFAULT_HOME
from memlane.context.state_view import StateView, session_state
from memlane.context.strategies import tail_turns
from memlane.context.summaries import SummaryManager, SummaryRecord
from memlane.errors import MemlaneError, SessionNotFoundError
from memlane.lru import LRUCache
from memlane.models import JSON, Message, utcnow

if TYPE_CHECKING:
    from memlane.context.state_view import StateOf
    from memlane.ports import Essentials
    from memlane.sealing import Sealer

__all__ = [
    "CheckpointError",
    "CheckpointManager",
    "ConversationCheckpointSnapshot",
    "atomic_write",
]

log = logging.getLogger(__name__)

FORMAT = "memlane.checkpoint"
VERSION = 1

class CheckpointError(MemlaneError):
    """A checkpoint file exists but cannot be trusted (unreadable, malformed, altered)."""


@dataclass(slots=True)
class ConversationCheckpointSnapshot:
    """Full restorable state of one session at one point of its log."""

    session_id: str
    written_at: str
    reason: str  # turn | hydrate | shutdown | rebuild
    last_message_id: int  # newest visible message when written
    message_count: int
    turn_count: int
    status: str
    state: JSON
    recent_turns: list[list[JSON]]  # the last K turns, messages as dicts
    turn_records: list[JSON]
    summary: JSON  # the derived summary record, plus "delta": its newest block
    version: int = VERSION

    def to_json(self) -> JSON:
        body: JSON = {"format": FORMAT, **asdict(self)}
        body["checksum"] = _checksum(body)
        return body

    def content_digest(self) -> str:
        """What the snapshot says about the session, apart from when and why it was taken."""
        body = asdict(self)
        del body["written_at"], body["reason"]
        return _checksum(body)

    @classmethod
    def from_json(cls, raw: object) -> ConversationCheckpointSnapshot:
        if not isinstance(raw, dict) or raw.get("format") != FORMAT:
            raise CheckpointError("not a memlane checkpoint")
        if raw.get("version") != VERSION:
            raise CheckpointError(f"checkpoint version {raw.get('version')!r} is not {VERSION}")
        body = {k: v for k, v in raw.items() if k != "checksum"}
        if raw.get("checksum") != _checksum(body):
            raise CheckpointError("checksum mismatch (the file was altered or damaged)")
        body.pop("format")
        try:
            snap = cls(**body)
        except TypeError as exc:
            raise CheckpointError(f"malformed checkpoint: {exc}") from exc
        if not isinstance(snap.last_message_id, int) or not isinstance(snap.state, dict):
            raise CheckpointError("malformed checkpoint: wrong field types")
        return snap

    def messages(self) -> list[Message]:
        """The last K turns as messages (for a warm start without the store)."""
        from memlane.models import message_from_input

        out: list[Message] = []
        for turn in self.recent_turns:
            for raw in turn:
                data = {k: v for k, v in raw.items() if k not in ("hidden", "token_count")}
                msg = message_from_input(data)
                msg.id = raw.get("id")
                out.append(msg)
        return out


def _checksum(body: JSON) -> str:
    canonical = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that readers see the old file or the new one, whole."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    # The rename itself must reach the disk too, or a power cut can undo it.
    with contextlib.suppress(OSError, AttributeError):
        dfd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)


def _shred(path: Path) -> bool:
    """Overwrite a checkpoint with zeros, then remove it: it holds message text.

    Unlinking alone leaves the bytes in the freed blocks; overwriting in place reaches
    them on ordinary file systems (not on copy-on-write ones or SSD remapping, which is
    what encryption at rest is for).
    """
    try:
        with path.open("r+b") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(0)
            f.write(b"\0" * size)
            f.flush()
            os.fsync(f.fileno())
        path.unlink()
    except FileNotFoundError:
        return False
    except OSError as exc:
        log.warning("could not shred checkpoint %s: %s", path, exc)
        with contextlib.suppress(OSError):
            path.unlink()
    return True


def _stamp(path: Path) -> tuple[int, int]:
    """Size and mtime of a checkpoint file, (-1, -1) when there is none: another process
    or a person may have replaced or removed it since this one wrote it."""
    try:
        st = path.stat()
    except OSError:
        return -1, -1
    return st.st_size, st.st_mtime_ns


def file_name(session_id: str, *, sealed: bool) -> str:
    """A checkpoint's file name; beside an encrypted store not even the id shows in it."""
    digest = hashlib.sha256(session_id.encode("utf-8")).hexdigest()
    if sealed:
        return f"{digest[:32]}.sealed"
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", session_id)[:80]
    return f"{safe}-{digest[:12]}.json"


def checkpoint_dir(db: Path, configured: str | None) -> Path:
    """Where the checkpoints of the SQLite store ``db`` live."""
    return Path(configured).expanduser() if configured else db.parent / f"{db.stem}.checkpoints"


def convert_checkpoints(directory: Path, sealer: Sealer, *, seal: bool) -> int:
    """Seal every plain checkpoint in ``directory`` (``seal``) or open every sealed one.

    For ``memlane encrypt``/``decrypt``: the old file is shredded once the new one is
    written, so no plaintext copy stays beside an encrypted store. Returns files converted.
    """
    done = 0
    for path in sorted(directory.glob("*.json" if seal else "*.sealed")):
        data = path.read_bytes()
        plain = data if seal else sealer.open(data, f"checkpoint {path}")
        session_id = str(json.loads(plain.decode("utf-8")).get("session_id", ""))
        target = directory / file_name(session_id, sealed=seal)
        atomic_write(target, sealer.seal(plain) if seal else plain)
        _shred(path)
        done += 1
    return done


def _default_dir(url: str, configured: str | None) -> Path | None:
    if configured or url.startswith("sqlite:///"):
        db = Path(url[len("sqlite:///"):]) if url.startswith("sqlite:///") else Path()
        if str(db) != ":memory:":
            return checkpoint_dir(db, configured)
        return None
    if url.startswith(("postgres://", "postgresql://")):
        tag = hashlib.sha256(re.sub(r"//[^@/]*@", "//", url).encode()).hexdigest()[:12]
        return DEFAULT_HOME.expanduser() / "checkpoints" / tag
    return None


def _state_json(view: StateView) -> JSON:
    if view.raw:
        return dict(view.raw)
    out = asdict(view)
    out.pop("raw", None)
    return out


class CheckpointManager:
    """Writes and reads the checkpoints of one Memory.

    ``sealer`` seals the files beside an encrypted store; ``state_of`` is the state part's
    state of a session (without it the state is read from the log)."""

    def __init__(
        self, essentials: Essentials, summaries: SummaryManager | None = None, *,
        sealer: Sealer | None = None, state_of: StateOf | None = None,
    ) -> None:
        self.essentials = essentials
        self.summaries = summaries
        self.sealer = sealer
        self.state_of = state_of
        self.directory = _default_dir(getattr(essentials.store, "url", "") or "", essentials.settings.checkpoint_dir)
        self.keep_turns = max(1, essentials.settings.keep_raw_turns)
        self.seen: set[str] = set()  # sessions written to in this process (for shutdown())
        self._lock = threading.Lock()
        # session id -> (content digest, file size and mtime) of the last checkpoint written
        # here: with ``checkpoint_per_turn: sync`` the caller's thread writes a turn's
        # checkpoint and the summary thread then builds the same one again; rewriting it
        # (two fsyncs) would change nothing but its written_at.
        self._written: LRUCache[str, tuple[str, int, int]] = LRUCache(4096)

    # -- files

    def path_for(self, session_id: str) -> Path | None:
        if self.directory is None:
            return None
        return self.directory / file_name(session_id, sealed=self.sealer is not None)

    def read(self, session_id: str) -> ConversationCheckpointSnapshot | None:
        """The stored snapshot; None when there is none; CheckpointError when it is unusable."""
        path = self.path_for(session_id)
        if path is None or not path.exists():
            return None
        try:
            data = path.read_bytes()
            if self.sealer is not None:
                data = self.sealer.open(data, f"checkpoint {path}")
            raw = json.loads(data.decode("utf-8"))
        except (OSError, UnicodeDecodeError, ValueError, MemlaneError) as exc:
            raise CheckpointError(f"cannot read checkpoint {path}: {exc}") from exc
        snap = ConversationCheckpointSnapshot.from_json(raw)
        if snap.session_id != session_id:
            raise CheckpointError(f"checkpoint {path} belongs to session {snap.session_id!r}")
        return snap

    def check(self, session_id: str) -> tuple[str, ConversationCheckpointSnapshot | None]:
        """("fresh" | "stale" | "missing" | "corrupt" | "disabled", the snapshot if readable)."""
        if self.directory is None:
            return "disabled", None
        try:
            snap = self.read(session_id)
        except CheckpointError as exc:
            log.warning("checkpoint of session %s is unusable: %s", session_id, exc)
            return "corrupt", None
        if snap is None:
            return "missing", None
        newest = self.essentials.store.recent_messages(session_id, 1)
        newest_id = newest[0].id if newest and newest[0].id is not None else 0
        if snap.last_message_id != newest_id:
            return "stale", snap
        return "fresh", snap

    # -- writing

    def snapshot(self, session_id: str, reason: str, *, status: str | None = None) -> ConversationCheckpointSnapshot:
        store = self.essentials.store
        session = store.get_session(session_id)
        if session is None:
            raise SessionNotFoundError(session_id)
        record: SummaryRecord | None = None
        if self.summaries is not None:
            record = self.summaries.current(session_id, catch_up=False)
        view = session_state(store, self.state_of, session, record)
        state = _state_json(view)
        if status is not None:
            state["status"] = status
        turns, _ = tail_turns(
            store, session_id, max_turns=self.keep_turns, max_tokens=2**31, counter=self.essentials.counter
        )
        if self.summaries is not None:
            turns = [self.summaries.visible(session_id, t) for t in turns]
        newest = store.recent_messages(session_id, 1)
        summary: JSON = record.to_json() if record is not None else {}
        if record is not None and record.delta is not None:
            summary["delta"] = asdict(record.delta)
        return ConversationCheckpointSnapshot(
            session_id=session_id,
            written_at=utcnow().isoformat(),
            reason=reason,
            last_message_id=newest[0].id if newest and newest[0].id is not None else 0,
            message_count=session.message_count,
            turn_count=view.turn_count,
            status=status or session.status,
            state=state,
            recent_turns=[[m.to_dict() for m in t] for t in turns if t],
            turn_records=[t.to_dict() for t in store.list_turns(session_id, limit=self.keep_turns)],
            summary=summary,
        )

    def write(self, session_id: str, reason: str = "turn", *, status: str | None = None) -> Path | None:
        """Write the session's checkpoint. A turn's checkpoint that would say what the file
        written last from here already says is not written again."""
        path = self.path_for(session_id)
        if path is None:
            return None
        lock = self.summaries.lock(session_id) if self.summaries is not None else self._lock
        with lock:
            if self.summaries is not None and session_id in self.summaries.deleted:
                return None  # deleted (forgotten) while this write was queued
            snap = self.snapshot(session_id, reason, status=status)
            digest = snap.content_digest()
            if reason == "turn" and self._written.get(session_id) == (digest, *_stamp(path)):
                self.seen.add(session_id)
                return path
            data = json.dumps(snap.to_json(), ensure_ascii=False, separators=(",", ":"), default=str)
            raw = data.encode("utf-8")
            # Beside an encrypted store a checkpoint is sealed with the same key.
            atomic_write(path, raw if self.sealer is None else self.sealer.seal(raw))
            self._written.put(session_id, (digest, *_stamp(path)))
        self.seen.add(session_id)
        return path

    def drop_cached(self, session_id: str | None) -> None:
        """Forget what this process last wrote for the session (for all when None: another
        process may have forgotten it and shredded the file)."""
        if session_id is None:
            self._written.clear()
        else:
            self._written.pop(session_id)

    def delete(self, session_id: str) -> bool:
        path = self.path_for(session_id)
        if path is None:
            return False
        self._written.pop(session_id)
        removed = _shred(path)
        for leftover in path.parent.glob(f".{path.name}.*.tmp"):  # from a crash mid-write
            _shred(leftover)
        return removed

    # -- hooks wired by attach() below

    def after_turn(self, session_id: str) -> None:
        """Autosave (§7): runs on the background thread after each summary update."""
        try:
            self.write(session_id, "turn")
        except OSError as exc:
            log.warning("cannot write checkpoint of session %s: %s", session_id, exc)

    def turn_stored(self, session_id: str) -> None:
        """Autosave on the caller's thread (settings ``checkpoint_per_turn: sync``): the
        checkpoint reflecting a turn is on disk before ``store_interaction`` returns, so a
        kill -9 right after it hydrates from a fresh checkpoint."""
        if self.directory is None:
            return
        try:
            if self.summaries is not None:
                self.summaries.update(session_id)  # folds a block only when one is due
            self.write(session_id, "turn")
        except (OSError, MemlaneError) as exc:
            # Never fails an acknowledged write: the log stays the source of truth.
            log.warning("cannot write checkpoint of session %s: %s", session_id, exc)

    def forget(self, session_id: str, message_ids: Sequence[int] | None) -> None:
        """Forget hook: a checkpoint holds message text, so it goes with the messages."""
        lock = self.summaries.lock(session_id) if self.summaries is not None else self._lock
        with lock:
            self.delete(session_id)
        self.seen.discard(session_id)
