-- Registered session clients (seed 001). Rows are never deleted: a gone
-- client keeps its name spent for the session.

-- +goose Up
CREATE TABLE session_clients (
    ord            INTEGER PRIMARY KEY,
    id             TEXT    NOT NULL UNIQUE,
    session_id     TEXT    NOT NULL REFERENCES sessions (id),
    name           TEXT    NOT NULL,
    requested_name TEXT    NOT NULL,
    tools          TEXT    NOT NULL DEFAULT '[]',
    ttl_seconds    INTEGER NOT NULL DEFAULT 0,   -- 0: lifetime never
    expires_at     TEXT,
    created_at     TEXT    NOT NULL,
    last_ping_at   TEXT    NOT NULL,
    gone_at        TEXT,
    gone_reason    TEXT    NOT NULL DEFAULT '',
    UNIQUE (session_id, name)
);
CREATE INDEX session_clients_due ON session_clients (expires_at) WHERE gone_at IS NULL;

-- +goose Down
DROP TABLE session_clients;
