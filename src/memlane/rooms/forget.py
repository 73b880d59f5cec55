""""Forget this conversation": the messages and everything derived from them, gone.

What goes: the messages (and with them, inside the store, their keyword-index entries,
vectors, turns, facets and the promotion watermark), the session's derived records
(summaries, state), its checkpoint files (the checkpoint component's forget hook), every
note learned in it, and the words of earlier memory commands said in it (the audit log
keeps who, what and when). What stays: an empty conversation with the same id and room
settings, so the room keeps working, and the audit entry of the forget itself.

It is the one erase routine every other deletion path uses too (:meth:`Memory.erase`,
whose SQL lives in ``store/erase.py``), so the words are no longer anywhere in the
database files afterwards; this module only adds the empty shell.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memlane.errors import ConflictError, MemlaneError, SessionNotFoundError
from memlane.models import Session

if TYPE_CHECKING:
    from memlane.rooms.anchor import RoomMemory

__all__ = ["ForgetReport", "forget_conversation"]


@dataclass(slots=True)
class ForgetReport:
    session_id: str
    messages: int
    notes: int

    def to_dict(self) -> dict[str, object]:
        return {"session_id": self.session_id, "messages": self.messages, "notes": self.notes}


def forget_conversation(mem: RoomMemory, session_id: str, *, keep_shell: bool = True) -> ForgetReport:
    """Delete the conversation's history and everything derived from it.

    With ``keep_shell`` an empty conversation with the same id, tenant, owner, system
    prompt and room settings is left in place (a room's title is kept only when it is a
    room name we were given, since other titles may quote the forgotten text).
    """
    session = mem.store.get_session(session_id)
    if session is None:
        raise SessionNotFoundError(session_id)
    # Let background work (vectors, summaries, checkpoints, notes) finish first, so none
    # of it writes derived data of the old messages after they are gone.
    with contextlib.suppress(MemlaneError, TimeoutError):
        mem.flush(30.0)
    service = mem.parts.notes
    promoter = getattr(service, "promoter", None)
    lock = getattr(promoter, "_run_lock", None)
    with lock if lock is not None else contextlib.nullcontext():
        counts = mem.erase(session_ids=[session_id])
        if keep_shell:
            is_room = session.metadata.get("kind") == "room"
            shell = Session(
                id=session.id, user_id=session.user_id, agent_id=session.agent_id,
                tenant_id=session.tenant_id, title=session.title if is_room else None,
                system_prompt=session.system_prompt, metadata=dict(session.metadata),
            )
            with contextlib.suppress(ConflictError):  # a new message re-created it already
                mem.store.create_session(shell)
    return ForgetReport(session_id, counts.messages, counts.notes)
