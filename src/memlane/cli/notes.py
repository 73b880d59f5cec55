"""Commands for long-term notes, memory commands, the archive tier, lifecycle and backups.

``memlane notes list|add|history|correct|facets|forget|promote``, ``memlane audit``, ``memlane say``
(run a memory command as someone), ``memlane maintain``, ``memlane archive``,
``memlane restore-archive``, ``memlane backup``, ``memlane restore``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.table import Table

from memlane.cli.common import STORE_OPTION, CliState, console, state
from memlane.cli.render import add_plain_row
from memlane.config import Settings
from memlane.errors import InvalidInputError, NotFoundError, PermissionDeniedError
from memlane.notes.extract import UNKNOWN_SPEAKER
from memlane.notes.models import AuditEntry, Note
from memlane.rooms.anchor import anchor_id, display_name

notes_app = typer.Typer(help="Long-term notes: what memlane distilled from conversations.", no_args_is_help=True)


def _short(text: str, width: int = 70) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _who(note: Note, anchor: str, anchor_name: str | None) -> str:
    """Whom a note is about: the Anchor (with their name when known), or the person, by name
    when the message named them. "The user" (no name was known) is never shown."""
    named = note.author_name if note.author_name and note.author_name != UNKNOWN_SPEAKER else None
    about = note.user_id
    if about and about == anchor:
        name = anchor_name or named
        return f"Anchor ({name})" if name else "Anchor"
    if not about:
        return named or ""
    person = display_name(about)
    if named is None:
        return person
    return named if named.casefold() == person.casefold() else f"{named} ({person})"


def _shown(st: CliState, record: Any) -> dict[str, Any]:
    """A note's, facet's or audit entry's dict with its session id as --tenant shows ids."""
    out: dict[str, Any] = record.to_dict()
    if out.get("session_id"):
        out["session_id"] = st.shown(out["session_id"])
    return out


def _own_versions(st: CliState, versions: list[Note], note_id: int) -> list[Note]:
    """With --tenant, a note of another tenant does not exist (as over REST with a key)."""
    if st.tenant is not None and any(n.tenant_id != st.tenant for n in versions):
        raise NotFoundError(f"note {note_id} does not exist in tenant {st.tenant!r}")
    return versions


def _print_notes(found: list[Any], as_json: bool, settings: Settings, st: CliState) -> None:
    if as_json:
        print(json.dumps([_shown(st, n) for n in found], ensure_ascii=False, indent=2))
        return
    anchor, anchor_name = anchor_id(settings), settings.anchor_name
    table = Table("id", "kind", "about", "note", "importance", "valid from", "valid to", "sources")
    for n in found:
        add_plain_row(
            table, str(n.id), n.kind, _who(n, anchor, anchor_name), _short(n.text),
            f"{n.importance:.2f}", n.valid_from.strftime("%Y-%m-%d %H:%M"),
            n.valid_to.strftime("%Y-%m-%d %H:%M") if n.valid_to else "now",
            ",".join(str(i) for i in n.source_ids),
        )
    console.print(table)


@notes_app.command("list")
def notes_list(
    ctx: typer.Context,
    query: str | None = typer.Argument(None, help="Only notes matching these words."),
    session_id: str | None = typer.Option(None, "--session", help="What this conversation sees (its notes and the Anchor's)."),
    user: str | None = typer.Option(None, "--user", help="Only notes of this person."),
    kind: str | None = typer.Option(None, "--kind", help="preference, fact, decision, commitment, link, important."),
    history: bool = typer.Option(False, "--history", help="Include superseded versions."),
    limit: int = typer.Option(50, "--limit", "-n", min=1),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    store: str | None = STORE_OPTION,
) -> None:
    """List long-term notes, the most important first (with --tenant: that tenant's only)."""
    st = state(ctx, store)
    with st.open() as mem:
        found = mem.notes(query, session_id=st.sid(session_id) if session_id else None, user_id=user,
                          kind=kind, tenant_id=st.tenant, include_history=history, limit=limit)
    _print_notes(found, as_json, mem.settings, st)


@notes_app.command("add")
def notes_add(
    ctx: typer.Context,
    text: str = typer.Argument(..., help="The note, as a sentence."),
    kind: str = typer.Option("fact", "--kind", help="preference, fact, decision, commitment, link, important."),
    user: str | None = typer.Option(None, "--user", help="Whose note (default: the Anchor, shared everywhere)."),
    session_id: str | None = typer.Option(None, "--session", help="The conversation it belongs to."),
    slot: str | None = typer.Option(None, "--slot", help="What it states, e.g. pref:coffee; a newer note in the slot supersedes it."),
    importance: float = typer.Option(0.8, "--importance", min=0.0, max=1.0),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    store: str | None = STORE_OPTION,
) -> None:
    """Write a note yourself (with --tenant, into that tenant's --session)."""
    st = state(ctx, store)
    if st.tenant is not None and session_id is None:
        # a note takes its tenant from its session; without one it would land in "default"
        raise InvalidInputError("with --tenant, give the --session the note belongs to")
    with st.open(create=True) as mem:
        note = mem.add_note(text, kind=kind, user_id=user, session_id=st.sid(session_id) if session_id else None,
                            slot=slot, importance=importance)
    if as_json:
        print(json.dumps(_shown(st, note), ensure_ascii=False, indent=2))
    else:
        console.print(f"note {note.id}: {note.text}", highlight=False, markup=False)


@notes_app.command("history")
def notes_history(
    ctx: typer.Context,
    note_id: int = typer.Argument(..., help="Any version's id."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    store: str | None = STORE_OPTION,
) -> None:
    """How a note changed: every version, oldest first, and why each was superseded."""
    from memlane.notes.why import explain_history

    st = state(ctx, store)
    with st.open() as mem:
        versions = _own_versions(st, mem.note_history(note_id), note_id)
        notes = mem.parts.notes
        explained = explain_history(versions, lambda i: notes.store.get_note(i) if notes is not None else None)
    if as_json:
        print(json.dumps(explained, ensure_ascii=False, indent=2))
        return
    _print_notes(versions, False, mem.settings, st)
    for item in explained:
        if item["superseded_why"]:
            console.print(f"{item['id']} → {item['superseded_by'] or '-'}: {item['superseded_why']}",
                          highlight=False, markup=False)


@notes_app.command("correct")
def notes_correct(
    ctx: typer.Context,
    note_id: int = typer.Argument(..., help="The current version of the note."),
    text: str = typer.Argument(..., help="What the note should say instead."),
    value: str | None = typer.Option(None, "--value", help="The slot's new value (default: kept, or the text)."),
    reason: str | None = typer.Option(None, "--reason", help="Why: shown in its history and the audit log."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    store: str | None = STORE_OPTION,
) -> None:
    """Correct a note: a new version supersedes it; the old one stays in its history."""
    st = state(ctx, store)
    with st.open() as mem:
        _own_versions(st, mem.note_history(note_id), note_id)
        note = mem.correct_note(note_id, text, value=value, reason=reason, corrected_by="cli")
        detail = {"note_id": note_id, "new_note_id": note.id, **({"reason": reason} if reason else {})}
        mem.audit(AuditEntry(action="correct_note", actor_id="cli", actor_name="memlane CLI", is_anchor=False,
                             allowed=True, result="ok", session_id=note.session_id, tenant_id=note.tenant_id,
                             detail=detail))
    if as_json:
        print(json.dumps(_shown(st, note), ensure_ascii=False, indent=2))
    else:
        console.print(f"note {note.id} now says: {note.text} (was note {note_id})", highlight=False, markup=False)


@notes_app.command("facets")
def notes_facets(
    ctx: typer.Context,
    session_id: str | None = typer.Option(None, "--session", help="Only this conversation."),
    kind: str | None = typer.Option(
        None, "--kind", help="entity (named people, places, things), link (URLs), time (dates), "
        "action (tool calls and their results)."),
    value: str | None = typer.Option(None, "--value", help="Only this exact value, e.g. a name or URL."),
    limit: int = typer.Option(200, "--limit", "-n", min=1),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    store: str | None = STORE_OPTION,
) -> None:
    """What was tracked beside the dialogue: entities, links, dates and system actions
    (with --tenant: in that tenant's conversations only)."""
    from memlane.scoping import tenant_of_key

    st = state(ctx, store)
    with st.open() as mem:
        found = mem.facets(st.sid(session_id) if session_id else None, kind, value=value, limit=limit)
    if st.tenant is not None:
        found = [f for f in found if tenant_of_key(f.session_id) == st.tenant]
    if as_json:
        print(json.dumps([_shown(st, f) for f in found], ensure_ascii=False, indent=2))
        return
    table = Table("when", "conversation", "message", "kind", "value")
    for f in found:
        add_plain_row(table, f.at.strftime("%Y-%m-%d %H:%M"), st.shown(f.session_id), str(f.message_id), f.kind,
                      _short(f.value))
    console.print(table)


@notes_app.command("forget")
def notes_forget(
    ctx: typer.Context,
    note_id: int = typer.Argument(..., help="The note to delete, with all its versions."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    store: str | None = STORE_OPTION,
) -> None:
    """Delete a note and every version of it."""
    if not yes:
        typer.confirm(f"Delete note {note_id} and its history?", abort=True)
    st = state(ctx, store)
    with st.open() as mem:
        _own_versions(st, mem.note_history(note_id), note_id)
        n = mem.parts.notes.forget_note(note_id) if mem.parts.notes is not None else 0
    console.print(f"deleted {n} note version(s)")


@notes_app.command("promote")
def notes_promote(
    ctx: typer.Context,
    session_id: str | None = typer.Option(None, "--session", help="Only this conversation (default: all)."),
    store: str | None = STORE_OPTION,
) -> None:
    """Run the promotion gate now over messages it has not read yet."""
    st = state(ctx, store)
    session_id = st.sid(session_id) if session_id else None
    with st.open() as mem:
        service = mem.parts.notes
        if service is None:
            raise InvalidInputError(f"store {mem.store.url} keeps no notes")
        if session_id is None:
            done = service.promoter.catch_up_all()
            console.print(f"promoted {done} conversation(s)")
        else:
            outcomes = service.promoter.catch_up(session_id)
            counts: dict[str, int] = {}
            for o in outcomes:
                counts[o.action] = counts.get(o.action, 0) + 1
            console.print(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "nothing new")


def audit_cmd(
    ctx: typer.Context,
    session_id: str | None = typer.Option(None, "--session", help="Only this conversation."),
    limit: int = typer.Option(50, "--limit", "-n", min=1),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    store: str | None = STORE_OPTION,
) -> None:
    """The audit log of memory commands: who asked what, when, and the result (with
    --tenant: that tenant's entries only)."""
    st = state(ctx, store)
    with st.open() as mem:
        entries = mem.audit_log(session_id=st.sid(session_id) if session_id else None, tenant_id=st.tenant,
                                limit=limit)
    if as_json:
        print(json.dumps([_shown(st, e) for e in entries], ensure_ascii=False, indent=2))
        return
    table = Table("when", "who", "anchor", "action", "allowed", "result", "conversation", "command")
    for e in entries:
        add_plain_row(
            table, e.at.strftime("%Y-%m-%d %H:%M:%S"), e.actor_name or e.actor_id or "", "yes" if e.is_anchor else "no",
            e.action, "yes" if e.allowed else "no", e.result, st.shown(e.session_id) if e.session_id else "",
            _short(e.command or "", 40),
        )
    console.print(table)


def say_cmd(
    ctx: typer.Context,
    text: str = typer.Argument(..., help='A memory command, e.g. "forget this conversation" or "merk dir das".'),
    session_id: str | None = typer.Option(None, "--session", help="The conversation (default: the CLI conversation)."),
    author: str | None = typer.Option(None, "--as", help="Who says it (default: the Anchor)."),
    name: str | None = typer.Option(None, "--name", help="Their display name."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    store: str | None = STORE_OPTION,
) -> None:
    """Run a memory command as it would be said in a conversation."""
    with state(ctx, store).open(create=True) as mem:
        sid = session_id or mem.settings.cli_session_id
        mem.ensure_session(sid)
        result = mem.handle_command(sid, text, author or mem.anchor_id,
                                    author_name=name or (mem.settings.anchor_name if author is None else None))
    if as_json:
        print(json.dumps(result.to_dict(), ensure_ascii=False, indent=2, default=str))
        return
    if not result.recognized:
        raise InvalidInputError(
            f"{text!r} is not a memory command; try 'forget this conversation', 'remember this: ...', "
            "'what do you remember about X', 'merk dir das' or 'vergiss dieses Gespräch'"
        )
    if not result.allowed:
        raise PermissionDeniedError(result.message)
    console.print(result.message, highlight=False, markup=False)


def maintain_cmd(
    ctx: typer.Context,
    dry_run: bool = typer.Option(False, "--dry-run", help="Only report what would change."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    store: str | None = STORE_OPTION,
) -> None:
    """Apply the lifecycle limits: archive inactive conversations, prune, trim long ones."""
    with state(ctx, store).open() as mem:
        report = mem.maintain(dry_run=dry_run)
    data = report.to_dict()
    if as_json:
        print(json.dumps(data, indent=2))
        return
    verb = "would " if dry_run else ""
    console.print(f"promoted backlog of {data['promoted_sessions']} conversation(s)")
    console.print(f"{verb}archive {len(data['archived'])}, {verb}prune {len(data['pruned_inactive'])} inactive "
                  f"and {len(data['pruned_over_limit'])} over the limit, {verb}trim "
                  f"{sum(data['trimmed_messages'].values())} message(s) in {len(data['trimmed_messages'])} conversation(s)")
    if not dry_run:
        console.print(f"pruned {data['pruned_events']} change event(s) past retention from the outbox")


def archive_cmd(
    ctx: typer.Context,
    session_ids: list[str] = typer.Argument(None, help="Conversations to archive (none: list the archive)."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    store: str | None = STORE_OPTION,
) -> None:
    """Move conversations to the archive tier (out of context, still searchable), or list it."""
    with state(ctx, store).open() as mem:
        if session_ids:
            for sid in session_ids:
                done = mem.archive_session(sid, "archived from the CLI")
                console.print(f"{sid}: {'archived' if done else 'already archived'}", markup=False)
            return
        service = mem.parts.notes
        rows = service.store.archived_sessions() if service is not None else []
    if as_json:
        print(json.dumps([{"session_id": s, "archived_at": t.isoformat(), "reason": r} for s, t, r in rows], indent=2))
        return
    table = Table("conversation", "archived", "reason")
    for sid, at, reason in rows:
        add_plain_row(table, sid, at.strftime("%Y-%m-%d %H:%M"), reason or "")
    console.print(table)


def restore_archive_cmd(
    ctx: typer.Context,
    session_ids: list[str] = typer.Argument(..., help="Archived conversations to bring back."),
    store: str | None = STORE_OPTION,
) -> None:
    """Bring archived conversations back into the active tier."""
    with state(ctx, store).open() as mem:
        for sid in session_ids:
            done = mem.unarchive_session(sid)
            console.print(f"{sid}: {'restored' if done else 'was not archived'}", markup=False)


def _sqlite_path(mem: Any) -> str:
    path = getattr(mem.store, "path", None)
    if not isinstance(path, str) or path == ":memory:":
        raise InvalidInputError(
            "backup and restore work on a SQLite file; for PostgreSQL use pg_dump/pg_restore"
        )
    return path


def backup_cmd(
    ctx: typer.Context,
    dest: Path = typer.Argument(..., help="The backup file to write."),
    force: bool = typer.Option(False, "--force", help="Overwrite an existing file."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    store: str | None = STORE_OPTION,
) -> None:
    """Back up the database while it is in use (SQLite online backup, checked)."""
    from memlane.rooms.backup import backup_database

    st = state(ctx, store)
    with st.open() as mem:
        src = _sqlite_path(mem)
    report = backup_database(src, dest, overwrite=force, key=st.key())
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
        return
    console.print(f"backed up {report.sessions} conversation(s), {report.messages} message(s) to "
                  f"{report.path} ({report.bytes:,} bytes, integrity {report.integrity})", highlight=False)


def restore_cmd(
    ctx: typer.Context,
    backup: Path = typer.Argument(..., exists=True, dir_okay=False, help="A file written by memlane backup."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    store: str | None = STORE_OPTION,
) -> None:
    """Replace the database with a backup (the backup is checked first)."""
    from memlane.rooms.backup import check_database, restore_database
    from memlane.store import local_file

    st = state(ctx, store)
    target = local_file(st.url())
    if target is None:
        raise InvalidInputError("restore works on a SQLite file; for PostgreSQL use pg_restore")
    info = check_database(backup, st.key())
    if not yes:
        typer.confirm(
            f"Replace {target} with {backup} ({info.sessions} conversations, {info.messages} messages)?",
            abort=True,
        )
    report = restore_database(backup, target, st.key())
    if as_json:
        print(json.dumps(report.to_dict(), indent=2))
        return
    console.print(f"restored {report.sessions} conversation(s), {report.messages} message(s) into "
                  f"{report.path} (integrity {report.integrity})", highlight=False)


def register(app: typer.Typer) -> None:
    app.add_typer(notes_app, name="notes")
    app.command("audit")(audit_cmd)
    app.command("say")(say_cmd)
    app.command("maintain")(maintain_cmd)
    app.command("archive")(archive_cmd)
    app.command("restore-archive")(restore_archive_cmd)
    app.command("backup")(backup_cmd)
    app.command("restore")(restore_cmd)
