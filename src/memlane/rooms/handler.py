"""Running memory commands said in a conversation: Anchor-only changes, every one audited.

``mem.handle_command(session_id, text, author_id)`` returns a :class:`CommandResult`:
whether ``text`` was a memory command, which action, whether the speaker was allowed, what
changed, and a short message to show in the room (English or German, like the command).

Who may do what:

* Changing memory (forget, remember, mark important, forget-about, archive) is for the
  Anchor only. Anyone else gets a clear refusal and nothing changes.
* Asking ("what do you remember about X") is open to everyone, but only the Anchor gets
  answers from other conversations and the archive; others hear what this room knows.

Each recognised command — allowed or not — is written to the audit log first-hand: who,
what, when, the result.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memlane.bilingual import translations
from memlane.context.keyphrases import STOPWORDS, tokenize_words
from memlane.errors import MemlaneError
from memlane.language import Language, detect_language, stem
from memlane.models import Message, SearchHit, utcnow
from memlane.notes.extract import ExtractionContext
from memlane.notes.models import AuditEntry, Note, NoteCandidate
from memlane.notes.store import NoteFilter
from memlane.rooms.anchor import anchor_id, display_name, is_anchor
from memlane.rooms.commands import MUTATING_ACTIONS, Command, is_command, parse_command
from memlane.rooms.forget import forget_conversation

if TYPE_CHECKING:
    from memlane.notes.service import NotesService
    from memlane.rooms.anchor import RoomMemory

__all__ = ["CommandResult", "handle_command"]

log = logging.getLogger(__name__)

_SELF = frozenset({"me", "myself", "mich", "mir", "about me"})

_TEXT: dict[str, dict[str, str]] = {
    "refused": {
        "en": "Only {anchor} can change what I remember. Nothing was changed.",
        "de": "Nur {anchor} kann ändern, was ich mir merke. Es wurde nichts geändert.",
    },
    "forgot": {
        "en": "Done: I forgot this conversation ({messages} messages, {notes} notes).",
        "de": "Erledigt: Ich habe dieses Gespräch vergessen ({messages} Nachrichten, {notes} Notizen).",
    },
    "remembered": {
        "en": "I'll remember that: {text}",
        "de": "Ich merke mir: {text}",
    },
    "marked": {
        "en": "Marked as important: {text}",
        "de": "Als wichtig markiert: {text}",
    },
    "nothing_to_mark": {
        "en": "There is no earlier message here to remember.",
        "de": "Hier gibt es keine frühere Nachricht, die ich mir merken könnte.",
    },
    "recall_none": {
        "en": "I don't remember anything about {topic}.",
        "de": "Zu {topic} weiß ich nichts.",
    },
    "recall_head": {
        "en": "What I remember about {topic}:",
        "de": "Was ich über {topic} weiß:",
    },
    "forgot_about": {
        "en": "Done: I forgot {notes} note(s) about {topic}.",
        "de": "Erledigt: {notes} Notiz(en) über {topic} vergessen.",
    },
    "archived": {
        "en": "This conversation is now in the archive. It stays searchable.",
        "de": "Dieses Gespräch liegt jetzt im Archiv und bleibt durchsuchbar.",
    },
    "failed": {
        "en": "That did not work: {error}",
        "de": "Das hat nicht geklappt: {error}",
    },
}


def _say(key: str, lang: str, **values: object) -> str:
    return _TEXT[key].get(lang, _TEXT[key]["en"]).format(**values)


@dataclass(slots=True)
class CommandResult:
    """What came of one message checked for a memory command."""

    recognized: bool
    action: str | None = None
    allowed: bool = False
    changed: bool = False
    message: str = ""
    lang: str = "en"
    is_anchor: bool = False
    argument: str | None = None
    notes: list[Note] = field(default_factory=list)
    hits: list[SearchHit] = field(default_factory=list)
    detail: dict[str, Any] = field(default_factory=dict)
    audit_id: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "recognized": self.recognized, "action": self.action, "allowed": self.allowed,
            "changed": self.changed, "message": self.message, "lang": self.lang,
            "is_anchor": self.is_anchor, "argument": self.argument,
            "notes": [n.to_dict() for n in self.notes], "hits": [h.to_dict() for h in self.hits],
            "detail": dict(self.detail), "audit_id": self.audit_id,
        }


def _mentions(text: str, topic: str) -> bool:
    """Whether ``text`` shares a content word (by stem) with ``topic`` or with its English or
    German translation: the answer to "what do you remember about X" quotes messages about
    X ("was weißt du über Kaffee" quotes "I drink my coffee black"), not merely similar ones."""
    words = [w for w in tokenize_words(topic) if w.lower() not in STOPWORDS and len(w) > 2]
    if not words:
        return True
    lng = detect_language(topic)
    other: Language = "en" if lng == "de" else "de"
    wanted = {stem(w, lng)[:5] for w in words}
    wanted |= {stem(t, other)[:5] for w in words for t in translations(w, lng)}
    found = {stem(w, lang)[:5] for w in tokenize_words(text) for lang in ("en", "de")}
    return bool(wanted & found)


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _Runner:
    def __init__(self, mem: RoomMemory, service: NotesService, session_id: str, cmd: Command,
                 author_id: str | None, author_name: str | None, message_id: int | None) -> None:
        self.mem = mem
        self.service = service
        self.session_id = session_id
        self.cmd = cmd
        self.author_id = author_id
        self.author_name = author_name
        self.message_id = message_id
        self.anchor = anchor_id(mem.settings)
        self.is_anchor = is_anchor(author_id, self.anchor)
        self.result = CommandResult(True, cmd.action, lang=cmd.lang, is_anchor=self.is_anchor,
                                    argument=cmd.argument)

    # ------------------------------------------------------------ helpers

    def _target(self) -> Message | None:
        """The message "this" points at.

        "Remember this important point" (seed 003) is the speaker's own point when they made
        it last: their statement, even when the bot has replied to it since. When someone
        else spoke after them, or they asked a question, "this" is the newest earlier
        message that is not a command (e.g. the bot's answer to their question).
        """
        newest: Message | None = None
        for msg in self.mem.store.recent_messages(self.session_id, 20, before_id=None):
            if self.message_id is not None and (msg.id or 0) >= self.message_id:
                continue
            if msg.role in ("system", "tool") or is_command(msg.content):
                continue
            newest = newest or msg
            if msg.role == "user":  # the last person who spoke before the command
                own = bool(self.author_id) and msg.author_id == self.author_id
                return msg if own and not msg.content.rstrip().endswith("?") else newest
        return newest

    def _ctx(self) -> ExtractionContext:
        session = self.mem.get_session(self.session_id)
        return ExtractionContext(
            session_id=self.session_id, anchor_id=self.anchor, anchor_name=self.mem.settings.anchor_name,
            session_user_id=session.user_id, is_command=None,
        )

    # ------------------------------------------------------------ actions

    def forget_conversation(self) -> None:
        report = forget_conversation(self.mem, self.session_id)
        self.result.changed = True
        self.result.detail.update(report.to_dict())
        self.result.message = _say("forgot", self.cmd.lang, messages=report.messages, notes=report.notes)

    def remember(self, *, pin: bool) -> None:
        lang = self.cmd.lang
        session = self.mem.get_session(self.session_id)
        if self.cmd.argument and self.cmd.action == "remember":
            self._remember_text(self.cmd.argument, session.tenant_id)
            return
        target = self._target()
        if target is None:
            self.result.message = _say("nothing_to_mark", lang)
            return
        group = [target]
        if target.turn_id:  # "mark certain exchanges as high priority": the whole exchange
            group = [m for m in self.mem.store.recent_messages(self.session_id, 20)
                     if m.turn_id == target.turn_id] or [target]
        if pin:
            for m in group:
                self.mem.mark_important(m.id or 0, importance=1.0, pinned=True)
        speaker = "Assistant" if target.role == "assistant" else display_name(target.author_id, target.author_name)
        cand = NoteCandidate(
            text=f"{speaker}: {_short(target.content, 400)}", kind="important", user_id=self.anchor,
            source_ids=[m.id or 0 for m in group], session_id=self.session_id,
            author_id=target.author_id, author_name=target.author_name,
            slot=f"important:{target.id}", value=_short(target.content, 400), importance=1.0,
            valid_from=target.created_at, origin="command",
        )
        outcome = self.service.gate.write_if_worthy(cand, tenant_id=session.tenant_id, force=True)
        if outcome.note is not None:
            self.result.notes.append(outcome.note)
        self.result.changed = True
        self.result.detail["message_ids"] = [m.id for m in group]
        key = "remembered" if self.cmd.action == "remember" else "marked"
        self.result.message = _say(key, lang, text=_short(target.content, 120))

    def _remember_text(self, text: str, tenant_id: str) -> None:
        sources = [self.message_id] if self.message_id is not None else []
        if sources and not self.mem.store.get_messages(sources):
            sources = []
        speaker = Message(role="user", content=text, id=self.message_id or 0, author_id=self.author_id,
                          author_name=self.author_name, session_id=self.session_id)
        # A structured statement ("remember that I hate meetings on Mondays") becomes the
        # same note the gate would make, so it merges and supersedes like any other.
        cands = [c for c in self.service.promoter.extractor.extract([speaker], self._ctx()) if c.importance > 0.3]
        if not cands:
            name = display_name(self.author_id, self.author_name or self.mem.settings.anchor_name)
            body = text.strip().rstrip(".") + "."
            cands = [NoteCandidate(
                text=f"{name} asked me to remember: {body}", kind="important", user_id=self.anchor,
                source_ids=[], session_id=self.session_id, author_id=self.author_id,
                author_name=self.author_name, slot=f"important:{' '.join(body.lower().split())[:200]}",
                value=body, importance=1.0,
            )]
        for c in cands:
            c.source_ids = list(sources)
            c.importance = max(c.importance, 0.9)
            c.origin = "command"
            c.valid_from = utcnow()
            outcome = self.service.gate.write_if_worthy(c, tenant_id=tenant_id, force=True)
            if outcome.note is not None:
                self.result.notes.append(outcome.note)
        self.result.changed = bool(self.result.notes)
        self.result.message = _say("remembered", self.cmd.lang, text=_short(text, 120))

    def recall(self) -> None:
        lang = self.cmd.lang
        topic = (self.cmd.argument or "").strip()
        session = self.mem.get_session(self.session_id)
        self.service.promoter.catch_up(self.session_id)
        flt = NoteFilter(tenant_id=session.tenant_id, visible_in=self.session_id,
                         anchor_id=self.anchor if self.is_anchor else None)
        notes: list[Note]
        if not topic or topic.lower() in _SELF:
            about = self.author_id or self.anchor
            flt.user_id = about if topic else None
            notes = self.service.store.list_notes(flt, limit=10)
            topic_text = topic or ("alles" if lang == "de" else "anything")
        else:
            notes = [n for n, _ in self.service.store.search_notes(topic, flt, limit=8)]
            topic_text = topic
        hits: list[SearchHit] = []
        if topic and topic.lower() not in _SELF:
            try:
                # The Anchor searches every conversation (the archive included); others this room.
                hits = self.mem.search(
                    topic, top_k=5, session_id=None if self.is_anchor else self.session_id,
                    tenant_id=session.tenant_id,
                )
            except MemlaneError as exc:
                log.warning("recall search failed: %s", exc)
            hits = [h for h in hits if not is_command(h.message.content) and _mentions(h.message.content, topic)]
        self.result.notes, self.result.hits = notes, hits
        if not notes and not hits:
            self.result.message = _say("recall_none", lang, topic=topic_text)
            return
        lines = [_say("recall_head", lang, topic=topic_text)]
        lines += [f"- {n.text}" for n in notes]
        for h in hits[: max(0, 8 - len(notes))]:
            m = h.message
            name = m.author_name or (self.mem.settings.anchor_name if is_anchor(m.author_id, self.anchor) else None)
            who = "Assistant" if m.role == "assistant" else display_name(m.author_id, name)
            when = h.message.created_at.strftime("%Y-%m-%d")
            lines.append(f"- {when} {who}: {_short(h.message.content, 140)}")
        self.result.message = "\n".join(lines)

    def forget_about(self) -> None:
        topic = (self.cmd.argument or "").strip()
        session = self.mem.get_session(self.session_id)
        flt = NoteFilter(tenant_id=session.tenant_id, visible_in=self.session_id, anchor_id=self.anchor,
                         current_only=False)
        found = [n for n, _ in self.service.store.search_notes(topic, flt, limit=100)] if topic else []
        ids: set[int] = set()
        for n in found:
            ids.update(v.id or 0 for v in self.service.store.history(n.id or 0))
        deleted = self.mem.erase(note_ids=sorted(ids)).notes if ids else 0
        self.result.changed = deleted > 0
        self.result.detail["notes"] = deleted
        self.result.message = _say("forgot_about", self.cmd.lang, notes=deleted, topic=topic)

    def archive(self) -> None:
        self.result.changed = self.service.store.archive_session(self.session_id, "archived by command")
        self.result.message = _say("archived", self.cmd.lang)


def handle_command(
    mem: RoomMemory,
    service: NotesService,
    session_id: str,
    text: str,
    author_id: str | None = None,
    *,
    author_name: str | None = None,
    message_id: int | None = None,
) -> CommandResult:
    """Recognise and run a memory command; an ordinary message returns ``recognized=False``."""
    cmd = parse_command(text)
    if cmd is None:
        return CommandResult(False)
    session = mem.ensure_session(session_id)  # a command may be the first word in a new room
    run = _Runner(mem, service, session_id, cmd, author_id, author_name, message_id)
    res = run.result
    if cmd.action in MUTATING_ACTIONS and not run.is_anchor:
        res.allowed = False
        who = display_name(run.anchor, mem.settings.anchor_name) if mem.settings.anchor_name else "the Anchor"
        if cmd.lang == "de" and not mem.settings.anchor_name:
            who = "der Anchor"
        res.message = _say("refused", cmd.lang, anchor=who)
        outcome = "refused"
    else:
        res.allowed = True
        try:
            if cmd.action == "forget_conversation":
                run.forget_conversation()
            elif cmd.action == "remember":
                run.remember(pin=cmd.argument is None)
            elif cmd.action == "mark_important":
                run.remember(pin=True)
            elif cmd.action == "recall":
                run.recall()
            elif cmd.action == "forget_about":
                run.forget_about()
            elif cmd.action == "archive":
                run.archive()
            outcome = "ok" if res.changed or cmd.action == "recall" else "no_change"
        except MemlaneError as exc:
            log.warning("memory command %s failed: %s", cmd.action, exc)
            res.message = _say("failed", cmd.lang, error=exc)
            outcome = "failed"
            res.detail["error"] = str(exc)
    detail = {k: v for k, v in res.detail.items() if k != "session_id"}
    if res.notes:
        detail["note_ids"] = [n.id for n in res.notes]
    if cmd.action == "recall":
        detail["found"] = {"notes": len(res.notes), "messages": len(res.hits)}
    entry = service.store.append_audit(AuditEntry(
        action=cmd.action, actor_id=author_id, actor_name=author_name, is_anchor=run.is_anchor,
        allowed=res.allowed, result=outcome, session_id=session_id, command=text[:2000],
        tenant_id=session.tenant_id, detail=detail,
    ))
    res.audit_id = entry.id
    return res
