"""Encryption at rest: SQLCipher for the store, sealed checkpoints beside it, clear key errors."""

from __future__ import annotations

import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from memlane import Memory
from memlane.errors import EncryptionKeyError
from tests.server_support import cli_env
from tests.test_erase import ANCHOR, traces

KEY = "correct horse battery staple"


@pytest.fixture
def token() -> str:
    return "zq" + uuid.uuid4().hex[:12]


def _fill(mem: Memory, token: str) -> None:
    mem.create_session(session_id="room", title=f"About {token}", system_prompt=f"Mind {token}.")
    for i in range(15):
        mem.add("room", f"I work at {token} in hall {i}.", author_id=ANCHOR,
                metadata={"tag": token})
        mem.add("room", f"Noted, {token} {i}.", role="assistant")
    mem.add_note(f"JanHein's locker code is {token}.", user_id=ANCHOR)
    mem.flush(60)


def _cli(home: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memlane.cli.main", *args], capture_output=True, text=True,
                          env={**cli_env(home), **env}, timeout=300)


def test_no_plaintext_on_disk_while_open_and_after_close(tmp_path: Path, token: str) -> None:
    db = tmp_path / "store" / "enc.db"
    with Memory(db, key=KEY, embedder="hashing", anchor_id=ANCHOR, promote_every=1) as mem:
        _fill(mem, token)
        assert mem.search(token) and any(token in n.text.lower() for n in mem.notes())
        assert mem.context("room", token).to_messages()
        assert any(p.suffix == ".sealed" for p in db.parent.rglob("*"))  # a checkpoint was written
        assert traces(db.parent, token) == {}  # WAL included, store open
    assert traces(db.parent, token) == {}
    with Memory(db, key=KEY, embedder="hashing") as mem:  # and it reads back
        assert len(mem.load_session("room")) == 30


@pytest.mark.parametrize("given", [None, "wrong key"])
def test_a_wrong_or_missing_key_is_a_clear_error_and_changes_nothing(tmp_path: Path, given: str | None) -> None:
    db = tmp_path / "enc.db"
    with Memory(db, key=KEY, embedder="none") as mem:
        mem.add("s", "secret words")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    with pytest.raises(EncryptionKeyError, match="key"):
        Memory(db, key=given, embedder="none")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


def test_a_key_on_a_plain_store_is_refused_not_a_new_database(tmp_path: Path) -> None:
    db = tmp_path / "plain.db"
    with Memory(db, embedder="none") as mem:
        mem.add("s", "plain words")
    before = db.read_bytes()
    with pytest.raises(EncryptionKeyError, match="not encrypted"):
        Memory(db, key=KEY, embedder="none")
    assert db.read_bytes() == before


def test_key_from_the_environment_and_the_configured_variable(tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    db = tmp_path / "enc.db"
    monkeypatch.setenv("MEMLANE_KEY", KEY)
    with Memory(db, embedder="none") as mem:
        mem.add("s", "hello")
    monkeypatch.delenv("MEMLANE_KEY")
    with pytest.raises(EncryptionKeyError):
        Memory(db, embedder="none")
    monkeypatch.setenv("VAULT_MEMLANE", KEY)
    with Memory(db, embedder="none", key_env="VAULT_MEMLANE") as mem:
        assert [m.content for m in mem.load_session("s")] == ["hello"]


def test_cli_key_env_and_its_errors(tmp_path: Path) -> None:
    db = tmp_path / "enc.db"
    with Memory(db, key=KEY, embedder="none") as mem:
        mem.add("s", "hello from the vault")
    ok = _cli(tmp_path, {"MY_KEY": KEY}, "--store", str(db), "--key-env", "MY_KEY", "history", "s")
    assert ok.returncode == 0 and "hello from the vault" in ok.stdout, ok.stderr
    unset = _cli(tmp_path, {}, "--store", str(db), "--key-env", "MY_KEY", "history", "s")
    assert unset.returncode == 7 and "MY_KEY" in unset.stderr and "Traceback" not in unset.stderr
    missing = _cli(tmp_path, {}, "--store", str(db), "history", "s")
    assert missing.returncode == 12 and "encrypted" in missing.stderr and "Traceback" not in missing.stderr
    wrong = _cli(tmp_path, {"MY_KEY": "nope"}, "--store", str(db), "--key-env", "MY_KEY", "history", "s")
    assert wrong.returncode == 12 and "key is wrong" in wrong.stderr


def test_encrypt_and_decrypt_convert_a_store_and_its_checkpoints(tmp_path: Path, token: str) -> None:
    db = tmp_path / "store" / "m.db"
    with Memory(db, embedder="hashing", anchor_id=ANCHOR, promote_every=1) as mem:
        _fill(mem, token)
        count = mem.store.count_messages()
    assert traces(db.parent, token)
    # an interrupted earlier run left a half-written copy: it is discarded, not trusted
    (db.parent / ".m.db.encrypting").write_bytes(b"half a copy")
    env = {"MEMLANE_KEY": KEY}
    done = _cli(tmp_path, env, "--store", str(db), "encrypt", "--yes")
    assert done.returncode == 0, done.stderr
    assert "rows verified" in done.stdout
    assert traces(db.parent, token) == {}
    assert {p.name for p in db.parent.iterdir()} <= {"m.checkpoints", "m.db", "m.db-locks", "m.db-erasures"}
    with Memory(db, key=KEY, embedder="hashing") as mem:
        assert mem.store.count_messages() == count and mem.search(token)
        state, snap = mem.parts.checkpoints.check("room")
        assert state in ("fresh", "stale") and snap is not None  # the sealed checkpoint opens
    with pytest.raises(EncryptionKeyError):
        Memory(db, embedder="none")
    done = _cli(tmp_path, env, "--store", str(db), "decrypt", "--yes")
    assert done.returncode == 0, done.stderr
    with Memory(db, embedder="hashing") as mem:
        assert mem.store.count_messages() == count
        assert mem.parts.checkpoints.check("room")[1] is not None


def test_forget_on_an_encrypted_store_is_final_too(tmp_path: Path, token: str) -> None:
    db = tmp_path / "store" / "enc.db"
    with Memory(db, key=KEY, embedder="hashing", anchor_id=ANCHOR, promote_every=1) as mem:
        _fill(mem, token)
        mem.delete_session("room")
        assert not mem.search(token)
    with Memory(db, key=KEY, embedder="hashing") as mem:
        assert mem.store.get_session("room") is None
        learned = [n.text for n in mem.notes() if token in n.text.lower()]
        assert learned == [f"JanHein's locker code is {token}."]  # the note not learned in the room stays


def test_backups_of_an_encrypted_store_are_encrypted_and_restore_with_the_key(tmp_path: Path, token: str) -> None:
    from memlane.rooms.backup import backup_database, restore_database

    db = tmp_path / "store" / "enc.db"
    with Memory(db, key=KEY, embedder="hashing", anchor_id=ANCHOR) as mem:
        _fill(mem, token)
        mem.add("other", "kept")
    backups = tmp_path / "backups"
    backup_database(db, backups / "b.db", key=KEY)
    assert traces(backups, token) == {}
    with Memory(db, key=KEY, embedder="hashing") as mem:
        mem.delete_session("room")
    report = restore_database(backups / "b.db", db, KEY)
    assert report.erasures_replayed == 1
    with Memory(db, key=KEY, embedder="hashing") as mem:
        assert mem.store.get_session("room") is None and mem.store.get_session("other") is not None
    assert traces(db.parent, token) == {}
