-- Baton store schema, version 8 (SQLite): nothing. Version 8 adds the
-- executor tools each cluster node serves and the cluster's secret on
-- PostgreSQL; a SQLite database serves one process, so it has no cluster.
-- This migration keeps the two dialects' version numbers equal.

-- +goose Up
SELECT 1;

-- +goose Down
SELECT 1;
