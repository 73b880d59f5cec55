"""Append-only, numbered migrations of the SQLite store.

Never edit a migration that has shipped: add a new one at the end. Each is
applied once, in its own transaction, and recorded in ``schema_migrations``.
Numbers are reserved by area so parallel work does not collide:
1 log, 2 vectors (recall), 3 context/state, 4 notes/rooms, 5 server keys, 14 response cache, 6+ later.
"""

from __future__ import annotations

from memlane.store.data_versions import SQLITE_SQL as DATA_VERSIONS_SQLITE
from memlane.store.session_scoping import scope_sessions_sql

MIGRATIONS: dict[int, tuple[str, str]] = {
    1: (
        "conversation log",
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            tenant_id TEXT NOT NULL DEFAULT 'default',
            user_id TEXT,
            agent_id TEXT,
            title TEXT,
            system_prompt TEXT,
            metadata TEXT NOT NULL DEFAULT '{}',
            status TEXT NOT NULL DEFAULT 'active',
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            last_active_at REAL NOT NULL,
            message_count INTEGER NOT NULL DEFAULT 0
        );
        CREATE INDEX sessions_by_tenant_user ON sessions(tenant_id, user_id, last_active_at);
        CREATE INDEX sessions_by_activity ON sessions(last_active_at);

        CREATE TABLE messages (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            role TEXT NOT NULL CHECK (role IN ('system', 'user', 'assistant', 'tool')),
            content TEXT NOT NULL,
            name TEXT,
            tool_calls TEXT,
            tool_call_id TEXT,
            author_id TEXT,
            author_name TEXT,
            turn_id TEXT,
            created_at REAL NOT NULL,
            metadata TEXT NOT NULL DEFAULT '{}',
            importance REAL NOT NULL DEFAULT 0,
            pinned INTEGER NOT NULL DEFAULT 0,
            hidden INTEGER NOT NULL DEFAULT 0,
            token_count INTEGER
        );
        -- "newest N of a session" walks this index backwards; it never reads the history.
        CREATE INDEX messages_by_session ON messages(session_id, id);
        CREATE INDEX messages_by_time ON messages(created_at);
        CREATE INDEX messages_by_tool_call ON messages(session_id, tool_call_id)
            WHERE tool_call_id IS NOT NULL;

        CREATE TABLE tool_call_ids (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            call_id TEXT NOT NULL,
            message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            PRIMARY KEY (session_id, call_id)
        ) WITHOUT ROWID;

        CREATE TABLE turns (
            turn_id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            user_message_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,
            assistant_message_id INTEGER REFERENCES messages(id) ON DELETE CASCADE,
            intent TEXT,
            action_name TEXT,
            job_refs TEXT NOT NULL DEFAULT '[]',
            model_used TEXT,
            confidence_score REAL,
            processing_time REAL,
            resolved_query TEXT,
            context_used INTEGER,
            metadata TEXT NOT NULL DEFAULT '{}',
            created_at REAL NOT NULL
        );
        CREATE INDEX turns_by_session ON turns(session_id, created_at);

        CREATE TABLE derived (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            value TEXT NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (session_id, kind)
        );

        CREATE VIRTUAL TABLE messages_fts USING fts5(
            content, content='messages', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
        END;
        CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content)
                VALUES ('delete', old.id, old.content);
        END;
        CREATE TRIGGER messages_fts_update AFTER UPDATE OF content ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content)
                VALUES ('delete', old.id, old.content);
            INSERT INTO messages_fts(rowid, content) VALUES (new.id, new.content);
        END;
        """,
    ),
    2: (
        "message vectors",
        """
        -- Which embedder made the vectors (model_id, dimension, recipe) and a counter of
        -- vector deletions that tells every process's in-memory matrix to reload.
        CREATE TABLE vector_meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        -- One unit vector per message (float32 little-endian). Derived data: it cascades
        -- with its message, so forget/delete never leaves a vector behind, whichever
        -- connection deletes. seq orders writes so readers can load only what is new.
        CREATE TABLE message_vectors (
            message_id INTEGER PRIMARY KEY REFERENCES messages(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            embedding BLOB NOT NULL
        );
        CREATE INDEX message_vectors_by_seq ON message_vectors(seq);
        CREATE TRIGGER message_vectors_deleted AFTER DELETE ON message_vectors BEGIN
            INSERT INTO vector_meta(key, value) VALUES ('deletions', '1')
                ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1;
        END;
        """,
    ),
    4: (
        "notes, rooms, audit log, archive",
        """
        -- Long-term notes: distilled knowledge, separate from the session lane. A note is
        -- derived from messages but outlives them when retention prunes the log (that is
        -- what promotion is for); "forget" removes it explicitly (rooms/forget.py), so
        -- there is no foreign key to sessions or messages here on purpose.
        -- Versions: a contradicting statement closes the old row (valid_to) and opens a new
        -- one in the same lineage; history is one lineage, oldest first.
        CREATE TABLE notes (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            lineage_id INTEGER,
            tenant_id TEXT NOT NULL DEFAULT 'default',
            user_id TEXT,
            session_id TEXT,
            kind TEXT NOT NULL,
            slot TEXT,
            value TEXT,
            polarity INTEGER NOT NULL DEFAULT 1,
            text TEXT NOT NULL,
            author_id TEXT,
            author_name TEXT,
            importance REAL NOT NULL DEFAULT 0.5,
            confidence REAL NOT NULL DEFAULT 1.0,
            entities TEXT NOT NULL DEFAULT '[]',
            metadata TEXT NOT NULL DEFAULT '{}',
            origin TEXT NOT NULL DEFAULT 'extracted',
            valid_from REAL NOT NULL,
            valid_to REAL,
            supersedes INTEGER REFERENCES notes(id) ON DELETE SET NULL,
            superseded_by INTEGER REFERENCES notes(id) ON DELETE SET NULL,
            seen_count INTEGER NOT NULL DEFAULT 1,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL
        );
        -- "what is true now about this person in this slot" is the gate's hot question.
        CREATE INDEX notes_current_by_slot ON notes(tenant_id, user_id, slot) WHERE valid_to IS NULL;
        CREATE INDEX notes_by_session ON notes(session_id);
        CREATE INDEX notes_by_lineage ON notes(lineage_id, valid_from);

        CREATE TABLE note_sources (
            note_id INTEGER NOT NULL REFERENCES notes(id) ON DELETE CASCADE,
            message_id INTEGER NOT NULL,
            session_id TEXT NOT NULL,
            PRIMARY KEY (note_id, message_id)
        ) WITHOUT ROWID;
        CREATE INDEX note_sources_by_message ON note_sources(message_id);
        CREATE INDEX note_sources_by_session ON note_sources(session_id);

        CREATE VIRTUAL TABLE notes_fts USING fts5(
            text, content='notes', content_rowid='id',
            tokenize='porter unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER notes_fts_insert AFTER INSERT ON notes BEGIN
            INSERT INTO notes_fts(rowid, text) VALUES (new.id, new.text);
        END;
        CREATE TRIGGER notes_fts_delete AFTER DELETE ON notes BEGIN
            INSERT INTO notes_fts(notes_fts, rowid, text) VALUES ('delete', old.id, old.text);
        END;
        CREATE TRIGGER notes_fts_update AFTER UPDATE OF text ON notes BEGIN
            INSERT INTO notes_fts(notes_fts, rowid, text) VALUES ('delete', old.id, old.text);
            INSERT INTO notes_fts(rowid, text) VALUES (new.id, new.text);
        END;

        -- Named entities, links, dates and system actions found in messages, kept beside
        -- the dialogue. Per-message annotations: they go with their message.
        CREATE TABLE message_facets (
            message_id INTEGER NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
            session_id TEXT NOT NULL,
            kind TEXT NOT NULL,
            value TEXT NOT NULL,
            at REAL NOT NULL,
            PRIMARY KEY (message_id, kind, value)
        ) WITHOUT ROWID;
        CREATE INDEX message_facets_by_value ON message_facets(kind, value);
        CREATE INDEX message_facets_by_session ON message_facets(session_id);

        -- How far the promotion gate has read each session's log.
        CREATE TABLE promotion_progress (
            session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
            last_message_id INTEGER NOT NULL,
            updated_at REAL NOT NULL
        );

        -- Conversations moved to the archive tier: out of context, still searchable.
        CREATE TABLE session_archive (
            session_id TEXT PRIMARY KEY REFERENCES sessions(id) ON DELETE CASCADE,
            archived_at REAL NOT NULL,
            previous_status TEXT NOT NULL,
            reason TEXT
        );

        -- Every memory command: who, what, when, result. No foreign keys: the record of a
        -- "forget" must outlive what it forgot.
        CREATE TABLE audit_log (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at REAL NOT NULL,
            tenant_id TEXT NOT NULL DEFAULT 'default',
            session_id TEXT,
            actor_id TEXT,
            actor_name TEXT,
            is_anchor INTEGER NOT NULL,
            action TEXT NOT NULL,
            command TEXT,
            allowed INTEGER NOT NULL,
            result TEXT NOT NULL,
            detail TEXT NOT NULL DEFAULT '{}'
        );
        CREATE INDEX audit_log_by_session ON audit_log(session_id, at);
        CREATE INDEX audit_log_by_time ON audit_log(at);
        """,
    ),
    5: (
        "server api keys",
        """
        -- One row per API key of the REST/MCP server. Only a SHA-256 of the key's secret
        -- is stored: a leaked database file must not hand out working keys.
        CREATE TABLE api_keys (
            id TEXT PRIMARY KEY,
            tenant_id TEXT NOT NULL,
            name TEXT,
            key_hash TEXT NOT NULL,
            created_at REAL NOT NULL,
            revoked_at REAL,
            last_used_at REAL
        );
        CREATE INDEX api_keys_by_tenant ON api_keys(tenant_id);
        """,
    ),
    7: (
        "message items",
        """
        -- The framework item a message was given as (Responses items, content parts,
        -- Anthropic blocks), JSON text kept verbatim; NULL for a plain chat message.
        ALTER TABLE messages ADD COLUMN item TEXT;
        """,
    ),
    8: (
        "records",
        """
        -- Opaque bytes by (namespace, key) for integrations (LangGraph checkpoints and
        -- store values): not conversation, never read by memlane (store/records.py).
        CREATE TABLE records (
            namespace TEXT NOT NULL,
            key TEXT NOT NULL,
            value BLOB NOT NULL,
            updated_at REAL NOT NULL,
            PRIMARY KEY (namespace, key)
        ) WITHOUT ROWID;
        """,
    ),
    9: (
        "change events",
        """
        -- The outbox of change events (store/events.py): ids, kind, time, tenant, never
        -- content. Triggers write it in the same transaction as the change, whatever code
        -- path made it, so a reader that saw event N has seen every change before it.
        CREATE TABLE change_events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            at REAL NOT NULL,
            tenant_id TEXT,
            kind TEXT NOT NULL,
            session_id TEXT,
            subject_id INTEGER
        );
        CREATE INDEX change_events_by_tenant ON change_events(tenant_id, id);
        CREATE TRIGGER change_session_created AFTER INSERT ON sessions BEGIN
            INSERT INTO change_events(at, tenant_id, kind, session_id)
                VALUES ((julianday('now') - 2440587.5) * 86400.0, new.tenant_id, 'session.created', new.id);
        END;
        CREATE TRIGGER change_session_updated AFTER UPDATE OF
            title, system_prompt, metadata, status, user_id, agent_id ON sessions BEGIN
            INSERT INTO change_events(at, tenant_id, kind, session_id)
                VALUES ((julianday('now') - 2440587.5) * 86400.0, new.tenant_id, 'session.updated', new.id);
        END;
        CREATE TRIGGER change_session_forgotten AFTER DELETE ON sessions BEGIN
            INSERT INTO change_events(at, tenant_id, kind, session_id)
                VALUES ((julianday('now') - 2440587.5) * 86400.0, old.tenant_id, 'session.forgotten', old.id);
        END;
        CREATE TRIGGER change_session_archived AFTER INSERT ON session_archive BEGIN
            INSERT INTO change_events(at, tenant_id, kind, session_id)
                SELECT (julianday('now') - 2440587.5) * 86400.0, tenant_id, 'session.archived', id
                FROM sessions WHERE id = new.session_id;
        END;
        CREATE TRIGGER change_message_appended AFTER INSERT ON messages BEGIN
            INSERT INTO change_events(at, tenant_id, kind, session_id, subject_id)
                SELECT (julianday('now') - 2440587.5) * 86400.0, tenant_id, 'message.appended', id, new.id
                FROM sessions WHERE id = new.session_id;
        END;
        -- A forgotten session's messages go with it: its one session.forgotten says so.
        CREATE TRIGGER change_message_forgotten AFTER DELETE ON messages BEGIN
            INSERT INTO change_events(at, tenant_id, kind, session_id, subject_id)
                SELECT (julianday('now') - 2440587.5) * 86400.0, tenant_id, 'message.forgotten', id, old.id
                FROM sessions WHERE id = old.session_id;
        END;
        CREATE TRIGGER change_note_added AFTER INSERT ON notes BEGIN
            INSERT INTO change_events(at, tenant_id, kind, session_id, subject_id)
                VALUES ((julianday('now') - 2440587.5) * 86400.0, new.tenant_id, 'note.added', new.session_id, new.id);
        END;
        CREATE TRIGGER change_note_superseded AFTER UPDATE OF valid_to ON notes
            WHEN old.valid_to IS NULL AND new.valid_to IS NOT NULL BEGIN
            INSERT INTO change_events(at, tenant_id, kind, session_id, subject_id)
                VALUES ((julianday('now') - 2440587.5) * 86400.0, new.tenant_id, 'note.superseded', new.session_id, new.id);
        END;
        CREATE TRIGGER change_note_removed AFTER DELETE ON notes BEGIN
            INSERT INTO change_events(at, tenant_id, kind, session_id, subject_id)
                VALUES ((julianday('now') - 2440587.5) * 86400.0, old.tenant_id, 'note.removed', old.session_id, old.id);
        END;
        """,
    ),
    10: (
        "language-aware keyword index",
        """
        -- Each message keeps the language it was judged to be in ('de', 'en'), and the
        -- keyword index holds its words as Snowball stems of that language: FTS5's porter
        -- tokenizer knows English only, so "Datenbanken" never found "Datenbank". The
        -- stems come from memlane_stems(), a function every memlane connection registers
        -- (store/sqlite_driver.py); the index reads them through a view, so 'rebuild' and
        -- 'integrity-check' see the same text the triggers wrote.
        ALTER TABLE messages ADD COLUMN lang TEXT;
        UPDATE messages SET lang = memlane_language(content);
        DROP TRIGGER messages_fts_insert;
        DROP TRIGGER messages_fts_delete;
        DROP TRIGGER messages_fts_update;
        DROP TABLE messages_fts;
        CREATE VIEW messages_stems AS
            SELECT id, memlane_stems(content, lang) AS content FROM messages;
        CREATE VIRTUAL TABLE messages_fts USING fts5(
            content, content='messages_stems', content_rowid='id',
            tokenize='unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages BEGIN
            INSERT INTO messages_fts(rowid, content) VALUES (new.id, memlane_stems(new.content, new.lang));
        END;
        CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content)
                VALUES ('delete', old.id, memlane_stems(old.content, old.lang));
        END;
        CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, lang ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content)
                VALUES ('delete', old.id, memlane_stems(old.content, old.lang));
            INSERT INTO messages_fts(rowid, content) VALUES (new.id, memlane_stems(new.content, new.lang));
        END;
        INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');
        """,
    ),
    11: (
        "vector index files",
        """
        -- Which vectors were deleted (ids and seqs, never content), so the memory-mapped
        -- vector index beside the database (store/vector_files.py) erases the same rows
        -- from its files; trimmed once the files have applied them.
        CREATE TABLE vector_deletions (
            seq INTEGER PRIMARY KEY AUTOINCREMENT,
            message_id INTEGER NOT NULL,
            vector_seq INTEGER NOT NULL
        );
        DROP TRIGGER message_vectors_deleted;
        CREATE TRIGGER message_vectors_deleted AFTER DELETE ON message_vectors BEGIN
            INSERT INTO vector_meta(key, value) VALUES ('deletions', '1')
                ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1;
            INSERT INTO vector_deletions(message_id, vector_seq) VALUES (old.message_id, old.seq);
        END;
        -- A session's owners decide whose searches see its vectors: the index re-reads
        -- them when this counter moves.
        CREATE TRIGGER vector_owners_changed AFTER UPDATE OF user_id, agent_id, tenant_id ON sessions BEGIN
            INSERT INTO vector_meta(key, value) VALUES ('owners', '1')
                ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1;
        END;
        """,
    ),
    12: (
        "forgotten sessions leave the outbox",
        """
        -- Forget is final: when a session goes, the events that name it go too (its
        -- messages' and its own), in the same transaction; only the session.forgotten
        -- marker the AFTER DELETE trigger writes is left, so other instances learn to drop
        -- what they cached, and pruning removes that marker within the hour
        -- (store/events.py). Note events stay, without the session id: a note learned
        -- from the session may outlive it (retention), and caches must hear of its removal.
        CREATE INDEX change_events_by_session ON change_events(session_id);
        CREATE TRIGGER change_session_scrub BEFORE DELETE ON sessions BEGIN
            UPDATE change_events SET session_id = NULL
                WHERE session_id = old.id AND kind LIKE 'note.%';
            DELETE FROM change_events WHERE session_id = old.id;
        END;
        -- the highest event id pruning has removed: a follower that stopped before it has
        -- missed events and must drop everything it cached (store/events.py)
        CREATE TABLE change_events_pruned (
            one INTEGER PRIMARY KEY CHECK (one = 1),
            through_id INTEGER NOT NULL
        );
        """,
    ),
    14: (
        "response cache",
        """
        -- Answers of the response cache (store/response_cache.py), keyed by tenant, scope
        -- (user, or session without a user), model, context fingerprint and question.
        -- An answer goes with the session it was answered in, and (triggers below) when a
        -- message or note it was built from is deleted or the note superseded.
        CREATE TABLE response_cache (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            tenant_id TEXT NOT NULL,
            scope TEXT NOT NULL,
            model TEXT NOT NULL,
            fingerprint TEXT NOT NULL,
            query_key TEXT NOT NULL,
            query TEXT NOT NULL,
            response TEXT NOT NULL,
            created_at REAL NOT NULL,
            expires_at REAL,
            session_id TEXT REFERENCES sessions(id) ON DELETE CASCADE,
            language TEXT,
            vector BLOB,
            vector_model TEXT,
            cost_seconds REAL,
            cost_tokens INTEGER,
            hits INTEGER NOT NULL DEFAULT 0,
            last_hit_at REAL
        );
        CREATE INDEX response_cache_by_key ON response_cache(tenant_id, scope, model, fingerprint, id);
        CREATE INDEX response_cache_by_session ON response_cache(session_id);
        CREATE TABLE response_cache_sources (
            entry_id INTEGER NOT NULL REFERENCES response_cache(id) ON DELETE CASCADE,
            message_id INTEGER,
            note_id INTEGER
        );
        CREATE INDEX response_cache_sources_by_entry ON response_cache_sources(entry_id);
        CREATE INDEX response_cache_sources_by_message ON response_cache_sources(message_id);
        CREATE INDEX response_cache_sources_by_note ON response_cache_sources(note_id);
        CREATE TABLE response_cache_counts (
            tenant_id TEXT PRIMARY KEY,
            lookups INTEGER NOT NULL DEFAULT 0,
            hits INTEGER NOT NULL DEFAULT 0,
            saved_seconds REAL NOT NULL DEFAULT 0,
            saved_tokens INTEGER NOT NULL DEFAULT 0
        );
        CREATE TRIGGER response_cache_message_gone AFTER DELETE ON messages BEGIN
            DELETE FROM response_cache WHERE id IN
                (SELECT entry_id FROM response_cache_sources WHERE message_id = old.id);
        END;
        CREATE TRIGGER response_cache_note_gone AFTER DELETE ON notes BEGIN
            DELETE FROM response_cache WHERE id IN
                (SELECT entry_id FROM response_cache_sources WHERE note_id = old.id);
        END;
        CREATE TRIGGER response_cache_note_superseded AFTER UPDATE OF valid_to ON notes
            WHEN old.valid_to IS NULL AND new.valid_to IS NOT NULL BEGIN
            DELETE FROM response_cache WHERE id IN
                (SELECT entry_id FROM response_cache_sources WHERE note_id = new.id);
        END;
        """,
    ),
    15: (
        "language-aware notes index",
        """
        -- Notes are searched like messages (migration 10): each keeps the language it was
        -- judged to be in, and notes_fts holds its words as Snowball stems of it, read
        -- through a view so 'rebuild' sees the text the triggers wrote.
        ALTER TABLE notes ADD COLUMN lang TEXT;
        UPDATE notes SET lang = memlane_language(text);
        DROP TRIGGER notes_fts_insert;
        DROP TRIGGER notes_fts_delete;
        DROP TRIGGER notes_fts_update;
        DROP TABLE notes_fts;
        CREATE VIEW notes_stems AS
            SELECT id, memlane_stems(text, lang) AS text FROM notes;
        CREATE VIRTUAL TABLE notes_fts USING fts5(
            text, content='notes_stems', content_rowid='id',
            tokenize='unicode61 remove_diacritics 2'
        );
        CREATE TRIGGER notes_fts_insert AFTER INSERT ON notes BEGIN
            INSERT INTO notes_fts(rowid, text) VALUES (new.id, memlane_stems(new.text, new.lang));
        END;
        CREATE TRIGGER notes_fts_delete AFTER DELETE ON notes BEGIN
            INSERT INTO notes_fts(notes_fts, rowid, text) VALUES ('delete', old.id, memlane_stems(old.text, old.lang));
        END;
        CREATE TRIGGER notes_fts_update AFTER UPDATE OF text, lang ON notes BEGIN
            INSERT INTO notes_fts(notes_fts, rowid, text) VALUES ('delete', old.id, memlane_stems(old.text, old.lang));
            INSERT INTO notes_fts(rowid, text) VALUES (new.id, memlane_stems(new.text, new.lang));
        END;
        INSERT INTO notes_fts(notes_fts) VALUES ('rebuild');
        """,
    ),
    18: (
        "keyword index written after the message",
        """
        -- A message is stored without a language (lang NULL) and is not in the keyword index
        -- yet: judging the language (py3langid) and stemming cost the writer ~0.3 ms a message
        -- and ~100 ms plus 45 MB for the first one. SQLiteStore.index_pending_keywords judges
        -- the pending rows, and setting lang writes their index row (the update trigger); a
        -- search and flush() run it first, background work runs it after writes, so nothing
        -- is searched stale after flush() and a kill -9 leaves only rows still pending.
        -- Rows an older writer left without a language were indexed as English: judge them
        -- now, through the old triggers, so the index matches the view below.
        UPDATE messages SET lang = memlane_language(content) WHERE lang IS NULL;
        CREATE INDEX messages_keywords_pending ON messages(id) WHERE lang IS NULL;
        DROP TRIGGER messages_fts_insert;
        DROP TRIGGER messages_fts_delete;
        DROP TRIGGER messages_fts_update;
        DROP VIEW messages_stems;
        CREATE VIEW messages_stems AS
            SELECT id, memlane_stems(content, lang) AS content FROM messages WHERE lang IS NOT NULL;
        CREATE TRIGGER messages_fts_insert AFTER INSERT ON messages WHEN new.lang IS NOT NULL BEGIN
            INSERT INTO messages_fts(rowid, content) VALUES (new.id, memlane_stems(new.content, new.lang));
        END;
        CREATE TRIGGER messages_fts_delete AFTER DELETE ON messages WHEN old.lang IS NOT NULL BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content)
                VALUES ('delete', old.id, memlane_stems(old.content, old.lang));
        END;
        CREATE TRIGGER messages_fts_update AFTER UPDATE OF content, lang ON messages BEGIN
            INSERT INTO messages_fts(messages_fts, rowid, content)
                SELECT 'delete', old.id, memlane_stems(old.content, old.lang) WHERE old.lang IS NOT NULL;
            INSERT INTO messages_fts(rowid, content)
                SELECT new.id, memlane_stems(new.content, new.lang) WHERE new.lang IS NOT NULL;
        END;
        """,
    ),
    13: (
        "tenant-scoped session ids",
        # store/session_scoping.py: sessions of tenants other than "default" move to their key
        scope_sessions_sql(separator="char(31)", position="instr", temp="CREATE TEMP TABLE"),
    ),
    16: (
        "keyword index holds German compounds' parts",
        """
        -- memlane_stems() now writes a German compound's parts beside it ("datenbanksicherung
        -- datenbank sicherung", language.with_compound_parts), so "Sicherung der Datenbank"
        -- finds "Datenbanksicherung". The triggers delete a row by the terms memlane_stems()
        -- gives now: rows indexed before must be indexed again the same way first.
        INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');
        INSERT INTO notes_fts(notes_fts) VALUES ('rebuild');
        """,
    ),
    19: (
        "session versions",
        # Moved by every change of what a session's window shows (rows.BUMP_VERSION), so
        # the shared hot cache keys a window by it: a hide, pin or forget racing another
        # instance's read can no longer leave an old window under the current key.
        "ALTER TABLE sessions ADD COLUMN version INTEGER NOT NULL DEFAULT 0;",
    ),
    # A counter per tenant moved by every write a context packet may read (summaries,
    # state, notes, keyword index, vectors...): the shared hot cache keys packets by it.
    20: ("tenant data versions", DATA_VERSIONS_SQLITE),
    21: (
        "note slots by word stems",
        # Extracted notes' slots hold their words' grouping form: the Snowball stem in the
        # note's language (was English plural stripping), so "Ich mag keine Katze" finds
        # the slot of "Ich mag Katzen". Older slots are rewritten by the store in Python
        # right after this marker (SLOT_STEMS, store/notes.restem_note_slots).
        "SELECT 1",
    ),
    22: (
        "messages by author",
        # Lets author_names() skip from one name to the next (sql_reads.AUTHOR_NAMES) instead
        # of reading every message: 156 ms of a fresh process's first search at 100K.
        "CREATE INDEX messages_by_author ON messages(author_name) WHERE author_name IS NOT NULL;",
    ),
}

#: The migration the store completes in Python: older note slots in their words' stems.
SLOT_STEMS = 21
