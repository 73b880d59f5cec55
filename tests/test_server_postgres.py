"""The server on the PostgreSQL store: keys live in PostgreSQL too, tenants stay apart."""

from __future__ import annotations

import pytest

from memlane import Memory
from memlane.client import MemoryClient
from memlane.errors import SessionNotFoundError
from memlane.server.auth import key_store_for
from tests.server_support import running_server

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
        assert mem.get_session("pg-a1").tenant_id == "pg-a"
