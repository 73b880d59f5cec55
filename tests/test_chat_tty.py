"""`memlane chat` in a real pseudo-terminal (prompt_toolkit on), as a person types into it.

Piped stdin takes another code path (plain lines); what a person sees — the /help text with
its literal brackets, the [y/N] of /forget — is only proven on a terminal.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pexpect
import pytest

from memlane import Memory
from tests.server_support import MEMLANE, cli_env

TIMEOUT = 60


def _seed(db: Path) -> None:
    with Memory(db, embedder="hashing") as mem:
        mem.create_session("Be brief.", session_id="trip", user_id="ana")
        mem.store_interaction("I'm vegetarian", "Noted.", session_id="trip")


@contextmanager
def chat_tty(tmp_path: Path, *args: str) -> Iterator[Screen]:
    env = cli_env(tmp_path)
    env.update(TERM="xterm", PROMPT_TOOLKIT_NO_CPR="1")  # no cursor-position query to answer
    child = pexpect.spawn(
        MEMLANE, ["--store", str(tmp_path / "chat.db"), "chat", "--session", "trip", *args],
        env=env, encoding="utf-8", timeout=TIMEOUT, dimensions=(40, 200),
    )
    screen = Screen(child)
    try:
        screen.expect("Type /help for commands.")
        screen.expect("you>")
        yield screen
    finally:
        if child.isalive():
            child.terminate(force=True)


# what a terminal shows, without its control sequences (colours, cursor moves, bracketed paste)
_CONTROL = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b[()][A-Z0-9]|[\r\x08]")


class Screen:
    """The text a child has printed, read as a person reads it (styles and cursor codes left out)."""

    def __init__(self, child: pexpect.spawn) -> None:
        self.child = child
        self.text = ""

    def expect(self, wanted: str, timeout: float = TIMEOUT) -> None:
        """Wait until ``wanted`` appears; what came before it is consumed."""
        deadline = time.monotonic() + timeout
        while wanted not in self.text:
            if time.monotonic() > deadline:
                raise AssertionError(f"{wanted!r} did not appear; the screen shows:\n{self.text[-2000:]}")
            try:
                self.text += _CONTROL.sub("", self.child.read_nonblocking(4096, timeout=1))
            except pexpect.TIMEOUT:
                continue
            except pexpect.EOF:
                if wanted not in self.text:
                    raise AssertionError(f"{wanted!r} never appeared; the screen shows:\n{self.text[-2000:]}") from None
        self.text = self.text[self.text.index(wanted) + len(wanted):]

    def send(self, line: str) -> None:
        self.child.sendline(line)

    def wait_exit(self) -> int:
        self.child.expect(pexpect.EOF)
        self.child.close()
        assert self.child.exitstatus is not None
        return int(self.child.exitstatus)


def test_help_and_forget_confirmation_on_a_terminal(tmp_path: Path) -> None:
    _seed(tmp_path / "chat.db")
    # no model is called: /help and /forget never reach one
    with chat_tty(tmp_path, "--base-url", "http://127.0.0.1:9/v1") as screen:
        screen.send("/help")
        for literal in ("/new [title]", "/history [n]", "/context [query]", "/remember <text>"):
            screen.expect(literal)
        screen.expect("you>")
        screen.send("/forget")
        screen.expect("Delete session trip and everything derived from it? [y/N]")
        screen.send("/quit")  # not an answer: the session is kept and /quit still quits
        screen.expect("kept.")
        screen.expect("bye. session trip is saved.")
        assert screen.wait_exit() == 0
    with Memory(tmp_path / "chat.db", embedder="none") as mem:
        assert len(mem.load_session("trip")) == 2


def test_forget_on_a_terminal_after_yes(tmp_path: Path) -> None:
    _seed(tmp_path / "chat.db")
    with chat_tty(tmp_path, "--base-url", "http://127.0.0.1:9/v1") as screen:
        screen.send("/forget")
        screen.expect("[y/N]")
        screen.send("y")
        screen.expect("forgot trip")
        screen.send("/quit")
        assert screen.wait_exit() == 0
    with Memory(tmp_path / "chat.db", embedder="none") as mem:
        assert mem.load_session("trip", include_hidden=True) == []


@pytest.mark.parametrize("line, said", [
    ("/remember my sister lives in Graz", "dry run: would keep a long-term note: my sister lives in Graz"),
    ("/forget", "dry run: would forget session trip"),
    ("/clear", "dry run: would hide the history of session trip"),
    ("/new [draft]", "dry run: would start a new session"),
])
def test_dry_run_changes_no_memory(tmp_path: Path, line: str, said: str) -> None:
    _seed(tmp_path / "chat.db")
    with chat_tty(tmp_path, "--dry-run") as screen:
        screen.send(line)
        screen.expect(said)
        screen.expect("memory is unchanged")
        screen.send("remember this: I prefer [window] seats")  # a spoken memory command: shown, not run
        screen.expect("packet (dry run")
        screen.expect("I prefer [window] seats")
        screen.send("/quit")
        assert screen.wait_exit() == 0
    with Memory(tmp_path / "chat.db", embedder="hashing") as mem:
        assert [m.content for m in mem.load_session("trip", include_hidden=True)] == ["I'm vegetarian", "Noted."]
        assert mem.load_session("trip") != []  # nothing hidden either
        assert mem.notes() == []
        assert [s.id for s in mem.list_sessions()] == ["trip"]
