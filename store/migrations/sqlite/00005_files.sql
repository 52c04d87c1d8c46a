-- Session files and artifacts (spec/executor.md, "Files and artifacts").
-- A session's files are keyed by a normalized relative path (package
-- filearea); directories are implicit. The content comes last so that
-- listings, which read only the record, leave it on its overflow pages.
-- An artifact belongs to a session or to an environment.

-- +goose Up
CREATE TABLE session_files (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    path       TEXT NOT NULL,
    size       INTEGER NOT NULL,
    sha256     TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    content    BLOB NOT NULL,
    PRIMARY KEY (session_id, path)
);

CREATE TABLE artifacts (
    ord            INTEGER PRIMARY KEY,
    id             TEXT NOT NULL UNIQUE,
    session_id     TEXT REFERENCES sessions (id),
    environment_id TEXT REFERENCES environments (id),
    name           TEXT NOT NULL,
    media_type     TEXT NOT NULL,
    size           INTEGER NOT NULL,
    sha256         TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    content        BLOB NOT NULL,
    CHECK ((session_id IS NULL) <> (environment_id IS NULL))
);

-- +goose Down
DROP TABLE artifacts;
DROP TABLE session_files;
