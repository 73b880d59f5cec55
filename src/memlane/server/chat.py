"""`memlane chat`: a REPL that talks to any OpenAI-compatible model with memlane as its memory.

Each turn: the context packet for the user's message (``mem.context``; the
recent window on builds without a context engine) plus the message goes to
``{llm_base_url}/chat/completions``; the user's message and the reply are then
stored as one turn. The REPL works the same on a local :class:`Memory` and on
a :class:`~memlane.client.MemoryClient` (``--server``).

The person at the terminal is the Anchor (seed 003): their messages carry the CLI
author (:func:`~memlane.rooms.anchor.cli_author`), the REPL continues the CLI's default
conversation (``settings.cli_session_id``, the one ``memlane say`` uses) unless told
otherwise, and what they type is first checked for a memory command ("merk dir das",
"forget this conversation"), which runs through ``mem.handle_command`` — Anchor check
and audit entry included — instead of going to the model. ``/forget`` takes the same path.

It lives with the server because both are memlane's user-facing surface; it
has no server dependency beyond httpx (and prompt_toolkit on a terminal).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
from rich.console import Console
from rich.markup import escape

from memlane.cli.render import tool_call_text
from memlane.config import Settings, load_settings
from memlane.errors import MemlaneError, SessionNotFoundError
from memlane.rooms.anchor import cli_author
from memlane.rooms.commands import parse_command

DEFAULT_BASE_URL = "http://localhost:11434/v1"  # Ollama's OpenAI-compatible endpoint
DEFAULT_MODEL = "llama3.2"
DEFAULT_SYSTEM = "You are a helpful assistant. Use the conversation memory you are given."

HELP = """\
Commands:
  /sessions            list recent sessions
  /load <session>      continue a previous session (id or id prefix)
  /new [title]         start a new session (default: the CLI conversation)
  /save                make sure everything is on disk (every turn is already saved)
  /history [n]         show the last n messages of this session (default 20)
  /clear               hide this session's history from context (it stays stored)
  /forget              forget this session and everything derived from it (audited)
  /search <query>      search all conversations, with score parts
  /context [query]     show the context packet the model would get
  /remember <text>     keep a long-term note (or a pinned message)
  /help                this help
  /quit                leave (Ctrl-D works too)
Memory commands work as plain text too when said as orders ("remember this: X",
"merk dir das", "search your memory for X", "forget this conversation"); they change
memory, not the model. Anything else, questions about the past included ("what did we
decide about X?"), goes to the model with the context packet (recalled messages too)."""

#: what these commands would change, said instead of doing it under --dry-run
DRY_RUN_SKIPS = {
    "remember": "would keep a long-term note: {arg}",
    "clear": "would hide the history of session {session} from context",
    "new": "would start a new session",
}


class ModelUnavailableError(MemlaneError):
    """No chat model answered; the message says how to configure one."""


def _configure_hint(base_url: str, model: str) -> str:
    return (
        f"No model answered at {base_url} (model {model!r}).\n"
        "To configure one:\n"
        "  - Ollama: install it, then `ollama serve` and `ollama pull llama3.2`, or\n"
        "  - any OpenAI-compatible endpoint: set llm_base_url and llm_model in ~/.memlane/config.yaml\n"
        "    (or MEMLANE_LLM_BASE_URL / MEMLANE_LLM_MODEL, or --base-url / --model), and put the API key\n"
        "    in the variable named by llm_api_key_env (default OPENAI_API_KEY).\n"
        "  - or run `memlane chat --dry-run` to see the context packet without a model."
    )


class ChatModel:
    """A minimal OpenAI chat-completions client (non-streaming)."""

    def __init__(self, base_url: str, model: str, api_key: str | None = None, timeout: float = 120.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(headers=headers, timeout=timeout)

    def close(self) -> None:
        self._http.close()

    def complete(self, messages: list[dict[str, Any]]) -> str:
        url = f"{self.base_url}/chat/completions"
        try:
            response = self._http.post(url, json={"model": self.model, "messages": messages, "stream": False})
        except httpx.HTTPError as exc:
            raise ModelUnavailableError(f"{_configure_hint(self.base_url, self.model)}\n({exc})") from exc
        if response.status_code >= 400:
            detail = response.text[:300].strip()
            raise ModelUnavailableError(
                f"{_configure_hint(self.base_url, self.model)}\n(HTTP {response.status_code}: {detail})"
            )
        try:
            content = response.json()["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            raise ModelUnavailableError(
                f"{self.base_url} answered, but not in the chat-completions format: {response.text[:300]}"
            ) from exc
        return str(content or "")


def _short(text: str, width: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


class ChatRepl:
    def __init__(
        self,
        mem: Any,
        *,
        model: ChatModel | None,
        console: Console,
        session_id: str | None = None,
        user: str | None = None,
        system_prompt: str = DEFAULT_SYSTEM,
        max_tokens: int = 3000,
        strategy: str | None = None,
        dry_run: bool = False,
        use_cache: bool | None = None,
    ) -> None:
        self.mem = mem
        self.model = model
        self.out = console
        settings = mem.settings if isinstance(getattr(mem, "settings", None), Settings) else load_settings()
        # The terminal's user is the Anchor: messages carry the Anchor's id, so the rooms'
        # rules (who may change memory, whose notes are shared) hold here too. ``user`` only
        # names them when no anchor_name is configured.
        self.author_id, anchor_name = cli_author(settings)
        self.user = user or anchor_name or self.author_id
        self.cli_session_id = settings.cli_session_id
        self.system_prompt = system_prompt
        self.max_tokens = max_tokens
        self.strategy = strategy
        self.dry_run = dry_run
        # The response cache answers a question asked again in the same context (settings:
        # response_cache); a client of an older server without it simply never hits.
        self.use_cache = (settings.response_cache if use_cache is None else use_cache) \
            and callable(getattr(mem, "cached_response", None))
        self.last_query: str | None = None
        self.last_packet: Any = None
        self.session_id = self._start(session_id)
        self.commands: dict[str, Callable[[str], None]] = {
            # markup off: "[title]", "[n]", "[query]" are literal text, not rich style tags
            "help": lambda _: self.out.print(HELP, highlight=False, markup=False),
            "sessions": self.cmd_sessions, "load": self.cmd_load, "new": self.cmd_new, "save": self.cmd_save,
            "history": self.cmd_history, "clear": self.cmd_clear, "search": self.cmd_search,
            "context": self.cmd_context, "remember": self.cmd_remember,
        }

    # ------------------------------------------------------------ session

    def _start(self, session_id: str | None) -> str:
        # Without --session the REPL is the CLI conversation, shared with `memlane say`.
        session_id = session_id or self.cli_session_id
        try:
            self.mem.get_session(session_id)
        except SessionNotFoundError:
            if self.dry_run:
                self.out.print(f"dry run: session {escape(session_id)} does not exist and is not created")
            else:
                self.mem.create_session(self.system_prompt, session_id=session_id, user_id=self.author_id)
        return session_id

    def _new_session(self, title: str | None) -> str:
        title = title or f"chat {datetime.now():%Y-%m-%d %H:%M}"
        sid: str = self.mem.create_session(self.system_prompt, user_id=self.author_id, title=title)
        return sid

    def memory_command(self, text: str) -> Any | None:
        """Run ``text`` as a memory command when it is one; else None (send it to the model).

        Local memory and a server (``MemoryClient.handle_command``) take the same path: the
        Anchor check and the audit entry happen where the memory lives.
        """
        handle = getattr(self.mem, "handle_command", None)
        if not callable(handle):
            return None
        parsed = parse_command(text)
        # Only orders change or search memory here; a question ("what did we decide about
        # X?", "was weißt du über Y?") goes to the model, with recalled context in the packet.
        if parsed is None or parsed.question:
            return None
        result = handle(self.session_id, text, self.author_id, author_name=self.user)
        return result if result.recognized else None

    # ------------------------------------------------------------ the loop

    def banner(self) -> None:
        target = "dry run: the packet is shown, no model is called, messages are not stored" if self.dry_run else (
            f"model {self.model.model} at {self.model.base_url}" if self.model else "no model")
        self.out.print(f"memlane chat · session [bold]{escape(self.session_id)}[/bold] · {escape(target)}",
                       highlight=False)
        self.out.print("Type /help for commands.", style="dim", highlight=False)

    def run(self, lines: Iterable[str]) -> None:
        self.banner()
        lines = iter(lines)  # /forget reads its confirmation from the same stream
        for raw in lines:
            line = raw.strip()
            if not line:
                continue
            try:
                if not self.handle(line, lines):
                    break
            except MemlaneError as exc:
                self.out.print(f"[red]error:[/red] {escape(str(exc))}")
        self.mem.flush(10)
        self.out.print(f"bye. session {escape(self.session_id)} is saved.")

    def handle(self, line: str, lines: Iterable[str] = ()) -> bool:
        if not line.startswith("/"):
            self.turn(line)
            return True
        name, _, arg = line[1:].partition(" ")
        name, arg = name.lower(), arg.strip()
        if name in ("quit", "exit", "q"):
            return False
        if name == "forget":
            return self.cmd_forget(arg, lines)
        if self.dry_run and name in DRY_RUN_SKIPS:
            would = DRY_RUN_SKIPS[name].format(session=self.session_id, arg=arg)
            self.out.print(f"dry run: {would}; memory is unchanged", highlight=False, markup=False)
            return True
        command = self.commands.get(name)
        if command is None:
            self.out.print(f"unknown command /{escape(name)}; /help lists them")
        else:
            command(arg)
        return True

    # ------------------------------------------------------------ turns

    def packet_messages(self, query: str | None) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """The messages the model would get before the user's message, and the budget report."""
        context = getattr(self.mem, "context", None)
        if self.dry_run and not self._session_exists():
            return [{"role": "system", "content": self.system_prompt}], None  # what a new session would send
        if callable(context):
            packet = context(self.session_id, query, self.max_tokens, strategy=self.strategy)
            self.last_packet = packet
            messages = list(packet.to_messages())  # renders the packet, which records its budget
            budget = getattr(packet, "budget", None)
            report = budget if isinstance(budget, dict) else getattr(budget, "to_dict", lambda: None)()
            return messages, report
        recent = self.mem.get_recent_messages(self.session_id, self.max_tokens)
        return [m.to_openai() for m in recent], None

    def turn(self, text: str) -> None:
        if not self.dry_run:
            result = self.memory_command(text)
            if result is not None:
                colour = "green" if result.allowed else "red"
                self.out.print(f"[{colour}]memory[/{colour}]: {escape(result.message)}", highlight=False)
                return
        self.last_query = text
        history, report = self.packet_messages(text)
        messages = [*history, {"role": "user", "content": text}]
        if self.dry_run or self.model is None:
            self.show_packet(messages, report, title="packet (dry run: no model called, message not stored)")
            return
        started = time.perf_counter()
        question = self._resolved(text)
        hit = self._cached(question)
        if hit is not None:
            elapsed = time.perf_counter() - started
            self._store(text, hit.response, elapsed, {"response_cache": hit.match})
            saved = f", saved {hit.entry.cost_seconds:.1f} s of model time" if hit.entry.cost_seconds else ""
            self.out.print(f"[bold green]assistant[/bold green]: {escape(hit.response)}")
            self.out.print(f"(from the response cache: {hit.match} match{saved})", style="dim", highlight=False)
            return
        try:
            reply = self.model.complete(messages)
        except ModelUnavailableError as exc:
            self.out.print(f"[yellow]{escape(str(exc))}[/yellow]")
            self.out.print("Nothing was stored for this message.", style="dim")
            return
        elapsed = time.perf_counter() - started
        self._store(text, reply, elapsed, {})
        self._remember(question, reply, elapsed, report)
        self.out.print(f"[bold green]assistant[/bold green]: {escape(reply)}")

    def _resolved(self, text: str) -> str:
        """The question with its references resolved: what the response cache is keyed by."""
        resolve = getattr(self.mem, "resolve_references", None)
        if not self.use_cache or not callable(resolve):
            return text
        try:
            found = resolve(text, self.session_id)
        except MemlaneError:
            return text
        # a Resolution here, its JSON from a server (MemoryClient)
        resolved = found.get("resolved_query") if isinstance(found, dict) else getattr(found, "resolved_query", None)
        return str(resolved or text)

    def _cached(self, question: str) -> Any | None:
        if not self.use_cache or self.model is None:
            return None
        try:
            return self.mem.cached_response(question, self.session_id, model=self.model.model,
                                            **self._packet_args())
        except MemlaneError as exc:  # a cache that cannot answer is a miss, never a failed turn
            self.out.print(f"(response cache unavailable: {escape(str(exc))})", style="dim")
            return None

    def _packet_args(self) -> dict[str, Any]:
        """The packet the model was sent (a server rebuilds it from the budget and strategy)."""
        return {"context": self.last_packet, "max_tokens": self.max_tokens, "strategy": self.strategy}

    def _store(self, text: str, reply: str, elapsed: float, extra: dict[str, Any]) -> None:
        assert self.model is not None
        self.mem.store_interaction(
            text, reply, session_id=self.session_id, user_id=self.author_id, author_id=self.author_id,
            author_name=self.user,
            metadata={"model_used": self.model.model, "processing_time": round(elapsed, 3), "context_used": True,
                      **extra},
        )

    def _remember(self, question: str, reply: str, elapsed: float, report: dict[str, Any] | None) -> None:
        """Keep the model's answer for the same question in the same context."""
        if not self.use_cache or self.model is None or not reply.strip():
            return
        turn = self.mem.list_turns(self.session_id, limit=1)
        ids = [i for t in turn[-1:] for i in (t.user_message.id, t.assistant_message.id) if i is not None]
        try:
            self.mem.cache_response(
                question, reply, self.session_id, model=self.model.model, cost_seconds=round(elapsed, 3),
                cost_tokens=(report or {}).get("used"), message_ids=ids, **self._packet_args(),
            )
        except MemlaneError as exc:
            self.out.print(f"(answer not cached: {escape(str(exc))})", style="dim")

    def show_packet(self, messages: list[dict[str, Any]], report: dict[str, Any] | None, *, title: str) -> None:
        self.out.rule(title)
        if report:
            parts = ", ".join(f"{k} {v}" for k, v in (report.get("sections") or {}).items() if v)
            self.out.print(f"budget: {report.get('used')} / {report.get('max_tokens')} tokens ({escape(parts)})")
        for m in messages:
            self.out.print(f"[cyan]{m.get('role')}[/cyan]: {escape(str(m.get('content') or ''))}", highlight=False)
            for call in m.get("tool_calls") or []:  # as `memlane history` shows them, not as JSON
                self.out.print(f"  [cyan]→ calls[/cyan] {escape(tool_call_text(call))}", highlight=False)
        self.out.rule()

    # ------------------------------------------------------------ commands

    def cmd_sessions(self, _: str) -> None:
        for s in self.mem.list_sessions(limit=20):
            mark = "*" if s.id == self.session_id else " "
            self.out.print(
                f"{mark} {escape(s.id)}  {escape(s.title or '')}  {s.message_count} msgs  "
                f"{s.status}  {s.last_active_at:%Y-%m-%d %H:%M}", highlight=False,
            )

    def cmd_load(self, arg: str) -> None:
        if not arg:
            self.out.print("usage: /load <session id or prefix>")
            return
        try:
            session = self.mem.get_session(arg)
        except SessionNotFoundError:
            matches = [s for s in self.mem.list_sessions(limit=500) if s.id.startswith(arg)]
            if len(matches) != 1:
                self.out.print(f"no single session matches {escape(arg)!r} ({len(matches)} do); see /sessions")
                return
            session = matches[0]
        self.session_id = session.id
        self.out.print(f"loaded {escape(session.id)} ({escape(session.title or '')}, {session.message_count} messages)")
        self.cmd_history("6")

    def cmd_new(self, arg: str) -> None:
        self.session_id = self._new_session(arg or None)
        self.out.print(f"new session {escape(self.session_id)}")

    def cmd_save(self, _: str) -> None:
        self.mem.flush(30)
        count = len(self.mem.load_session(self.session_id, include_hidden=True))
        self.out.print(f"saved: {count} messages in {escape(self.session_id)} (each turn is written as it happens)")

    def cmd_history(self, arg: str) -> None:
        n = int(arg) if arg.isdigit() else 20
        msgs = self.mem.load_session(self.session_id)[-n:]
        if not msgs:
            self.out.print("(no messages in context; /clear hides earlier ones)")
        for m in msgs:
            who = m.author_name or m.role
            self.out.print(f"[cyan]{escape(who)}[/cyan] ({m.role}): {escape(m.content)}", highlight=False)

    def cmd_clear(self, _: str) -> None:
        hidden = self.mem.clear_session(self.session_id)
        self.out.print(f"cleared: {hidden} messages hidden from context (still stored and searchable)")

    def _session_exists(self) -> bool:
        try:
            self.mem.get_session(self.session_id)
        except SessionNotFoundError:
            return False
        return True

    def cmd_forget(self, _: str, lines: Iterable[str]) -> bool:
        """Ask, then forget the session. Returns whether the REPL goes on (an answer may be /quit)."""
        if self.dry_run:
            self.out.print(f"dry run: would forget session {escape(self.session_id)} and everything derived "
                           "from it; memory is unchanged")
            return True
        question = f"Delete session {self.session_id} and everything derived from it? [y/N] "
        self.out.print(question, end="", highlight=False, markup=False)
        answer = _next_line(lines).strip()
        if answer.lower() not in ("y", "yes", "j", "ja"):
            self.out.print("kept.")
            # a command typed instead of an answer is still a command (/quit must quit)
            return self.handle(answer, lines) if answer.startswith("/") else True
        self._forget()
        return True

    def _forget(self) -> None:
        old = self.session_id
        if callable(getattr(self.mem, "handle_command", None)):
            # The same path as saying it: the Anchor check, the audit entry, and an empty
            # conversation left behind, so the REPL simply carries on in it.
            result = self.mem.handle_command(old, "forget this conversation", self.author_id, author_name=self.user)
            if not result.changed:
                self.out.print(f"[red]not forgotten:[/red] {escape(result.message)}")
                return
            self.out.print(f"forgot {escape(old)}: {escape(result.message)}")
            return
        self.mem.delete_session(old)  # a server: its own access rules apply
        self.session_id = self._new_session(None)
        self.out.print(f"forgot {escape(old)}; now in new session {escape(self.session_id)}")

    def cmd_search(self, arg: str) -> None:
        if not arg:
            self.out.print("usage: /search <query>")
            return
        hits = self.mem.search(arg, top_k=8)
        if not hits:
            self.out.print("nothing found")
        for h in hits:
            parts = " ".join(f"{k}={v:.2f}" for k, v in h.scores.items() if v)
            self.out.print(
                f"[bold]{h.score:.3f}[/bold] {escape(h.message.session_id)} {h.message.role}: "
                f"{escape(_short(h.snippet or h.message.content))}  [dim]{escape(parts)}[/dim]", highlight=False,
            )

    def cmd_context(self, arg: str) -> None:
        query = arg or self.last_query
        messages, report = self.packet_messages(query)
        self.show_packet(messages, report, title=f"context packet for {escape(repr(query))}" if query else "context packet")

    def cmd_remember(self, arg: str) -> None:
        if not arg:
            self.out.print("usage: /remember <text>")
            return
        result = self.memory_command(f"remember this: {arg}")
        if result is not None:  # audited like the spoken command, and merged/superseded like it
            self.out.print(f"noted: {escape(result.message)}")
            return
        if callable(getattr(self.mem, "add_note", None)):
            note = self.mem.add_note(arg, session_id=self.session_id, user_id=self.author_id)
            self.out.print(f"noted (note {note.id}): {escape(note.text)}")
            return
        self.mem.save_message(self.session_id, {"role": "user", "content": arg, "pinned": True, "importance": 1.0,
                                                "author_id": self.author_id, "author_name": self.user})
        self.out.print(f"remembered as a pinned message: {escape(arg)}")


def _next_line(lines: Iterable[str]) -> str:
    if isinstance(lines, Iterator):
        return next(lines, "")
    return ""


def stdin_lines() -> Iterator[str]:
    """Lines from a terminal (prompt_toolkit, with history) or from a pipe."""
    if not sys.stdin.isatty():
        yield from (line.rstrip("\n") for line in sys.stdin)
        return
    from prompt_toolkit import PromptSession
    from prompt_toolkit.completion import WordCompleter
    from prompt_toolkit.history import FileHistory

    history = Path(os.path.expanduser("~/.memlane/chat_history"))
    history.parent.mkdir(parents=True, exist_ok=True)
    words = ["/" + c for c in ("sessions", "load", "new", "save", "history", "clear", "forget", "search",
                               "context", "remember", "help", "quit")]
    prompt: PromptSession[str] = PromptSession(
        history=FileHistory(str(history)), completer=WordCompleter(words, sentence=True)
    )
    while True:
        try:
            yield prompt.prompt("you> ")
        except KeyboardInterrupt:
            continue
        except EOFError:
            return
