-- Baton store schema, version 2 (SQLite): idempotency receipts.
-- scope is a digest of the caller's credential, the method and the path;
-- body is the response as it is replayed (fresh-only secrets removed).

-- +goose Up
CREATE TABLE idempotency_receipts (
    scope        TEXT    NOT NULL,
    idem_key     TEXT    NOT NULL,
    fingerprint  TEXT    NOT NULL,
    state        TEXT    NOT NULL CHECK (state IN ('in_flight', 'done')),
    status       INTEGER NOT NULL DEFAULT 0,
    content_type TEXT    NOT NULL DEFAULT '',
    body         BLOB    NOT NULL DEFAULT x'',
    created_at   TEXT    NOT NULL,
    completed_at TEXT,
    PRIMARY KEY (scope, idem_key)
);
CREATE INDEX idempotency_receipts_completed ON idempotency_receipts (completed_at) WHERE state = 'done';

-- +goose Down
DROP TABLE idempotency_receipts;
