"""Memory as one caller may see it: the single place tenant isolation is enforced.

REST routes and MCP tools both go through :class:`TenantView`, never through
``Memory`` directly, so a key for tenant A cannot read, write, search, export
or delete tenant B's sessions by any path. A session of another tenant looks
exactly like a missing one (404), so ids do not leak across tenants.
``tenant=None`` is the no-auth mode on loopback: the local user sees everything.

Session ids are per tenant (memlane.scoping): a keyed caller's id ``x`` is the session
stored under ``session_key(tenant, x)``, so two tenants may both use ``x``. Ids go in
through :meth:`TenantView.key`; what goes back out is stripped of the tenant's prefix
by :func:`public_ids` (REST responses, MCP results, event frames).
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

from memlane import transfer
from memlane.errors import (
    ConflictError,
    InvalidInputError,
    NotFoundError,
    PermissionDeniedError,
    SessionNotFoundError,
)
from memlane.memory import Memory
from memlane.models import Message, SearchHit, Session, Turn
from memlane.notes.models import AuditEntry
from memlane.scoping import SEPARATOR, public_session_id, session_key, tenant_of_key
from memlane.text import snippet as snippet_of

#: How much of the first user message names an untitled session.
TITLE_CHARS = 60

#: Optional Memory methods other parts of memlane add; the server exposes them when present.
OPTIONAL_FEATURES = {
    "context": "context",
    "state": "get_state",
    "relevant_context": "get_relevant_context",
    "notes": "notes",
    "add_note": "add_note",
}


class MissingFeatureError(Exception):
    """An optional Memory method (context engine, state, notes) is not in this build."""

    def __init__(self, feature: str, method: str) -> None:
        super().__init__(f"{feature} is not available in this memlane build (Memory has no {method}() yet)")
        self.feature = feature
        self.method = method


@dataclass(frozen=True, slots=True)
class Caller:
    tenant: str | None  # None: every tenant (no-auth mode, loopback only)
    key_id: str | None = None

    @property
    def write_tenant(self) -> str:
        return self.tenant or "default"


def features(mem: Memory) -> dict[str, bool]:
    return {name: callable(getattr(mem, method, None)) for name, method in OPTIONAL_FEATURES.items()}


#: Fields of a response that hold session ids (one, or a list of them).
ID_FIELDS = frozenset({"id", "session_id", "target"})
ID_LIST_FIELDS = frozenset({"session_ids"})


def public_ids(value: Any, tenant: str | None) -> Any:
    """``value`` (JSON-like) with every session key of ``tenant`` shown as the tenant's own id.

    Only the id fields are touched, so a message that happens to start with the same
    characters stays as it was. ``tenant`` None (no-auth mode) or "default": unchanged.
    """
    if not tenant or tenant == "default":
        return value
    prefix = f"{tenant}{SEPARATOR}"

    def plain(v: Any) -> Any:
        return v[len(prefix):] if isinstance(v, str) and v.startswith(prefix) else v

    def walk(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: plain(x) if k in ID_FIELDS else [plain(i) for i in x]
                    if k in ID_LIST_FIELDS and isinstance(x, list) else walk(x) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x) for x in v]
        return v

    return walk(value)


class TenantView:
    def __init__(self, mem: Memory, caller: Caller) -> None:
        self.mem = mem
        self.caller = caller

    # ------------------------------------------------------------ sessions

    def _visible(self, session: Session | None) -> bool:
        return session is not None and (self.caller.tenant is None or session.tenant_id == self.caller.tenant)

    def key(self, session_id: str) -> str:
        """The stored key of the caller's session ``session_id`` (no-auth mode: the id itself)."""
        return session_id if self.caller.tenant is None else session_key(self.caller.tenant, session_id)

    def _opt_key(self, session_id: str | None) -> str | None:
        return None if session_id is None else self.key(session_id)

    def session(self, session_id: str) -> Session:
        return self._session_at(self.key(session_id), session_id)

    def _session_at(self, key: str, shown: str | None = None) -> Session:
        session = self.mem.store.get_session(key)
        if session is None or not self._visible(session):
            raise SessionNotFoundError(shown if shown is not None else public_session_id(key))
        return session

    def create_session(self, *, tenant_id: str | None = None, **fields: Any) -> Session:
        tenant = self.caller.tenant or tenant_id or "default"
        try:
            sid = self.mem.create_session(tenant_id=tenant, **fields)
        except ConflictError as exc:
            raise ConflictError(
                f"session id {fields.get('session_id')!r} is already taken; choose another id "
                "or omit session_id to get a new UUID"
            ) from exc
        return self._session_at(sid)

    def ensure_session(self, session_id: str, **fields: Any) -> Session:
        """The caller's session, created in the caller's tenant on first use (auto_create_sessions)."""
        found = self.mem.store.get_session(self.key(session_id))
        if found is not None:
            if not self._visible(found):
                raise SessionNotFoundError(session_id)
            return found
        if not self.mem.settings.auto_create_sessions:
            raise SessionNotFoundError(session_id)
        with contextlib.suppress(ConflictError):  # a concurrent request created it first
            self.mem.create_session(session_id=public_session_id(session_id),
                                    tenant_id=self.caller.tenant or tenant_of_key(session_id), **fields)
        return self.session(session_id)

    def list_sessions(self, limit: int = 10, offset: int = 0, **filters: Any) -> list[Session]:
        if self.caller.tenant is not None:
            filters["tenant_id"] = self.caller.tenant
        return self.mem.list_sessions(limit=limit, offset=offset, **filters)

    def update_session(self, session_id: str, **changes: Any) -> Session:
        self.session(session_id)
        return self.mem.update_session(self.key(session_id), **changes)

    def end_session(self, session_id: str) -> bool:
        self.session(session_id)
        return self.mem.end_session(self.key(session_id))

    def display_titles(self, sessions: Sequence[Session]) -> dict[str, str | None]:
        """Each session's title, or for an untitled one the start of its first user message
        (what people recognise a conversation by); None while it has none. One query for
        all the untitled sessions of a listing."""
        untitled = [x.id for x in sessions if not x.title]
        firsts = self.mem.store.first_user_texts(untitled) if untitled else {}
        return {
            x.id: x.title or (snippet_of(" ".join(firsts[x.id].split()), "", TITLE_CHARS) if x.id in firsts else None)
            for x in sessions
        }

    def delete_session(self, session_id: str) -> bool:
        with self._audited("forget_session", session_id=self.key(session_id)) as detail:
            self.session(session_id)
            detail["messages"] = self.mem.store.count_messages(self.key(session_id))
            return self.mem.delete_session(self.key(session_id))

    def clear_session(self, session_id: str) -> int:
        self.session(session_id)
        return self.mem.clear_session(self.key(session_id))

    # ------------------------------------------------------------ messages and turns

    def save_message(self, session_id: str, message: Message | Mapping[str, Any]) -> Message:
        self.ensure_session(session_id)
        return self.mem.save_message(self.key(session_id), message)

    def add_messages(self, session_id: str, messages: Sequence[Mapping[str, Any]]) -> list[Message]:
        self.ensure_session(session_id)
        return self.mem.add_messages(self.key(session_id), messages)

    def items(self, session_id: str, limit: int | None) -> list[Message]:
        self.session(session_id)
        return self.mem.items(self.key(session_id), limit)

    def pop(self, session_id: str) -> Message | None:
        self.session(session_id)
        return self.mem.pop(self.key(session_id))

    def forget_at(self, session_id: str, index: int) -> Message | None:
        self.session(session_id)
        return self.mem.forget_at(self.key(session_id), index)

    def forget_history(self, session_id: str) -> int:
        self.session(session_id)
        return self.mem.forget_history(self.key(session_id))

    def replace_history(self, session_id: str, messages: Sequence[Mapping[str, Any]]) -> list[Message]:
        self.ensure_session(session_id)
        return self.mem.replace_history(self.key(session_id), messages)

    def store_interaction(
        self,
        query: str,
        response: str,
        metadata: Mapping[str, Any] | None = None,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        author_id: str | None = None,
        author_name: str | None = None,
        created_at: datetime | None = None,
    ) -> tuple[str, str]:
        """(turn id, session id)."""
        if session_id is None:
            active = self.list_sessions(limit=1, user_id=user_id, status="active")
            found = active[0].id if active else self.create_session(user_id=user_id).id
            session_id = found if self.caller.tenant is None else public_session_id(found)
        self.ensure_session(session_id, user_id=user_id)
        turn_id = self.mem.store_interaction(
            query, response, metadata, session_id=self.key(session_id), user_id=user_id,
            author_id=author_id, author_name=author_name, created_at=created_at,
        )
        return turn_id, session_id

    def messages(
        self, session_id: str, *, include_hidden: bool = False, max_tokens: int | None = None
    ) -> tuple[list[Message], int | None]:
        self.session(session_id)
        if max_tokens is not None:
            window = self.mem.window(self.key(session_id), max_tokens)
            return window.messages, window.tokens
        return self.mem.load_session(self.key(session_id), include_hidden=include_hidden), None

    def turns(self, session_id: str, limit: int = 50) -> list[Turn]:
        self.session(session_id)
        return self.mem.list_turns(self.key(session_id), limit=limit)

    def message(self, message_id: int) -> Message:
        msg = self.mem.get_message(message_id)
        self._session_at(msg.session_id)  # another tenant's message is "not found" too
        return msg

    def update_message(self, message_id: int, *, importance: float | None, pinned: bool | None) -> Message:
        action = "pin_message" if pinned else "unpin_message" if pinned is False else "mark_important"
        with self._audited(action, message_id=message_id) as detail:
            msg = self.message(message_id)
            detail["session_id"] = msg.session_id
            if importance is not None:
                detail["importance"] = importance
            return self.mem.store.update_message(
                message_id, importance=msg.importance if importance is None else importance, pinned=pinned
            )

    def forget_message(self, message_id: int) -> int:
        with self._audited("forget_message", message_id=message_id) as detail:
            detail["session_id"] = self.message(message_id).session_id
            return self.mem.forget_messages([message_id])

    # ------------------------------------------------------------ audit

    @contextlib.contextmanager
    def _audited(self, action: str, *, session_id: str | None = None,
                 message_id: int | None = None, note_id: int | None = None) -> Iterator[dict[str, Any]]:
        """Write one audit entry for a change made through the API: who (the key), what, the
        result. A target another tenant owns is refused as "not found" and audited as such,
        in the caller's tenant, without anything of the other tenant."""
        detail: dict[str, Any] = {}
        targets = {"message_id": message_id, "note_id": note_id}
        detail.update({k: v for k, v in targets.items() if v is not None})
        try:
            yield detail
        except NotFoundError:
            self._write_audit(action, session_id, allowed=False, result="not_found", detail=detail)
            raise
        self._write_audit(action, session_id or detail.pop("session_id", None), allowed=True, result="ok",
                          detail=detail)

    def _write_audit(self, action: str, session_id: str | None, *, allowed: bool, result: str,
                     detail: dict[str, Any]) -> None:
        detail = {k: v for k, v in detail.items() if k != "session_id"}
        actor = f"api-key:{self.caller.key_id}" if self.caller.key_id else "loopback"
        entry = AuditEntry(
            action=action, actor_id=actor, actor_name="inspector/API", is_anchor=False, allowed=allowed,
            result=result, session_id=session_id if allowed else None, tenant_id=self.caller.write_tenant,
            detail=detail if allowed else {**detail, "target": session_id} if session_id else detail,
        )
        with contextlib.suppress(InvalidInputError):  # a store without notes keeps no audit log
            self.mem.audit(entry)

    def audit_log(self, *, session_id: str | None, limit: int) -> list[AuditEntry]:
        if session_id is not None:
            self.session(session_id)
        try:
            return self.mem.audit_log(session_id=self._opt_key(session_id), tenant_id=self.caller.tenant,
                                      limit=limit)
        except InvalidInputError:
            return []

    # ------------------------------------------------------------ search and context

    def _optional(self, feature: str) -> Callable[..., Any]:
        """A Memory method other parts of memlane add; looked up per call so it works once landed."""
        method = getattr(self.mem, OPTIONAL_FEATURES[feature], None)
        if not callable(method):
            raise MissingFeatureError(feature, OPTIONAL_FEATURES[feature])
        return cast(Callable[..., Any], method)

    def search(self, query: str, *, session_id: str | None = None, tenant_id: str | None = None,
               **options: Any) -> list[SearchHit]:
        if session_id is not None:
            self.session(session_id)
        tenant = self.caller.tenant if self.caller.tenant is not None else tenant_id
        hits = self.mem.search(query, session_id=self._opt_key(session_id), tenant_id=tenant, **options)
        if self.caller.tenant is None:
            return hits
        # Belt and braces: a recall engine that ignored the tenant filter must not leak.
        return [h for h in hits if self._visible(self.mem.store.get_session(h.message.session_id))]

    def context(self, session_id: str, query: str | None, max_tokens: int, strategy: str | None) -> Any:
        self.session(session_id)
        kwargs: dict[str, Any] = {"max_tokens": max_tokens}
        if strategy is not None:
            kwargs["strategy"] = strategy
        return self._optional("context")(self.key(session_id), query, **kwargs)

    def relevant_context(self, query: str, max_tokens: int, *, session_id: str | None,
                         user_id: str | None) -> list[Message]:
        if session_id is not None:
            self.session(session_id)
        msgs: list[Message] = self._optional("relevant_context")(
            query, max_tokens, session_id=self._opt_key(session_id), user_id=user_id
        )
        if self.caller.tenant is None:
            return msgs
        # get_relevant_context has no tenant filter: drop what another tenant said.
        return [m for m in msgs if self._visible(self.mem.store.get_session(
            str(m.metadata.get("session_id") or m.session_id)))]

    def notes(self, query: str | None, *, session_id: str | None, **filters: Any) -> list[Any]:
        if session_id is not None:
            self.session(session_id)
        if self.caller.tenant is not None:
            filters["tenant_id"] = self.caller.tenant
        found: list[Any] = self._optional("notes")(query, session_id=self._opt_key(session_id), **filters)
        if self.caller.tenant is None:
            return found
        return [n for n in found if getattr(n, "tenant_id", None) == self.caller.tenant]

    def add_note(self, text: str, *, session_id: str | None, **fields: Any) -> Any:
        if session_id is not None:
            self.session(session_id)
        elif self.caller.tenant is not None:
            # A note takes its tenant from its session; without one it would land in "default".
            raise InvalidInputError("with an API key, give the session_id the note belongs to")
        return self._optional("add_note")(text, session_id=self._opt_key(session_id), **fields)

    def note_history(self, note_id: int) -> list[Any]:
        versions: list[Any] = self.mem.note_history(note_id)
        if self.caller.tenant is not None and any(getattr(n, "tenant_id", None) != self.caller.tenant for n in versions):
            raise NotFoundError(f"note {note_id} does not exist")  # another tenant's note
        return versions

    def forget_note(self, note_id: int) -> int:
        """Delete a note with all its versions (the tenant check is note_history's)."""
        with self._audited("forget_note", note_id=note_id) as detail:
            versions = self.note_history(note_id)
            if not versions:
                raise NotFoundError(f"note {note_id} does not exist")
            detail["session_id"] = versions[-1].session_id
            return self.mem.forget_note(note_id)

    def correct_note(self, note_id: int, text: str, *, value: str | None, reason: str | None) -> Any:
        """A corrected version of a current note (the old one stays in its history), audited."""
        with self._audited("correct_note", note_id=note_id) as detail:
            versions = self.note_history(note_id)
            if not versions:
                raise NotFoundError(f"note {note_id} does not exist")
            detail["session_id"] = versions[-1].session_id
            if reason:
                detail["reason"] = reason
            actor = f"api-key:{self.caller.key_id}" if self.caller.key_id else "loopback"
            note = self.mem.correct_note(note_id, text, value=value, reason=reason, corrected_by=actor)
            detail["new_note_id"] = note.id
            return note

    def explained_history(self, note_id: int) -> list[dict[str, Any]]:
        """Every version of a note, oldest first, each saying why it was superseded and by what."""
        from memlane.notes.why import explain_history

        versions = self.note_history(note_id)
        notes = self.mem.parts.notes
        return explain_history(versions, lambda i: notes.store.get_note(i) if notes is not None else None)

    def handle_command(self, session_id: str, text: str, author_id: str | None, *,
                       author_name: str | None = None) -> Any:
        self.session(session_id)  # another tenant's conversation is "not found"
        return self.mem.handle_command(self.key(session_id), text, author_id, author_name=author_name)

    def state(self, session_id: str) -> Any:
        self.session(session_id)
        return self._optional("state")(self.key(session_id))

    # ------------------------------------------------------------ session lifecycle

    def resolve_references(self, query: str, session_id: str) -> Any:
        self.session(session_id)
        return self.mem.resolve_references(query, self.key(session_id))

    def detect_topic_change(self, query: str, session_id: str) -> bool:
        self.session(session_id)
        return self.mem.detect_topic_change(query, self.key(session_id))

    def hydrate(self, session_id: str, query: str | None, max_tokens: int | None) -> Any:
        self.session(session_id)
        return self.mem.hydrate(self.key(session_id), query=query, max_tokens=max_tokens)

    def shutdown(self, session_id: str) -> dict[str, Any]:
        self.session(session_id)
        return self.mem.shutdown(self.key(session_id))

    def archive_session(self, session_id: str, reason: str | None) -> bool:
        self.session(session_id)
        return self.mem.archive_session(self.key(session_id), reason)

    def unarchive_session(self, session_id: str) -> bool:
        self.session(session_id)
        return self.mem.unarchive_session(self.key(session_id))

    def active_session_for(self, user_id: str | None, query: str | None) -> str:
        """The user's active session in the caller's tenant (expiry, cap and topic changes
        as configured), created there when there is none."""
        if self.caller.tenant is None:
            return self.mem.active_session_for(user_id, query)
        found = self.list_sessions(limit=1, user_id=user_id, status="active")
        if found:
            return found[0].id
        return self.create_session(user_id=user_id).id

    # ------------------------------------------------------------ administration (whole database)

    def _admin(self, what: str) -> None:
        if self.caller.tenant is not None:
            raise PermissionDeniedError(
                f"{what} spans every tenant: run it on the server (memlane CLI) or on a server "
                "without API keys"
            )

    def stats(self) -> dict[str, Any]:
        self._admin("stats")
        return self.mem.stats()

    def maintain(self, *, dry_run: bool) -> Any:
        self._admin("maintain")
        return self.mem.maintain(dry_run=dry_run)

    def prune_old_sessions(self, days: int) -> int:
        self._admin("prune")
        return self.mem.prune_old_sessions(days)

    def auto_expire_sessions(self) -> list[str]:
        self._admin("expiring idle sessions")
        return self.mem.auto_expire_sessions()

    # ------------------------------------------------------------ export / import

    def export_session(self, session_id: str, fmt: str = "json") -> str:
        self.session(session_id)
        return self.mem.export_session(self.key(session_id), fmt)

    def import_sessions(self, text: str, fmt: str = "json", *, on_conflict: str = "error") -> list[str]:
        fmt = "markdown" if fmt.lower() == "md" else fmt.lower()
        if fmt not in transfer.FORMATS:
            raise InvalidInputError(f"format must be one of {', '.join(transfer.FORMATS)}, got {fmt!r}")
        docs = list(transfer._documents(text, fmt))
        for doc in docs:
            raw = doc.get("session")
            if not isinstance(raw, dict):
                raise InvalidInputError("export has no 'session' object")
            doc["format"] = transfer.FORMAT
            if on_conflict == "new" or self.caller.tenant is not None:
                # turn ids are unique store-wide, not per tenant: an export of another
                # tenant's session would collide with that tenant's turns
                _fresh_turn_ids(doc)
            if self.caller.tenant is None:
                continue
            # With a key, every imported session belongs to the key's tenant (ids are per
            # tenant, so an id another tenant uses is no conflict).
            raw["tenant_id"] = self.caller.tenant
        return self.mem.import_sessions(json.dumps(docs), "json", on_conflict=on_conflict)


def _fresh_turn_ids(doc: dict[str, Any]) -> None:
    """A copy of a session (on_conflict='new') needs new turn ids too: they are unique store-wide."""
    mapping: dict[str, str] = {}
    for turn in doc.get("turns") or []:
        if isinstance(turn, dict) and turn.get("turn_id"):
            mapping[str(turn["turn_id"])] = str(uuid.uuid4())
            turn["turn_id"] = mapping[str(turn["turn_id"])]
    for msg in doc.get("messages") or []:
        if isinstance(msg, dict) and msg.get("turn_id") in mapping:
            msg["turn_id"] = mapping[msg["turn_id"]]
