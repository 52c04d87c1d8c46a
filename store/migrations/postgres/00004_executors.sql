-- Executor administration (spec/executor.md): environments, machines,
-- their credentials, installation-wide settings (the executor token
-- signing key), and the two profile columns that refer to them.
-- Environments and machines are soft-deleted; a deleted one frees its
-- name. Credentials keep their row when revoked.

-- +goose Up
CREATE TABLE environments (
    ord        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    name       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    deleted_at TEXT
);
CREATE UNIQUE INDEX environments_name ON environments (name) WHERE deleted_at IS NULL;

CREATE TABLE machines (
    ord        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE,
    name       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    deleted_at TEXT
);
CREATE UNIQUE INDEX machines_name ON machines (name) WHERE deleted_at IS NULL;

CREATE TABLE executor_credentials (
    ord         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    scope       TEXT NOT NULL CHECK (scope IN ('environment', 'machine')),
    owner_id    TEXT NOT NULL,
    secret_hash TEXT NOT NULL UNIQUE, -- "sha256:<hex>" of the secret
    prefix      TEXT NOT NULL,
    created_at  TEXT NOT NULL,
    revoked_at  TEXT
);
CREATE INDEX executor_credentials_owner ON executor_credentials (scope, owner_id, ord);

CREATE TABLE settings (
    name       TEXT PRIMARY KEY,
    value      TEXT NOT NULL,
    created_at TEXT NOT NULL
);

ALTER TABLE profiles ADD COLUMN executor_environments TEXT NOT NULL DEFAULT '[]';
ALTER TABLE profiles ADD COLUMN brain TEXT NOT NULL DEFAULT '{"type":"server"}';

-- +goose Down
ALTER TABLE profiles DROP COLUMN brain;
ALTER TABLE profiles DROP COLUMN executor_environments;
DROP TABLE settings;
DROP TABLE executor_credentials;
DROP TABLE machines;
DROP TABLE environments;
