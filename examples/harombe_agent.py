"""Seed 000/001 (harombe): an agent loop with memory and RAG, as harombe's Agent.run does it.

    python examples/harombe_agent.py DB [openai|ollama]

The agent keeps each conversation as a session (system prompt, metadata), saves the user's
ORIGINAL message (never the RAG-enhanced one), retrieves relevant context from past
conversations with get_relevant_context (above rag.min_similarity, never padded), formats
it the seed's way ("RELEVANT CONTEXT FROM PAST CONVERSATIONS: ... USER QUESTION: ...") and
asks a chat model over HTTP - the tiny one in memlane.tiny_model on 127.0.0.1, spoken to with
the OpenAI or the Ollama chat protocol. Configuration is the seed's own YAML block.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import httpx

from memlane import Memory
from memlane.config import load_settings
from memlane.models import Message
from memlane.tiny_model import TinyModel

CONFIG = """\
memory:
  enabled: true
  storage_path: {db}
  max_history_tokens: 4096
  vector_store:
    enabled: true
    backend: chromadb
    embedding_model: sentence-transformers/all-MiniLM-L6-v2
    embedding_provider: sentence-transformers
    persist_directory: ~/.harombe/vectors
    collection_name: harombe_embeddings
  rag:
    enabled: true
    top_k: 5
    min_similarity: 0.7
"""


class Agent:
    def __init__(self, memory: Memory, session_id: str, chat_url: str, protocol: str) -> None:
        self.memory = memory
        self.session_id = session_id
        self.chat_url = chat_url
        self.protocol = protocol
        self.rag_top_k = memory.settings.rag_top_k
        self.rag_min_similarity = memory.settings.rag_min_score

    def _format_message_with_context(self, user_message: str, context: list[Message]) -> str:
        lines = ["RELEVANT CONTEXT FROM PAST CONVERSATIONS:", "---"]
        # memlane's items already say when and who: "[8 May 2026] user: ..."
        lines += [m.content for m in context]
        lines += ["---", "", "Now answer the current user question using the context above if relevant.",
                  "", f"USER QUESTION: {user_message}"]
        return "\n".join(lines)

    def _complete(self, messages: list[dict[str, object]]) -> str:
        if self.protocol == "ollama":
            r = httpx.post(f"{self.chat_url}/api/chat", timeout=30,
                           json={"model": "tiny", "messages": messages, "stream": False})
            r.raise_for_status()
            return str(r.json()["message"]["content"])
        r = httpx.post(f"{self.chat_url}/chat/completions", timeout=30, json={"model": "tiny", "messages": messages})
        r.raise_for_status()
        return str(r.json()["choices"][0]["message"]["content"])

    def run(self, user_message: str) -> str:
        history = [m.to_openai() for m in self.memory.get_recent_messages(self.session_id, 2048)]
        # Past conversations only: this session's own turns are in the history already.
        context = [m for m in self.memory.get_relevant_context(
            user_message, max_tokens=1024, min_score=self.rag_min_similarity, top_k=self.rag_top_k)
            if m.session_id != self.session_id]
        prompt = self._format_message_with_context(user_message, context) if context else user_message
        self.memory.save_message(self.session_id, {"role": "user", "content": user_message})
        answer = self._complete([*history, {"role": "user", "content": prompt}])
        self.memory.save_message(self.session_id, {"role": "assistant", "content": answer})
        return answer


def run(db: Path, protocol: str = "openai") -> None:
    with tempfile.TemporaryDirectory() as tmp:
        config = Path(tmp) / "harombe.yaml"
        config.write_text(CONFIG.format(db=db))
        settings = load_settings(config, env={})
    with TinyModel() as model, Memory(settings=settings) as memory:
        url = model.url if protocol == "openai" else model.ollama_url
        monday = memory.create_session("You are harombe.", {"user": "ana", "tags": ["dev"]})
        agent = Agent(memory, monday, url, protocol)
        for text in ("We should wrap the API client's HTTP calls in a retry decorator with exponential backoff.",
                     "The report export format will be JSON lines."):
            print(f"monday> {text}\n  agent: {agent.run(text)}")
        memory.flush()
        friday = memory.create_session("You are harombe.", {"user": "ana"})
        agent = Agent(memory, friday, url, protocol)
        for text in ("What did we discuss about the retry decorator last week?",
                     "What's the weather in Tokyo tomorrow?"):
            print(f"friday> {text}\n  agent: {agent.run(text)}")
        sent = str(model.requests[-2]["messages"][-1]["content"])
        print("\n== what the model got for the first Friday question ==")
        print(sent)


if __name__ == "__main__":
    run(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "openai")
