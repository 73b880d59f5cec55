"""A script that never calls close() must still exit cleanly and keep its messages."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from memlane import Memory

SCRIPT = """
import sys
from memlane import Memory

mem = Memory(sys.argv[1])  # the default embedder: a background indexing thread
sid = mem.create_session(session_id="exit")
for i in range(20):
    mem.add(sid, f"message {i} about the train to Sintra and the picnic")
print("added", flush=True)
# no mem.close(): memlane closes it at interpreter exit
"""


def test_exit_without_close_is_clean_and_keeps_messages(tmp_path: Path) -> None:
    script = tmp_path / "no_close.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src")}
    for run in range(3):
        db = tmp_path / f"run{run}.db"
        proc = subprocess.run(
            [sys.executable, str(script), str(db)], env=env, capture_output=True, text=True,
            timeout=120,
        )
        # 134 is the abort of a native thread still running at exit
        assert proc.returncode == 0, (run, proc.returncode, proc.stderr[-2000:])
        assert "added" in proc.stdout
        with Memory(db, embedder="none") as mem:
            assert [m.content for m in mem.load_session("exit")] == [
                f"message {i} about the train to Sintra and the picnic" for i in range(20)
            ]


MID_BACKLOG = """
import sys, time
from memlane import Memory

mem = Memory(sys.argv[1], durability="normal")  # the default embedder (MiniLM)
sid = mem.create_session(session_id="exit")
mem.add_messages(sid, [{"role": "user", "content": f"note {i}: the picnic moved to Sintra"}
                       for i in range(int(sys.argv[2]))])
mem.search("picnic")  # a search starts the background indexer
indexer = mem.parts.indexer
while indexer.embedded == 0:  # wait until it is embedding, with its thread pool in use
    time.sleep(0.01)
print("pending", indexer.pending(), flush=True)
# no close(): the interpreter exits while the indexer still has a backlog
"""


def test_exit_while_embedding_is_quiet_and_the_next_open_resumes_the_backlog(tmp_path: Path) -> None:
    script = tmp_path / "mid_backlog.py"
    script.write_text(MID_BACKLOG)
    db = tmp_path / "backlog.db"
    total = 1200
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1] / "src"),
           "HOME": str(tmp_path), "MEMLANE_CONFIG": str(tmp_path / "none.yaml")}
    proc = subprocess.run([sys.executable, str(script), str(db), str(total)], env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stderr == ""  # no "cannot schedule new futures after shutdown" tracebacks
    pending = int(proc.stdout.split()[-1])
    assert pending > 0, "the indexer had finished before exit: nothing was left to resume"
    with Memory(db) as mem:
        index = mem.parts.recall.index
        left = index.missing_ids(total + 1)
        assert 0 < len(left) < total  # exit kept what was embedded and left the rest
        mem.flush(300)  # the next open's indexer picks the backlog up ...
        assert index.missing_ids(total + 1) == [] and index.count() == total  # ... to the last one
        assert mem.search("picnic Sintra")[0].message.content.endswith("the picnic moved to Sintra")
