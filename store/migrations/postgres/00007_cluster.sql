-- Baton store schema, version 7 (PostgreSQL): the cluster of nodes sharing
-- this database. Unlike the catalogue's TEXT timestamps these are
-- timestamptz: leases expire by the database's clock, compared with now()
-- in SQL, never by a node's clock.
--
-- A lease row outlives its holder: released and expired leases keep their
-- epoch, which only grows, so an old holder's epoch never becomes valid
-- again. node_id is not a foreign key: a removed node's leases stay as the
-- fence against it until another node takes them over.

-- +goose Up
CREATE TABLE nodes (
    id            TEXT        PRIMARY KEY,
    advertise_url TEXT        NOT NULL,
    version       TEXT        NOT NULL,
    started_at    timestamptz NOT NULL,
    heartbeat_at  timestamptz NOT NULL,
    draining      BOOLEAN     NOT NULL DEFAULT false
);

CREATE TABLE session_leases (
    session_id TEXT        PRIMARY KEY REFERENCES sessions (id),
    node_id    TEXT        NOT NULL,
    epoch      BIGINT      NOT NULL CHECK (epoch > 0),
    expires_at timestamptz NOT NULL
);
CREATE INDEX session_leases_node ON session_leases (node_id);

-- +goose Down
DROP TABLE session_leases;
DROP TABLE nodes;
