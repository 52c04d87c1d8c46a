package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/baton-engine/baton"
)

// EventsOfType returns every event of a session whose type is in types,
// oldest first. The engine rebuilds transcripts from it without reading
// the large provider.request payloads.
func (db *DB) EventsOfType(ctx context.Context, sessionID string, types []string) ([]*baton.Event, error) {
	if len(types) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(types)+1)
	args = append(args, sessionID)
	marks := make([]string, len(types))
	for i, t := range types {
		args = append(args, t)
		marks[i] = fmt.Sprintf("$%d", i+2)
	}
	out, _, err := db.events(ctx, 0, `SELECT `+eventCols+` FROM session_events
WHERE session_id = $1 AND event_type IN (`+strings.Join(marks, ", ")+`) ORDER BY seq`, args...)
	if err != nil {
		return nil, fmt.Errorf("events of type: %w", err)
	}
	return out, nil
}

// EventSeq returns the Seq of eventID within sessionID, or 0 when the
// session has no such event.
func (db *DB) EventSeq(ctx context.Context, sessionID, eventID string) (int64, error) {
	var seq int64
	err := db.queryRow(ctx, `SELECT seq FROM session_events WHERE session_id = $1 AND id = $2`,
		sessionID, eventID).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("event seq: %w", err)
	}
	return seq, nil
}

// LastSeq returns the seq of the session's last committed event, 0 when
// it has none.
func (db *DB) LastSeq(ctx context.Context, sessionID string) (int64, error) {
	var seq int64
	if err := db.queryRow(ctx, `SELECT COALESCE(MAX(seq), 0) FROM session_events WHERE session_id = $1`, sessionID).Scan(&seq); err != nil {
		return 0, fmt.Errorf("last seq: %w", err)
	}
	return seq, nil
}

// SetClientTools replaces one client key's client tools on a session.
func (db *DB) SetClientTools(ctx context.Context, sessionID, clientKeyID string, tools []baton.ToolDef) error {
	return db.w.do(ctx, func(t *wtx) error {
		var raw string
		err := t.get(`SELECT client_tools FROM sessions WHERE id = $1`+t.w.lock, []any{sessionID}, &raw)
		if errors.Is(err, sql.ErrNoRows) {
			return errNoSession(sessionID)
		}
		if err != nil {
			return fmt.Errorf("set client tools: %w", err)
		}
		m, err := decodeMap[baton.ToolDef](raw)
		if err != nil {
			return err
		}
		if tools == nil {
			tools = []baton.ToolDef{}
		}
		m[clientKeyID] = tools
		enc, err := encodeMap(m)
		if err != nil {
			return err
		}
		if _, err := t.exec(`UPDATE sessions SET client_tools = $2 WHERE id = $1`, sessionID, enc); err != nil {
			return fmt.Errorf("set client tools: %w", err)
		}
		return nil
	})
}
