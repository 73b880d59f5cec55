"""Checkpoints, startup hydration and clean shutdown (PRD-014 §5-§7).

After every turn a :class:`ConversationCheckpointSnapshot` — the session
state, the last K turns and the summary with its newest delta — is written as
one JSON file per session, atomically: a temp file in the same directory,
fsync, rename, fsync of the directory. A crash leaves the previous snapshot or
the new one, never half of one. The write runs on the background summary
thread right after the summary update, never on the caller's write path.

A checkpoint is derived, like everything but the log: :func:`hydrate` uses it
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
from typing import TYPE_CHECKING, Any

from memlane.config import DEFAULT_HOME
from memlane.context.packet import StateView, session_state
from memlane.context.strategies import tail_turns
from memlane.context.summaries import SummaryManager, SummaryRecord
from memlane.errors import MemlaneError
from memlane.lru import LRUCache
from memlane.models import JSON, Message, utcnow

if TYPE_CHECKING:
    from memlane.context.packet import ContextPacket
    from memlane.memory import Memory
    from memlane.sealing import Sealer

__all__ = [
    "CheckpointError",
    "CheckpointManager",
    "ConversationCheckpointSnapshot",
    "atomic_write",
    "hydrate",
    "shutdown",
]

log = logging.getLogger(__name__)

FORMAT = "memlane.checkpoint"
VERSION = 1
#: Statuses that a new message ends: the conversation is simply going on again.
_RESUMABLE = frozenset({"resuming", "shutdown_clean"})
#: Statuses hydration leaves alone (the session lifecycle's, not the PRD's).
_KEEP_ON_HYDRATE = frozenset({"ended", "archived"})


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


def _default_dir(mem: Memory) -> Path | None:
    url = getattr(mem.store, "url", "") or ""
    if mem.settings.checkpoint_dir or url.startswith("sqlite:///"):
        db = Path(url[len("sqlite:///"):]) if url.startswith("sqlite:///") else Path()
        if str(db) != ":memory:":
            return checkpoint_dir(db, mem.settings.checkpoint_dir)
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
    """Writes and reads the checkpoints of one Memory."""

    def __init__(self, mem: Memory, summaries: SummaryManager | None = None) -> None:
        self.mem = mem
        self.summaries = summaries
        self.directory = _default_dir(mem)
        self.keep_turns = max(1, mem.settings.keep_raw_turns)
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
        return self.directory / file_name(session_id, sealed=self.mem.sealer is not None)

    def read(self, session_id: str) -> ConversationCheckpointSnapshot | None:
        """The stored snapshot; None when there is none; CheckpointError when it is unusable."""
        path = self.path_for(session_id)
        if path is None or not path.exists():
            return None
        try:
            data = path.read_bytes()
            if self.mem.sealer is not None:
                data = self.mem.sealer.open(data, f"checkpoint {path}")
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
        newest = self.mem.store.recent_messages(session_id, 1)
        newest_id = newest[0].id if newest and newest[0].id is not None else 0
        if snap.last_message_id != newest_id:
            return "stale", snap
        return "fresh", snap

    # -- writing

    def snapshot(self, session_id: str, reason: str, *, status: str | None = None) -> ConversationCheckpointSnapshot:
        store = self.mem.store
        session = self.mem.get_session(session_id)
        record: SummaryRecord | None = None
        if self.summaries is not None:
            record = self.summaries.current(session_id, catch_up=False)
        view = session_state(self.mem, session, record)
        state = _state_json(view)
        if status is not None:
            state["status"] = status
        turns, _ = tail_turns(
            store, session_id, max_turns=self.keep_turns, max_tokens=2**31, counter=self.mem.counter
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
            atomic_write(path, raw if self.mem.sealer is None else self.mem.sealer.seal(raw))
            self._written.put(session_id, (digest, *_stamp(path)))
        self.seen.add(session_id)
        return path

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


# ---------------------------------------------------------------- lifecycle


def _manager(mem: Memory) -> CheckpointManager:
    found = mem.parts.checkpoints
    if found is not None:
        return found
    return CheckpointManager(mem, mem.parts.summaries)


def _tracker_save(mem: Memory, state: JSON, status: str | None = None) -> bool:
    """Hand a state back to the tracker (if it is installed and takes one)."""
    from memlane.context.packet import _tracker

    tracker = _tracker()
    cls = getattr(tracker, "SessionState", None)
    save = getattr(tracker, "save_state", None)
    if cls is None or save is None:
        return False
    data = dict(state)
    if status is not None:
        data["status"] = status
    try:
        from_dict = getattr(cls, "from_dict", None)
        if callable(from_dict):
            value = from_dict(data)
        else:
            names = set(getattr(cls, "__dataclass_fields__", {}))
            value = cls(**{k: v for k, v in data.items() if k in names})
        save(mem, value)
    except (TypeError, ValueError, MemlaneError) as exc:
        log.warning("could not hand the session state back to the tracker: %s", exc)
        return False
    return True


def _restore(mem: Memory, snap: ConversationCheckpointSnapshot, summaries: SummaryManager | None) -> list[str]:
    """Put derived state from a fresh checkpoint back where it is missing or behind."""
    restored: list[str] = []
    if summaries is not None and snap.summary:
        current = summaries.current(snap.session_id, catch_up=False)
        saved = SummaryRecord.from_json(snap.session_id, {k: v for k, v in snap.summary.items() if k != "delta"})
        if saved is not None and (current is None or current.covered_turns < saved.covered_turns):
            mem.store.put_derived(snap.session_id, "summary", saved.to_json())
            restored.append("summary")
    tracker_state = session_state(mem, mem.get_session(snap.session_id))
    if snap.state and tracker_state.turn_count < snap.turn_count and _tracker_save(mem, snap.state):
        restored.append("state")
    return restored


def hydrate(
    mem: Memory,
    session_id: str,
    *,
    query: str | None = None,
    max_tokens: int | None = None,
    strategy: str | None = None,
) -> ContextPacket:
    """Startup hydration (§5); returns the packet to warm the agent with.

    1. the store is open (Memory); 2. load the latest checkpoint — rebuilt from
    the log with a warning when missing, stale or corrupt; 3-5. build the
    packet: the recent window, rolling summary, active job refs and the rest
    of the state; 7. mark the session ``resuming``. Step 6 (warming the agent)
    is the caller's: it gets the packet.
    """
    manager = _manager(mem)
    session = mem.get_session(session_id)
    verdict, snap = manager.check(session_id)
    restored: list[str] = []
    if verdict == "fresh" and snap is not None:
        restored = _restore(mem, snap, manager.summaries)
    elif verdict != "disabled":
        log.warning(
            "checkpoint of session %s is %s; rebuilding the session's state from the log",
            session_id, verdict,
        )
        if manager.summaries is not None:
            manager.summaries.update(session_id)
    # Step 7 comes before the packet here, so that the packet the agent is
    # warmed with already says "resuming". An ended or archived conversation
    # keeps its status: loading it is not reopening it.
    status = session.status if session.status in _KEEP_ON_HYDRATE else "resuming"
    if status == "resuming":
        mem.update_session(session_id, status="resuming")
        _tracker_save(mem, session_state(mem, mem.get_session(session_id)).raw, status="resuming")
    packet = mem.context(session_id, query=query, max_tokens=max_tokens, strategy=strategy)
    path = None
    try:
        path = manager.write(session_id, "hydrate" if verdict == "fresh" else "rebuild", status=status)
    except OSError as exc:
        log.warning("cannot write checkpoint of session %s: %s", session_id, exc)
    packet.meta["hydration"] = {
        "checkpoint": verdict,
        "restored": restored,
        "path": str(path) if path else None,
        "checkpoint_written_at": snap.written_at if snap is not None else None,
    }
    return packet


def shutdown(mem: Memory, session_id: str | None = None, *, close: bool = False) -> dict[str, Any]:
    """Clean shutdown (§6) of one session, or of every session written in this process.

    1. flush pending writes and background work; 2. fold the remaining turns
    into a final rolling summary delta; 3. refresh the session state;
    5. emit long-term memory candidates through the notes component's
    promotion gate (or ``mem.parts.promote``) when one is attached; 6. mark ``shutdown_clean``;
    4. write the checkpoint — after the mark, so that it records the final
    status; 7. close the store when ``close`` is set.
    Returns ``{session_id: checkpoint path or None}``.
    """
    manager = _manager(mem)
    mem.flush()
    targets = [session_id] if session_id is not None else sorted(manager.seen)
    written: dict[str, Any] = {}
    promote = mem.parts.promote
    if promote is None and mem.parts.notes is not None:  # the notes component's gate
        promote = mem.parts.notes.promoter.catch_up
    for sid in targets:
        mem.get_session(sid)
        if manager.summaries is not None:
            manager.summaries.update(sid, force=True)
        state = session_state(mem, mem.get_session(sid))
        if callable(promote):
            try:
                promote(sid)
            except MemlaneError as exc:
                log.warning("promotion of long-term notes for %s failed: %s", sid, exc)
        mem.update_session(sid, status="shutdown_clean")
        _tracker_save(mem, state.raw, status="shutdown_clean")
        try:
            path = manager.write(sid, "shutdown", status="shutdown_clean")
        except OSError as exc:
            log.warning("cannot write checkpoint of session %s: %s", sid, exc)
            path = None
        written[sid] = str(path) if path else None
    if close:
        mem.close()
    return written
