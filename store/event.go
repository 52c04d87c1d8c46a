package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"

	"github.com/baton-engine/baton"
)

const eventCols = `seq, id, session_id, client_key_id, event_type, payload, created_at`

func scanEvent(s scanner) (*baton.Event, int64, error) {
	var (
		e          baton.Event
		client     sql.NullString
		payload, c string
	)
	if err := s.Scan(&e.Seq, &e.ID, &e.SessionID, &client, &e.Type, &payload, &c); err != nil {
		return nil, 0, err
	}
	e.ClientKeyID = client.String
	e.Payload = json.RawMessage(payload)
	var err error
	if e.CreatedAt, err = parseTime(c); err != nil {
		return nil, 0, err
	}
	return &e, e.Seq, nil
}

// Append durably appends events, which may belong to several sessions, in
// one transaction shared with whatever else is queued. It fills ID (when
// empty), Seq and CreatedAt (when zero) and returns once the events are
// committed. An event of an unknown session is ECodeNotFound and nothing
// of the call is written.
//
// A payload must be valid JSON (or empty, stored as it is); it is not
// re-validated here. Every payload Baton appends is built by encoding/json
// or assembled from values it decoded, and the largest ones — provider
// requests carrying the whole conversation — would otherwise be scanned
// once more on every model call.
func (db *DB) Append(ctx context.Context, events ...*baton.Event) error {
	return db.AppendQueued(ctx, events...)()
}

// AppendQueued queues events for commit like Append and returns a wait
// for the outcome.
func (db *DB) AppendQueued(ctx context.Context, events ...*baton.Event) (wait func() error) {
	if len(events) == 0 {
		return func() error { return nil }
	}
	for i, e := range events {
		if e == nil || e.SessionID == "" || e.Type == "" {
			err := fmt.Errorf("append events: event %d has no session or type", i)
			return func() error { return err }
		}
	}
	return db.w.submit(ctx, func(t *wtx) error {
		for _, e := range events {
			if err := t.append(e); err != nil {
				return err
			}
		}
		return nil
	})
}

// Events returns a page of a session's events, oldest first; the cursor is
// the Seq of the last event of the previous page. An unknown session has
// no events.
func (db *DB) Events(ctx context.Context, sessionID string, page baton.Page) ([]*baton.Event, string, error) {
	after, err := parseCursor(page.Cursor)
	if err != nil {
		return nil, "", err
	}
	limit := pageLimit(page.Limit)
	items, next, err := list(ctx, db.read, scanEvent, limit, `SELECT `+eventCols+` FROM session_events
WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, sessionID, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list events: %w", err)
	}
	return items, next, nil
}

// EventsAfter returns up to limit events of a session with Seq > after,
// oldest first.
func (db *DB) EventsAfter(ctx context.Context, sessionID string, after int64, limit int) ([]*baton.Event, error) {
	limit = pageLimit(limit)
	items, _, err := list(ctx, db.read, scanEvent, limit, `SELECT `+eventCols+` FROM session_events
WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, sessionID, after, limit)
	if err != nil {
		return nil, fmt.Errorf("list events: %w", err)
	}
	return items, nil
}

// Stats returns catalogue counts: active profiles and client keys, open and
// all sessions, and events.
func (db *DB) Stats(ctx context.Context) (baton.Stats, error) {
	var s baton.Stats
	err := db.queryRow(ctx, `SELECT
	(SELECT COUNT(*) FROM profiles WHERE deleted_at IS NULL),
	(SELECT COUNT(*) FROM keys WHERE role = 'client' AND deleted_at IS NULL),
	(SELECT COUNT(*) FROM sessions WHERE state = 'open'),
	(SELECT COUNT(*) FROM sessions),
	(SELECT COUNT(*) FROM session_events)`).Scan(&s.Profiles, &s.ClientKeys, &s.OpenSessions, &s.Sessions, &s.Events)
	if err != nil {
		return baton.Stats{}, fmt.Errorf("stats: %w", err)
	}
	return s, nil
}
