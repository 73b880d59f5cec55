"""Multi-turn conversations (English and German) for the context-engine tests.

Each script is a list of turns; a turn is a user message, optional tool calls
with results, and the assistant's reply — the shape an agent loop writes.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from memlane import Memory
from memlane.eval.locomo_data import load_conversation

Turn = tuple[str, list[tuple[str, str, str]], str]  # user, [(tool, args, result)], reply

EN: list[Turn] = [
    ("Can you check the disk usage on the backup server?",
     [("disk_usage", '{"host": "backup-01"}', "/srv/backup 1.8T used of 2.0T (91%)")],
     "The backup volume /srv/backup on backup-01 is 91% full: 1.8 TB of 2 TB."),
    ("That is too much. Start a cleanup job for the old snapshots.",
     [("start_job", '{"kind": "cleanup", "older_than_days": 90}', "job-4711 started")],
     "I started job-4711 to delete snapshots older than 90 days. I will report back when it finishes."),
    ("Which snapshots are the biggest ones?", [],
     "Do you mean the daily snapshots or the weekly ones?"),
    ("The weekly ones.",
     [("list_snapshots", '{"kind": "weekly", "sort": "size"}', "weekly-2024-01: 210G, weekly-2023-52: 198G")],
     "The biggest weekly snapshots are weekly-2024-01 with 210 GB and weekly-2023-52 with 198 GB."),
    ("How long will the cleanup take?", [],
     "Deleting 90 days of snapshots usually takes about twenty minutes on that volume."),
    ("Meanwhile, please set up a nightly rsync of /home to the NAS.", [],
     "I created a cron entry that runs rsync from /home to nas:/volume1/home every night at 02:00."),
    ("Does the rsync job use compression?", [],
     "No, it does not: the NAS is on the local network, so compression would only cost CPU time."),
    ("Good. What about the database dumps?",
     [("find_files", '{"path": "/var/backups/db", "pattern": "*.sql.gz"}', "14 files, newest 2024-03-04")],
     "There are 14 compressed PostgreSQL dumps in /var/backups/db; the newest is from 4 March."),
    ("Keep only the last seven dumps.",
     [("start_job", '{"kind": "prune", "keep": 7, "path": "/var/backups/db"}', "job-4712 started")],
     "I started job-4712, which keeps the seven newest dumps and deletes the other seven."),
    ("Is job-4711 done yet?",
     [("job_status", '{"job": "job-4711"}', "finished: 412G freed")],
     "Yes, job-4711 finished and freed 412 GB; the backup volume is now at 71%."),
    ("Great. Can you also rotate the nginx logs?", [],
     "Sure. Should I compress the rotated nginx logs with gzip or zstd?"),
    ("zstd please.", [],
     "I changed logrotate to compress nginx logs with zstd and keep them for 30 days."),
    ("What is the load on the web server right now?",
     [("uptime", '{"host": "web-01"}', "load average: 0.42, 0.38, 0.35")],
     "The load on web-01 is low: 0.42 over the last minute."),
    ("Remind me what we decided about compression for the rsync job.", [],
     "We decided the nightly rsync to the NAS runs without compression because it stays on the local network."),
]

DE: list[Turn] = [
    ("Kannst du prüfen, wie voll die Festplatte auf dem Mailserver ist?",
     [("disk_usage", '{"host": "mail-01"}', "/var/mail 430G von 500G (86%)")],
     "Das Postfach-Volume /var/mail auf mail-01 ist zu 86 % voll: 430 GB von 500 GB."),
    ("Dann starte bitte eine Archivierung der alten Postfächer.",
     [("start_job", '{"kind": "archive", "older_than_days": 365}', "job-815 gestartet")],
     "Ich habe job-815 gestartet, der Postfächer archiviert, die seit einem Jahr unbenutzt sind. Ich melde mich, wenn er fertig ist."),
    ("Welche Postfächer sind am größten?", [],
     "Meinst du die Postfächer der Mitarbeiter oder die Sammelpostfächer?"),
    ("Die Sammelpostfächer.",
     [("list_mailboxes", '{"kind": "shared", "sort": "size"}', "info@: 48G, support@: 41G")],
     "Die größten Sammelpostfächer sind info@ mit 48 GB und support@ mit 41 GB."),
    ("Richte bitte eine nächtliche Sicherung der Datenbank auf das NAS ein.", [],
     "Ich habe einen Cronjob angelegt, der die Datenbank jede Nacht um 03:00 Uhr auf das NAS sichert."),
    ("Wird die Sicherung verschlüsselt?", [],
     "Ja, die Sicherung wird mit GPG verschlüsselt, der Schlüssel liegt im Tresor der IT."),
    ("Ist job-815 schon fertig?",
     [("job_status", '{"job": "job-815"}', "fertig: 120G archiviert")],
     "Ja, job-815 ist fertig und hat 120 GB archiviert; das Volume ist jetzt zu 62 % voll."),
    ("Wie hoch ist die Last auf dem Webserver?",
     [("uptime", '{"host": "web-02"}', "load average: 1.20, 0.90, 0.80")],
     "Die Last auf web-02 liegt bei 1,2 in der letzten Minute, das ist unkritisch."),
    ("Kannst du die Zertifikate erneuern?", [],
     "Soll ich nur das Zertifikat für mail-01 erneuern oder alle Zertifikate?"),
    ("Alle bitte.",
     [("renew_certs", '{"all": true}', "4 Zertifikate erneuert")],
     "Ich habe alle vier Zertifikate erneuert; sie sind jetzt 90 Tage gültig."),
    ("Was hatten wir zur Verschlüsselung der Sicherung beschlossen?", [],
     "Die nächtliche Sicherung auf das NAS wird mit GPG verschlüsselt, der Schlüssel liegt im Tresor."),
    ("Danke, das war es für heute.", [],
     "Gern geschehen, bis morgen!"),
]

START = datetime(2024, 3, 5, 9, 0, tzinfo=UTC)


def write_script(mem: Memory, session_id: str, script: Sequence[Turn], *, start: datetime = START,
                 repeat: int = 1) -> int:
    """Write ``script`` (``repeat`` times) as an agent loop would; returns the number of turns."""
    n = 0
    when = start
    for r in range(repeat):
        for i, (user, tools, reply) in enumerate(script):
            msgs: list[dict[str, Any]] = [{"role": "user", "content": user, "created_at": when}]
            for j, (name, args, result) in enumerate(tools):
                call_id = f"call_{r}_{i}_{j}"
                msgs.append({
                    "role": "assistant", "content": None, "created_at": when,
                    "tool_calls": [{"id": call_id, "type": "function",
                                    "function": {"name": name, "arguments": args}}],
                })
                msgs.append({"role": "tool", "tool_call_id": call_id, "content": result, "created_at": when})
            msgs.append({"role": "assistant", "content": reply, "created_at": when})
            mem.add_messages(session_id, msgs)
            when += timedelta(minutes=3)
            n += 1
    return n


def write_locomo(mem: Memory, path: Path, session_id: str, *, sessions: int | None = None) -> int:
    """A LoCoMo conversation as one memlane session (speaker A as user, B as assistant)."""
    conv = load_conversation(path)
    count = 0
    for s in conv.sessions[:sessions]:
        msgs = conv.session_messages(s, session_id=session_id)
        mem.add_messages(session_id, msgs)
        count += len(msgs)
    return count


def tool_groups_intact(messages: Sequence[dict[str, Any]]) -> bool:
    """Every tool message directly follows its call (or a sibling result of the same call),
    and every call is answered before the conversation moves on — what chat APIs require."""
    open_ids: set[str] = set()
    for m in [*messages, {"role": "end"}]:
        if m["role"] == "tool":
            if m.get("tool_call_id") not in open_ids:
                return False
            open_ids.discard(m["tool_call_id"])
            continue
        if open_ids:
            return False  # a call left unanswered
        if m["role"] == "assistant" and m.get("tool_calls"):
            open_ids = {c["id"] for c in m["tool_calls"]}
    return True


def dumps(messages: Sequence[dict[str, Any]]) -> str:
    return json.dumps(messages, ensure_ascii=False, default=str)
