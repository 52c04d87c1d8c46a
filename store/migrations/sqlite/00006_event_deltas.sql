-- Baton store schema, version 6 (SQLite): provider requests stored as deltas.
-- A row with base_seq set holds in payload only the middle of its payload:
-- the whole one is the first base_prefix bytes of the (whole) payload of
-- event base_seq of the same session, then payload, then the last
-- base_suffix bytes of the base's. A NULL base_seq means payload is whole,
-- as in every row written before this version.

-- +goose Up
ALTER TABLE session_events ADD COLUMN base_seq INTEGER;
ALTER TABLE session_events ADD COLUMN base_prefix INTEGER;
ALTER TABLE session_events ADD COLUMN base_suffix INTEGER;

-- +goose Down
-- Rewrite every delta whole first: older versions read payload as it is.
-- Byte offsets need BLOBs (substr and length count characters of TEXT).
CREATE INDEX session_events_base ON session_events (session_id, base_seq) WHERE base_seq IS NOT NULL;
WITH RECURSIVE whole (session_id, seq, payload) AS (
    SELECT b.session_id, b.seq, CAST(b.payload AS BLOB)
    FROM session_events b
    JOIN (SELECT DISTINCT session_id, base_seq FROM session_events WHERE base_seq IS NOT NULL) r
        ON r.session_id = b.session_id AND r.base_seq = b.seq
    WHERE b.base_seq IS NULL
    UNION ALL
    SELECT e.session_id, e.seq,
        CAST(substr(w.payload, 1, e.base_prefix) || CAST(e.payload AS BLOB) ||
            substr(w.payload, length(w.payload) - e.base_suffix + 1) AS BLOB)
    FROM whole w
    JOIN session_events e ON e.session_id = w.session_id AND e.base_seq = w.seq
)
UPDATE session_events SET payload = CAST(w.payload AS TEXT)
FROM whole w
WHERE session_events.session_id = w.session_id AND session_events.seq = w.seq
    AND session_events.base_seq IS NOT NULL;
DROP INDEX session_events_base;
ALTER TABLE session_events DROP COLUMN base_suffix;
ALTER TABLE session_events DROP COLUMN base_prefix;
ALTER TABLE session_events DROP COLUMN base_seq;
