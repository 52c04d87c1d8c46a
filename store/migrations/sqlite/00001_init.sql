-- Baton store schema, version 1 (SQLite).
-- Timestamps are TEXT in baton.TimeLayout (UTC, milliseconds); JSON columns
-- are TEXT. Each catalogue table has an INTEGER PRIMARY KEY (the rowid) that
-- gives the stable insertion order list cursors are built on.

-- +goose Up
CREATE TABLE profiles (
    ord                 INTEGER PRIMARY KEY,
    id                  TEXT    NOT NULL UNIQUE,
    name                TEXT    NOT NULL UNIQUE, -- deleted rows keep their name
    primary_provider    TEXT    NOT NULL,
    fallback_providers  TEXT    NOT NULL DEFAULT '[]',
    mcp_servers         TEXT    NOT NULL DEFAULT '[]',
    allowed_tools       TEXT    NOT NULL DEFAULT '[]',
    available_sandboxes TEXT    NOT NULL DEFAULT '[]',
    system_prompt       TEXT    NOT NULL DEFAULT '',
    max_iterations      INTEGER NOT NULL DEFAULT 0,
    created_at          TEXT    NOT NULL,
    updated_at          TEXT    NOT NULL,
    deleted_at          TEXT
);

CREATE TABLE keys (
    ord          INTEGER PRIMARY KEY,
    id           TEXT NOT NULL UNIQUE,
    name         TEXT NOT NULL,             -- session keys: the session id
    key_hash     TEXT NOT NULL,
    key_prefix   TEXT NOT NULL,
    role         TEXT NOT NULL CHECK (role IN ('client', 'session', 'admin')),
    profile_id   TEXT,
    client_id    TEXT,                      -- session keys: the client key
    scopes       TEXT NOT NULL DEFAULT '[]',
    created_at   TEXT NOT NULL,
    last_used_at TEXT,
    deleted_at   TEXT
);
CREATE INDEX keys_hash ON keys (key_hash);
CREATE INDEX keys_role ON keys (role, ord);
CREATE INDEX keys_profile ON keys (profile_id);
CREATE INDEX keys_client ON keys (client_id);
CREATE INDEX keys_name ON keys (name);

CREATE TABLE sessions (
    ord            INTEGER PRIMARY KEY,
    id             TEXT NOT NULL UNIQUE,
    client_key_id  TEXT NOT NULL,
    profile_id     TEXT NOT NULL,
    state          TEXT NOT NULL CHECK (state IN ('open', 'closed', 'error')),
    client_version TEXT,
    client_tools   TEXT NOT NULL DEFAULT '{}', -- {client key id: [tool]}
    sandbox_tools  TEXT NOT NULL DEFAULT '{}',
    subagent_tools TEXT NOT NULL DEFAULT '{}',
    created_at     TEXT NOT NULL,
    closed_at      TEXT
);
CREATE INDEX sessions_state ON sessions (state, ord);

-- A rowid table, not WITHOUT ROWID: rows (payloads can be large) are appended
-- in commit order, and only the small (session_id, seq) and id index entries
-- land on per-session pages. That halves the pages a group commit writes.
CREATE TABLE session_events (
    session_id    TEXT    NOT NULL REFERENCES sessions (id),
    seq           INTEGER NOT NULL,
    id            TEXT    NOT NULL UNIQUE,
    client_key_id TEXT,
    event_type    TEXT    NOT NULL,
    payload       TEXT    NOT NULL,
    created_at    TEXT    NOT NULL,
    PRIMARY KEY (session_id, seq)
);
