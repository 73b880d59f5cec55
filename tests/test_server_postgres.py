"""The server on the PostgreSQL store: keys live in PostgreSQL too, tenants stay apart."""

from __future__ import annotations

from pathlib import Path

import pytest

from memlane import Memory
from memlane.client import MemoryClient
from memlane.errors import SessionNotFoundError
from memlane.scoping import session_key
from memlane.server.auth import key_store_for
from tests.server_support import running_server, serve_subprocess

pytestmark = pytest.mark.postgres


def test_server_on_postgres_with_tenants(pg_url: str) -> None:
    with Memory(pg_url, embedder="hashing") as mem:
        keys = key_store_for(mem.store)
        _, key_a = keys.create_key("pg-a")
        _, key_b = keys.create_key("pg-b")
        with (
            running_server(mem, keys=keys, require_auth=True) as url,
            MemoryClient(url, api_key=key_a) as a,
            MemoryClient(url, api_key=key_b) as b,
        ):
            a.store_interaction("the blue door is on Rua Augusta", "noted", session_id="pg-a1")
            b.store_interaction("the red door is in Graz", "noted", session_id="pg-b1")
            assert [s.id for s in a.list_sessions()] == ["pg-a1"]
            assert {h.message.session_id for h in b.search("door")} == {"pg-b1"}
            with pytest.raises(SessionNotFoundError):
                b.load_session("pg-a1")
            packet = a.context("pg-a1", "which door?", max_tokens=300)
            assert "Rua Augusta" in str(packet.to_messages())
            assert "Graz" not in str(packet.to_dict())
        assert mem.get_session(session_key("pg-a", "pg-a1")).tenant_id == "pg-a"


def test_cli_serve_with_a_postgres_url(pg_url: str, tmp_path: Path) -> None:
    """`memlane serve --store postgresql://...` as users run it: a real process, REST round trip."""
    with serve_subprocess(["serve", "--store", pg_url, "--port", "0", "--no-auth"], tmp_path) as (url, banner):
        assert any("memlane server on postgresql://" in line for line in banner), banner
        assert url.startswith("http://127.0.0.1:")
        with MemoryClient(url) as client:
            client.create_session(session_id="cli-pg")
            client.add("cli-pg", "the harbour light is green on Tuesdays")
            got = [m.content for m in client.load_session("cli-pg")]
            assert got == ["the harbour light is green on Tuesdays"]
    # written to PostgreSQL itself, not to a file store of the child process
    with Memory(pg_url, embedder="none") as mem:
        assert [m.content for m in mem.load_session("cli-pg")] == ["the harbour light is green on Tuesdays"]
