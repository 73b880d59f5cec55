"""Seed 003 (Matrix room brain): a room bot fed by an event list, several people, one Anchor.

    python examples/matrix_room_bot.py DB

Each event is what a Matrix client delivers: room, sender id, display name, body. The
Anchor is MATRIX_USER_ID (here @janhein:matrix.org). For every event the bot first asks
memlane whether it is a memory command ("remember this", "vergiss dieses Gespräch" - only
the Anchor may change memory); otherwise it stores the message, builds the room's context
packet (speakers labelled, "Anchor (JanHein): ...") and asks a chat model - the tiny one in
memlane.tiny_model, on 127.0.0.1 - and stores the reply. At the end it prints the transcript,
the long-term notes and the packet for a question about the Anchor.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import httpx

from memlane import Memory
from memlane.rooms import ensure_room, render_transcript
from memlane.tiny_model import TinyModel

ANCHOR = os.environ.setdefault("MATRIX_USER_ID", "@janhein:matrix.org")
GARDEN = "!garden:matrix.org"
HOME = "!home:matrix.org"

EVENTS = [
    (HOME, ANCHOR, "JanHein", "I love coffee, a flat white every morning."),
    (GARDEN, "@maria:matrix.org", "Maria", "The basil on my balcony keeps wilting in the afternoon."),
    (GARDEN, ANCHOR, "JanHein", "The community garden meets every Saturday at 10."),
    (GARDEN, ANCHOR, "JanHein", "remember this"),
    (GARDEN, "@maria:matrix.org", "Maria", "forget this conversation"),
    (GARDEN, "@oma:matrix.org", "Oma", "Ich bringe am Samstag Apfelkuchen mit."),
    (HOME, ANCHOR, "JanHein", "Actually I don't like coffee anymore, I prefer tea now."),
    (GARDEN, ANCHOR, "JanHein", "What should we drink on Saturday?"),
]


def reply(model_url: str, mem: Memory, room: str, body: str) -> str:
    packet = mem.context(room, query=body, max_tokens=800)
    response = httpx.post(f"{model_url}/chat/completions", timeout=30,
                          json={"model": "tiny", "messages": packet.to_messages()})
    response.raise_for_status()
    text: str = response.json()["choices"][0]["message"]["content"]
    return text


def run(db: Path) -> None:
    with TinyModel() as model, Memory(db, embedder="hashing", anchor_name="JanHein",
                                      promote_every=1) as mem:
        ensure_room(mem, GARDEN, name="Garten")
        ensure_room(mem, HOME, name="Zuhause")
        for room, sender, name, body in EVENTS:
            command = mem.handle_command(room, body, sender, author_name=name)
            if command.recognized:
                print(f"[{room}] {name}: {body}\n  -> memory: {command.message}")
                continue
            mem.add(room, body, author_id=sender, author_name=name)
            answer = reply(model.url, mem, room, body)
            mem.add(room, answer, role="assistant")
            print(f"[{room}] {name}: {body}\n  -> bot: {answer}")
        mem.flush()
        print("\n== transcript of the garden room ==")
        print(render_transcript(mem.load_session(GARDEN), mem.anchor_id))
        print("\n== notes ==")
        for note in mem.notes():
            print("-", note.text)
        print("\n== packet for: what does JanHein drink? ==")
        print(mem.context(GARDEN, "what does JanHein drink in the morning?", max_tokens=600)
              .to_messages()[0]["content"])


if __name__ == "__main__":
    run(Path(sys.argv[1]))
