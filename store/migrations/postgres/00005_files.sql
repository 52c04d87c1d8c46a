-- Session files and artifacts (spec/executor.md, "Files and artifacts").
-- A session's files are keyed by a normalized relative path (package
-- filearea); directories are implicit. Paths compare byte-wise (COLLATE
-- "C"), so that a directory's files are one range of the primary key. An
-- artifact belongs to a session or to an environment.

-- +goose Up
CREATE TABLE session_files (
    session_id TEXT NOT NULL REFERENCES sessions (id),
    path       TEXT COLLATE "C" NOT NULL,
    size       BIGINT NOT NULL,
    sha256     TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    content    BYTEA NOT NULL,
    PRIMARY KEY (session_id, path)
);

CREATE TABLE artifacts (
    ord            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    id             TEXT NOT NULL UNIQUE,
    session_id     TEXT REFERENCES sessions (id),
    environment_id TEXT REFERENCES environments (id),
    name           TEXT NOT NULL,
    media_type     TEXT NOT NULL,
    size           BIGINT NOT NULL,
    sha256         TEXT NOT NULL,
    created_at     TEXT NOT NULL,
    content        BYTEA NOT NULL,
    CHECK ((session_id IS NULL) <> (environment_id IS NULL))
);

-- +goose Down
DROP TABLE artifacts;
DROP TABLE session_files;
