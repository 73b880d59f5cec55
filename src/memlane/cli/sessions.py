"""Commands over the stored log: sessions, history, search, export, import, prune, delete, stats."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Literal

import typer
from rich.table import Table

from memlane.cli.common import STORE_OPTION, console, state
from memlane.cli.render import add_plain_row, print_message
from memlane.errors import ConflictError, InvalidInputError, SessionExistsError


def _short(text: str, width: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def sessions_cmd(
    ctx: typer.Context,
    limit: int = typer.Option(20, "--limit", "-n", min=1, help="How many sessions to show."),
    user: str | None = typer.Option(None, "--user", help="Only this user's sessions."),
    status: str | None = typer.Option(None, "--status", help="Only sessions with this status."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
    store: str | None = STORE_OPTION,
) -> None:
    """List sessions, most recently active first (with --tenant: that tenant's only)."""
    st = state(ctx, store)
    with st.open() as mem:
        found = mem.list_sessions(limit=limit, user_id=user, status=status, tenant_id=st.tenant)
    if as_json:
        print(json.dumps([{**s.to_dict(), "id": st.shown(s.id)} for s in found], ensure_ascii=False, indent=2))
        return
    table = Table("id", "title", "user", "status", "messages", "last active")
    for s in found:
        add_plain_row(
            table, st.shown(s.id), s.title or "", s.user_id or "", s.status, str(s.message_count),
            s.last_active_at.strftime("%Y-%m-%d %H:%M"),
        )
    console.print(table)


def history_cmd(
    ctx: typer.Context,
    session_id: str = typer.Argument(..., help="The session to show."),
    max_tokens: int | None = typer.Option(
        None, "--max-tokens", help="Only the newest messages that fit this many tokens."
    ),
    all_: bool = typer.Option(False, "--all", help="Include messages hidden by /clear."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON messages."),
    store: str | None = STORE_OPTION,
) -> None:
    """Show a session's messages, oldest first."""
    st = state(ctx, store)
    session_id = st.sid(session_id)
    with st.open() as mem:
        if max_tokens is not None:
            msgs = mem.get_recent_messages(session_id, max_tokens)
        else:
            msgs = mem.load_session(session_id, include_hidden=all_)
    if as_json:
        print(json.dumps([m.to_dict() for m in msgs], ensure_ascii=False, indent=2))
        return
    for m in msgs:
        who = m.author_name or m.author_id or (f"{m.role} {m.name}" if m.name else m.role)
        header = f"#{m.id or '-'}  {who} ({m.role})  {m.created_at:%Y-%m-%d %H:%M}"
        print_message(console, header=header, content=m.content, tool_calls=m.tool_calls,
                      tool_call_id=m.tool_call_id)


def search_cmd(
    ctx: typer.Context,
    query: str = typer.Argument(..., help="What to look for."),
    session_id: str | None = typer.Option(None, "--session", help="Only this session."),
    user: str | None = typer.Option(None, "--user", help="Only this user's sessions."),
    top_k: int = typer.Option(10, "--top-k", "-k", min=1, help="How many hits."),
    as_json: bool = typer.Option(False, "--json", help="Print JSON hits."),
    store: str | None = STORE_OPTION,
) -> None:
    """Search all stored conversations (with --tenant: that tenant's); shows each hit's score and its parts."""
    st = state(ctx, store)
    with st.open() as mem:
        hits = mem.search(query, session_id=None if session_id is None else st.sid(session_id), user_id=user,
                          top_k=top_k, tenant_id=st.tenant)
    if as_json:
        print(json.dumps([h.to_dict() for h in hits], ensure_ascii=False, indent=2))
        return
    table = Table("score", "parts", "session", "who", "text")
    for h in hits:
        parts = " ".join(f"{k}={v:.3f}" for k, v in h.scores.items())
        add_plain_row(
            table, f"{h.score:.3f}", parts, st.shown(h.message.session_id)[:24],
            h.message.author_name or h.message.role, _short(h.snippet or h.message.content),
        )
    console.print(table)


def export_cmd(
    ctx: typer.Context,
    session_id: str = typer.Argument(..., help="The session to export."),
    fmt: str = typer.Option("json", "--format", "-f", help="json, jsonl or markdown."),
    output: Path | None = typer.Option(None, "--output", "-o", help="File to write (default stdout)."),
    store: str | None = STORE_OPTION,
) -> None:
    """Export a session (JSON and JSONL round-trip exactly)."""
    st = state(ctx, store)
    with st.open() as mem:
        text = mem.export_session(st.sid(session_id), fmt)
    if output is None:
        sys.stdout.write(text if text.endswith("\n") else text + "\n")
    else:
        output.write_text(text, encoding="utf-8")
        console.print(f"wrote {output}")


def import_cmd(
    ctx: typer.Context,
    path: Path = typer.Argument(..., exists=True, dir_okay=False, help="An exported file."),
    fmt: str | None = typer.Option(None, "--format", "-f", help="json, jsonl or markdown (default: by extension)."),
    on_conflict: Literal["error", "skip", "replace", "new"] = typer.Option(
        "error", "--on-conflict",
        help="When a session id is already stored: error, skip it, replace it, or import as new sessions.",
    ),
    store: str | None = STORE_OPTION,
) -> None:
    """Import sessions from an export file, with a progress bar. Nothing is written if any
    part is invalid; each session is written whole, so an import stopped midway can be run
    again with --on-conflict skip. Search catches up in the background (memlane stats)."""
    chosen = fmt or {".jsonl": "jsonl", ".md": "markdown", ".markdown": "markdown"}.get(
        path.suffix.lower(), "json"
    )
    from memlane.cli.progress import progress_bar
    from memlane.transfer import import_sessions

    text = _read_utf8(path)
    with state(ctx, store).open(create=True) as mem, progress_bar() as update:
        try:
            ids = import_sessions(mem, text, chosen, on_conflict=on_conflict,
                                  progress=lambda done, total: update("messages", done, total))
        except SessionExistsError as exc:
            raise ConflictError(
                f"session {exc.session_id!r} already exists; nothing was imported. Import again with "
                "--on-conflict skip, --on-conflict replace or --on-conflict new"
            ) from exc
        except InvalidInputError as exc:
            raise InvalidInputError(f"{path}: {exc}") from exc
    console.print(f"imported {len(ids)} session(s): {', '.join(ids)}")


def _read_utf8(path: Path) -> str:
    data = path.read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"{path} is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
            f"re-export it as UTF-8, e.g. iconv -f latin1 -t utf-8 {path} > {path.stem}.utf8{path.suffix}"
        ) from exc


def prune_cmd(
    ctx: typer.Context,
    days: int | None = typer.Option(None, "--days", min=0, help="Delete sessions inactive this long (default: auto_prune_days or 30)."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    store: str | None = STORE_OPTION,
) -> None:
    """Delete sessions that have been inactive for more than N days."""
    st = state(ctx, store)
    chosen = days if days is not None else (st.settings().auto_prune_days or 30)
    with st.open() as mem:
        doomed = len(mem.inactive_sessions(chosen))
        if doomed == 0:
            console.print(f"no session has been inactive for more than {chosen} days; nothing deleted")
            return
        if not yes:
            typer.confirm(
                f"Delete {doomed} session(s) inactive for more than {chosen} days, with all their messages?",
                abort=True,
            )
        n = mem.prune_old_sessions(chosen)
    console.print(f"deleted {n} session(s)")


def delete_cmd(
    ctx: typer.Context,
    session_id: str = typer.Argument(..., help="The session to delete."),
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
    store: str | None = STORE_OPTION,
) -> None:
    """Delete a session and everything derived from it."""
    if not yes:
        typer.confirm(f"Delete session {session_id} and all its messages?", abort=True)
    st = state(ctx, store)
    with st.open() as mem:
        if not mem.delete_session(st.sid(session_id)):
            from memlane.errors import SessionNotFoundError

            raise SessionNotFoundError(session_id)
    console.print(f"deleted {session_id}")


def stats_cmd(
    ctx: typer.Context,
    as_json: bool = typer.Option(False, "--json", help="Print JSON."),
    store: str | None = STORE_OPTION,
) -> None:
    """Counts and sizes of what is stored."""
    with state(ctx, store).open() as mem:
        data = mem.stats()
    if as_json:
        print(json.dumps(data, indent=2, default=str))
        return
    table = Table("what", "value")
    for key, value in data.items():
        # a part's figures (response_cache: lookups, hits, hit_rate, saved...) one per row
        for name, item in (value.items() if isinstance(value, dict) else [(None, value)]):
            shown = f"{item:,}" if isinstance(item, int) else f"{item:,.2f}" if isinstance(item, float) else str(item)
            add_plain_row(table, key if name is None else f"{key} {name}", shown)
    console.print(table)


def register(app: typer.Typer) -> None:
    app.command("sessions")(sessions_cmd)
    app.command("history")(history_cmd)
    app.command("search")(search_cmd)
    app.command("export")(export_cmd)
    app.command("import")(import_cmd)
    app.command("prune")(prune_cmd)
    app.command("delete")(delete_cmd)
    app.command("stats")(stats_cmd)
