"""Encryption at rest: SQLCipher for the store, sealed checkpoints beside it, clear key errors."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from memlane import Memory
from memlane.errors import EncryptionKeyError, StorageError
from memlane.store.sqlite_crypt import convert
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


def _big_store(db: Path, token: str) -> int:
    """A store large enough that copying it takes a while (tens of MB); returns its message count."""
    rng = random.Random(7)
    with Memory(db, embedder="none", durability="normal") as mem:
        for s in range(200):
            mem.add_messages(f"s{s}", [
                {"role": "user", "content": f"{token} " + " ".join(str(rng.random()) for _ in range(200))}
                for _ in range(20)
            ])
        return mem.store.count_messages()


def _count(db: Path, key: str | None) -> int:
    with Memory(db, key=key, embedder="none") as mem:
        return mem.store.count_messages()


def _kill_at(home: Path, env: dict[str, str], db: Path, command: str, phase: str) -> None:
    """Run ``memlane <command>`` in a real process and SIGKILL it once it reports ``phase``."""
    proc = subprocess.Popen([sys.executable, "-m", "memlane.cli.main", "--store", str(db), command, "--yes"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**cli_env(home), **env})
    assert proc.stderr is not None
    seen = []
    for line in proc.stderr:
        seen.append(line)
        if line.startswith(f"{phase}:"):
            break
    proc.kill()  # SIGKILL: no cleanup of any kind
    proc.wait(60)
    assert any(x.startswith(f"{phase}:") for x in seen), "".join(seen)


@pytest.mark.parametrize(("command", "phase"), [("encrypt", "copying"), ("encrypt", "scrubbing"),
                                                ("decrypt", "copying")])
def test_a_conversion_killed_midway_resumes_with_nothing_lost(tmp_path: Path, token: str, command: str,
                                                             phase: str) -> None:
    db = tmp_path / "store" / "m.db"
    count = _big_store(db, token)
    env = {"MEMLANE_KEY": KEY}
    if command == "decrypt":
        assert _cli(tmp_path, env, "--store", str(db), "encrypt", "--yes").returncode == 0
    _kill_at(tmp_path, env, db, command, phase)
    # Wherever the kill landed, the store opens in one of its two forms with every message.
    forms = [_count(db, k) for k in (None, KEY) if _opens(db, k)]
    assert forms == [count]
    done = _cli(tmp_path, env, "--store", str(db), command, "--yes", "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["resumed"] in ("restarted", "finished", "already")
    assert _count(db, KEY if command == "encrypt" else None) == count
    left = {p.name for p in db.parent.iterdir()}
    assert left <= {"m.db", "m.db-locks", "m.db-erasures", "m.db-wal", "m.db-shm"}, left
    if command == "encrypt":
        assert traces(db.parent, token) == {}  # no plaintext copy anywhere


def _opens(db: Path, key: str | None) -> bool:
    try:
        Memory(db, key=key, embedder="none").close()
        return True
    except StorageError:
        return False


def test_a_run_killed_after_the_swap_scrubs_the_old_file_next_time(tmp_path: Path, token: str) -> None:
    """The state a kill between the rename and the zeroing leaves: the encrypted store in
    place and the plaintext old file still linked as .m.db.replaced."""
    db = tmp_path / "store" / "m.db"
    with Memory(db, embedder="none") as mem:
        _fill_plain(mem, token)
    spare = tmp_path / "spare" / "m.db"
    spare.parent.mkdir()
    shutil.copy(db, spare)
    convert(spare, KEY, encrypt=True)
    os.link(db, db.with_name(".m.db.replaced"))
    os.replace(spare, db)
    assert traces(db.parent, token)  # the old file, through the link
    steps: list[str] = []
    report = convert(db, KEY, encrypt=True, progress=lambda what, done, total: steps.append(what))
    assert report.resumed == "finished" and "scrubbing" in steps
    assert traces(db.parent, token) == {}
    assert {p.name for p in db.parent.iterdir()} == {"m.db"}
    assert _count(db, KEY) == 10


def test_a_run_killed_before_the_swap_starts_over(tmp_path: Path, token: str) -> None:
    db = tmp_path / "store" / "m.db"
    with Memory(db, embedder="none") as mem:
        _fill_plain(mem, token)
    os.link(db, db.with_name(".m.db.replaced"))  # the link is made, the rename never happened
    (db.parent / ".m.db.encrypting").write_bytes(b"half a copy")
    report = convert(db, KEY, encrypt=True)
    assert report.resumed == "restarted"
    assert traces(db.parent, token) == {}
    assert _count(db, KEY) == 10


def test_encrypting_twice_or_with_another_key(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Memory(db, embedder="none") as mem:
        mem.add("s", "hello")
    convert(db, KEY, encrypt=True)
    assert convert(db, KEY, encrypt=True).resumed == "already"
    with pytest.raises(EncryptionKeyError, match="another key"):
        convert(db, "not the key", encrypt=True)
    assert _count(db, KEY) == 1


def _fill_plain(mem: Memory, token: str) -> None:
    for i in range(10):
        mem.add("room", f"The code {i} is {token}.")
