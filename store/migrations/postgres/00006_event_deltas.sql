-- Baton store schema, version 6 (PostgreSQL): provider requests stored as
-- deltas. A row with base_seq set holds in payload only the middle of its
-- payload: the whole one is the first base_prefix bytes (of its UTF-8
-- encoding) of the (whole) payload of event base_seq of the same session,
-- then payload, then the last base_suffix bytes of the base's. A NULL
-- base_seq means payload is whole, as in every row written before this
-- version.

-- +goose Up
ALTER TABLE session_events
    ADD COLUMN base_seq    BIGINT,
    ADD COLUMN base_prefix BIGINT,
    ADD COLUMN base_suffix BIGINT;

-- +goose Down
-- Rewrite every delta whole first: older versions read payload as it is.
-- Byte offsets need bytea (substring and length count characters of text).
WITH RECURSIVE whole (session_id, seq, payload) AS (
    SELECT b.session_id, b.seq, convert_to(b.payload, 'UTF8')
    FROM session_events b
    WHERE b.base_seq IS NULL AND (b.session_id, b.seq) IN (
        SELECT session_id, base_seq FROM session_events WHERE base_seq IS NOT NULL)
    UNION ALL
    SELECT e.session_id, e.seq,
        substring(w.payload FROM 1 FOR e.base_prefix::int) || convert_to(e.payload, 'UTF8') ||
            substring(w.payload FROM octet_length(w.payload) - e.base_suffix::int + 1)
    FROM whole w
    JOIN session_events e ON e.session_id = w.session_id AND e.base_seq = w.seq
)
UPDATE session_events e SET payload = convert_from(w.payload, 'UTF8')
FROM whole w
WHERE e.session_id = w.session_id AND e.seq = w.seq AND e.base_seq IS NOT NULL;
ALTER TABLE session_events
    DROP COLUMN base_seq,
    DROP COLUMN base_prefix,
    DROP COLUMN base_suffix;
