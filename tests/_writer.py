"""A writer process for the durability tests: appends forever, logging acknowledged adds.

Usage: python tests/_writer.py DB ACK_FILE SESSION [COUNT] [EMBEDDER]
Each line of ACK_FILE is written only after Memory.add returned. EMBEDDER (default
"none") names the embedder, so a background indexer can be writing too when the
process is killed.
"""

from __future__ import annotations

import os
import sys

from memlane import Memory


def main() -> None:
    db, ack_path, session = sys.argv[1], sys.argv[2], sys.argv[3]
    count = int(sys.argv[4]) if len(sys.argv) > 4 and sys.argv[4] != "-" else 10**9
    embedder = sys.argv[5] if len(sys.argv) > 5 else "none"
    with Memory(db, embedder=embedder) as mem, open(ack_path, "a", buffering=1) as ack:
        mem.ensure_session(session)
        if embedder != "none":  # embed while writing, as a server does (not only on first search)
            mem.start_background_work()
        for i in range(count):
            msg = mem.add(session, f"{session} pid {os.getpid()} message {i}")
            ack.write(f"{msg.id}\t{msg.content}\n")
    print("done", flush=True)


if __name__ == "__main__":
    main()
