-- Baton store schema, version 7 (SQLite): nothing. Version 7 adds the
-- cluster's nodes and session leases on PostgreSQL; a SQLite database
-- serves one process (the store holds a lock file beside it), so it has no
-- cluster. This migration keeps the two dialects' version numbers equal.

-- +goose Up
SELECT 1;

-- +goose Down
SELECT 1;
