-- Baton store schema, version 8 (PostgreSQL): executor tools across the
-- cluster. An executor connects to one node; node_tools is what each
-- node says its environment-scoped executors serve, so that a session
-- owned by another node can call them through it. Each node replaces its
-- own rows when its executors change; readers keep only the rows of
-- registered nodes with a recent heartbeat, so node_id is not a foreign
-- key (a node's row comes and goes with its registration).
--
-- cluster_secret holds the one secret nodes authenticate their internal
-- requests to each other with (the executor calls they relay), created
-- by the first node that needs it.

-- +goose Up
CREATE TABLE node_tools (
    node_id        TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    tools          TEXT NOT NULL, -- JSON array of tool definitions
    PRIMARY KEY (node_id, environment_id)
);

CREATE TABLE cluster_secret (
    id     SMALLINT PRIMARY KEY CHECK (id = 1),
    secret TEXT     NOT NULL
);

-- +goose Down
DROP TABLE cluster_secret;
DROP TABLE node_tools;
