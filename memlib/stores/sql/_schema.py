"""The SQL store's schema, version 7, once per dialect; ``{s}`` is the schema prefix.

``records.body`` is the one source of truth and ``vectors`` cannot be derived (their model
may be gone); an upgrade drops the rest (``DERIVED``) and rebuilds it (docs/contract.md).
"""

from __future__ import annotations

SCHEMA_VERSION = 7

DERIVED = (
    *(f"DROP TABLE IF EXISTS {{s}}{table}" for table in ("postings", "terms", "scope_stats")),
    *(
        f"DROP INDEX IF EXISTS {{s}}{index}"
        for index in (
            "records_scope_kind",
            "records_retracts",
            "records_recent",
            "records_source",
            "records_stored",
        )
    ),
)

SQLITE = (
    "CREATE TABLE IF NOT EXISTS memlib_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    # id: append order; captured_ts: captured_at.timestamp(), as rank_key; captured_us:
    # captured_at in microseconds, exact; body: the record's JSON, as in JSONL; tokens,
    # content_tokens: a conversation's length in terms, all and without stopwords;
    # stored_us: stored_at in microseconds, exact (derived from the body, as they are).
    "CREATE TABLE IF NOT EXISTS records (id INTEGER PRIMARY KEY, user_scope TEXT NOT NULL, "
    "memory_id TEXT NOT NULL, kind TEXT NOT NULL, captured_ts REAL NOT NULL, "
    "captured_us INTEGER NOT NULL, retracts TEXT, body TEXT NOT NULL, tokens INTEGER, "
    "content_tokens INTEGER, stored_us INTEGER, UNIQUE (user_scope, memory_id))",
    "CREATE INDEX records_scope_kind ON records (user_scope, kind) WHERE kind <> 'conversation'",
    "CREATE INDEX records_retracts ON records (user_scope, retracts) WHERE retracts IS NOT NULL",
    # The top-k walk reads a large group newest first.
    "CREATE INDEX records_recent ON records (user_scope, captured_ts)",
    # ``known_at``: the records stored after an instant, and their lengths, from the index
    # alone (memlib/stores/sql/_known_at.py).
    "CREATE INDEX records_stored ON records (user_scope, stored_us, tokens, content_tokens)",
    # A conversation's neighbours in its source (stores/_sources.py), by append order.
    "CREATE INDEX records_source ON records (user_scope, "
    "CASE WHEN json_valid(body) THEN json_extract(body, '$.source.source_id') END, id) "
    "WHERE kind = 'conversation'",
    "CREATE TABLE terms (id INTEGER PRIMARY KEY, user_scope TEXT NOT NULL, term TEXT NOT NULL, "
    "UNIQUE (user_scope, term))",
    # One run per term per written batch: record ids (little-endian int64), the term's
    # frequency in each and each one's two lengths, parallel to them.
    "CREATE TABLE postings (term_id INTEGER NOT NULL, first_id INTEGER NOT NULL, "
    "docs BLOB NOT NULL, tfs BLOB NOT NULL, lengths BLOB NOT NULL, "
    "PRIMARY KEY (term_id, first_id)) WITHOUT ROWID",
    "CREATE TABLE scope_stats (user_scope TEXT PRIMARY KEY, "
    "searched INTEGER NOT NULL DEFAULT 0, retracted INTEGER NOT NULL DEFAULT 0, "
    "tokens INTEGER NOT NULL DEFAULT 0, content_tokens INTEGER NOT NULL DEFAULT 0, "
    "vector_model TEXT, vector_dimension INTEGER NOT NULL DEFAULT 0, "
    "vector_changes INTEGER NOT NULL DEFAULT 0, vector_resets INTEGER NOT NULL DEFAULT 0)",
    # vector: dimension little-endian float32
    "CREATE TABLE IF NOT EXISTS vectors (record_id INTEGER PRIMARY KEY REFERENCES records (id), "
    "user_scope TEXT NOT NULL, vector BLOB NOT NULL)",
    # A scope's vectors in record order (the rowid is the index's last column).
    "CREATE INDEX IF NOT EXISTS vectors_scope ON vectors (user_scope)",
)

POSTGRES = (
    "CREATE TABLE IF NOT EXISTS {s}meta (key text PRIMARY KEY, value text NOT NULL)",
    "CREATE TABLE IF NOT EXISTS {s}records (id bigserial PRIMARY KEY, user_scope text NOT NULL, "
    'memory_id text COLLATE "C" NOT NULL, kind text NOT NULL, '
    "captured_ts double precision NOT NULL, captured_us bigint NOT NULL, "
    'retracts text COLLATE "C", body text NOT NULL, tokens integer, content_tokens integer, '
    "stored_us bigint, UNIQUE (user_scope, memory_id))",
    "CREATE INDEX records_scope_kind ON {s}records (user_scope, kind) WHERE kind <> 'conversation'",
    "CREATE INDEX records_retracts ON {s}records (user_scope, retracts) WHERE retracts IS NOT NULL",
    "CREATE INDEX records_recent ON {s}records (user_scope, captured_ts)",
    "CREATE INDEX records_stored ON {s}records (user_scope, stored_us) "
    "INCLUDE (id, tokens, content_tokens)",
    "CREATE INDEX records_source ON {s}records "
    "(user_scope, ((body::jsonb) -> 'source' ->> 'source_id'), id) WHERE kind = 'conversation'",
    # Runs as in SQLite, keyed by the term itself, ids big-endian as int8send writes them.
    'CREATE TABLE {s}postings (user_scope text NOT NULL, term text COLLATE "C" NOT NULL, '
    "first_id bigint NOT NULL, record_ids bytea NOT NULL, tfs bytea NOT NULL, "
    "lengths bytea NOT NULL, PRIMARY KEY (user_scope, term, first_id))",
    "CREATE TABLE {s}scope_stats (user_scope text PRIMARY KEY, "
    "searched bigint NOT NULL DEFAULT 0, retracted bigint NOT NULL DEFAULT 0, "
    "tokens bigint NOT NULL DEFAULT 0, content_tokens bigint NOT NULL DEFAULT 0, "
    "vector_model text, vector_dimension integer NOT NULL DEFAULT 0, "
    "vector_changes bigint NOT NULL DEFAULT 0, vector_resets bigint NOT NULL DEFAULT 0)",
    "CREATE TABLE IF NOT EXISTS {s}vectors (record_id bigint PRIMARY KEY "
    "REFERENCES {s}records (id), user_scope text NOT NULL, vector bytea NOT NULL)",
    "CREATE INDEX IF NOT EXISTS vectors_scope ON {s}vectors (user_scope, record_id)",
)
