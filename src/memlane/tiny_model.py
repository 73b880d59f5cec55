"""A tiny chat model on 127.0.0.1 that speaks the OpenAI and Ollama chat protocols.

It answers like a model that read its prompt: a question is answered with the first line
of the prompt's context that shares a content word with it, or "I don't know." when none
does. Every request is kept in ``requests`` (its body, plus ``path`` and ``auth``, the
Authorization header or None) so a caller can see what the model was sent. Tests give it
other answers (``TinyModel(answer=...)``) or a failing ``status``; benchmarks a ``delay``
(seconds each answer takes, as a local model would). Standard library only, so the
examples, tests and ``memlane bench caches`` use this one model wherever memlane runs.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

_WORD = re.compile(r"[^\W\d_]{4,}")
_SKIP = {"what", "when", "which", "with", "about", "that", "this", "have", "your", "from", "discuss",
         "decide", "week", "last", "there", "they", "them", "were", "would", "could", "should"}


# Lines about the conversation rather than its content (packet headings, state fields).
_META = ("#", "Now answer", "- Active", "- Last", "- Session", "Open loops", "Waiting for")


def answer(messages: list[dict[str, Any]]) -> str:
    question = str(messages[-1].get("content") or "")
    asked = question.rsplit("USER QUESTION:", 1)[-1]
    words = {w.lower() for w in _WORD.findall(asked)} - _SKIP
    context = "\n".join(str(m.get("content") or "") for m in messages[:-1])
    if "USER QUESTION:" in question:
        context += "\n" + question.rsplit("USER QUESTION:", 1)[0]
    for line in context.splitlines():
        found = {w.lower() for w in _WORD.findall(line)}
        if words & found and not line.startswith(_META) and not line.rstrip().endswith("?"):
            return f"From what I know: {line.strip().lstrip('- ')}"
    return "I don't know."


class TinyModel:
    """``with TinyModel() as m: m.url`` -> an OpenAI base URL (``m.ollama_url`` for Ollama)."""

    def __init__(self, answer: Callable[[list[dict[str, Any]]], str] = answer, *, delay: float = 0.0) -> None:
        self.requests: list[dict[str, Any]] = []
        self.answer = answer
        self.delay = delay
        self.status = 200  # anything else answers with an error body, as a failing provider does
        model = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                model.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                time.sleep(model.delay)
                text = model.answer(body["messages"])
                if model.status != 200:
                    reply: dict[str, Any] = {"error": {"message": "the tiny model is failing on purpose"}}
                elif self.path.rstrip("/").endswith("/api/chat"):  # Ollama
                    reply = {"model": body.get("model"), "done": True,
                             "message": {"role": "assistant", "content": text}}
                else:  # OpenAI chat completions
                    reply = {"id": "tiny", "object": "chat.completion", "model": body.get("model"),
                             "choices": [{"index": 0, "finish_reason": "stop",
                                          "message": {"role": "assistant", "content": text}}]}
                data = json.dumps(reply).encode()
                self.send_response(model.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        self.ollama_url = f"http://127.0.0.1:{port}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> TinyModel:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
