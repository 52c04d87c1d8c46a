package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strconv"

	"github.com/baton-engine/baton"
)

const eventCols = `seq, id, session_id, client_key_id, event_type, payload, created_at,
	base_seq, base_prefix, base_suffix`

// scanEvent reads a row of eventCols; a delta's Payload is the stored
// middle until expand puts it together.
func scanEvent(s scanner) (*baton.Event, ref, error) {
	var (
		e                 baton.Event
		client            sql.NullString
		c                 string
		base, pre, suffix sql.NullInt64
	)
	if err := s.Scan(&e.Seq, &e.ID, &e.SessionID, &client, &e.Type, (*[]byte)(&e.Payload), &c, &base, &pre, &suffix); err != nil {
		return nil, ref{}, err
	}
	e.ClientKeyID = client.String
	r, err := scanRef(base, pre, suffix)
	if err != nil {
		return nil, ref{}, err
	}
	if e.CreatedAt, err = parseTime(c); err != nil {
		return nil, ref{}, err
	}
	return &e, r, nil
}

// events runs a query of eventCols rows in Seq order and returns the
// first limit events (every one when limit is 0) with whole payloads,
// and whether the query returned more.
func (db *DB) events(ctx context.Context, limit int, query string, args ...any) ([]*baton.Event, bool, error) {
	return db.eventPage(ctx, limit, 0, query, args...)
}

// eventPage is events that, with maxBytes > 0, also ends the result
// early, reporting more, before the first event whose whole payload would
// take the total past maxBytes. The first event is always kept, so a
// caller paging by the last Seq progresses.
func (db *DB) eventPage(ctx context.Context, limit, maxBytes int, query string, args ...any) ([]*baton.Event, bool, error) {
	rows, err := db.query(ctx, query, args...)
	if err != nil {
		return nil, false, err
	}
	var (
		evs    []*baton.Event
		refs   []ref
		stored int  // payload bytes as stored: no more than when whole
		cut    bool // stopped reading rows for the byte budget
	)
	for rows.Next() {
		e, r, err := scanEvent(rows)
		if err != nil {
			_ = rows.Close()
			return nil, false, err
		}
		if maxBytes > 0 && len(evs) > 0 && stored+len(e.Payload) > maxBytes {
			cut = true
			break
		}
		stored += len(e.Payload)
		evs, refs = append(evs, e), append(refs, r)
	}
	// Closed before expand reads bases: holding this connection while
	// waiting for another could exhaust the pool.
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return nil, false, err
	}
	more := cut || limit > 0 && len(evs) > limit
	if limit > 0 && len(evs) > limit {
		evs, refs = evs[:limit], refs[:limit]
	}
	n, err := db.expand(ctx, evs, refs, maxBytes)
	if err != nil {
		return nil, false, err
	}
	if n < len(evs) {
		evs, more = evs[:n], true
	}
	return evs, more, nil
}

// Append durably appends events, which may belong to several sessions, in
// one transaction shared with whatever else is queued. It fills ID (when
// empty), Seq and CreatedAt (when zero) and returns once the events are
// committed. An event of an unknown session is ECodeNotFound and nothing
// of the call is written.
//
// A provider.request payload is stored as a delta of the session's
// previous one, committed earlier, when they share most of their bytes:
// the row keeps only the bytes between the shared prefix and suffix (see
// delta.go). Reads return the whole payload.
//
// A payload must be valid JSON (or empty, stored as it is); it is not
// re-validated here. Every payload Baton appends is built by encoding/json
// or assembled from values it decoded, and the largest ones — provider
// requests carrying the whole conversation — would otherwise be scanned
// once more on every model call. It must also be valid UTF-8, and that
// is checked, for every event any method appends (utf8.Valid runs at tens
// of GB/s over ASCII): the transports refuse invalid UTF-8 at their
// boundaries, and this keeps a path they miss from storing text that
// strict decoders of every later events page would reject.
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
// the Seq of the last event of the previous page. A page holds at most
// page.Limit events and ends early, with a next cursor, before the event
// whose payload would take the page past the byte budget
// (Options.EventPageBytes); it always holds at least one event. An
// unknown session has no events.
func (db *DB) Events(ctx context.Context, sessionID string, page baton.Page) ([]*baton.Event, string, error) {
	after, err := parseCursor(page.Cursor)
	if err != nil {
		return nil, "", err
	}
	limit := pageLimit(page.Limit)
	items, more, err := db.eventPage(ctx, limit, db.pageBytes, `SELECT `+eventCols+` FROM session_events
WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, sessionID, after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list events: %w", err)
	}
	next := ""
	if more {
		next = strconv.FormatInt(items[len(items)-1].Seq, 10)
	}
	return items, next, nil
}

// EventsAfter returns up to limit events of a session with Seq > after,
// oldest first.
func (db *DB) EventsAfter(ctx context.Context, sessionID string, after int64, limit int) ([]*baton.Event, error) {
	limit = pageLimit(limit)
	items, _, err := db.events(ctx, limit, `SELECT `+eventCols+` FROM session_events
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
