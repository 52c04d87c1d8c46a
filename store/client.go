package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/baton-engine/baton"
)

// Registered session clients: one row per registration, never deleted, so
// the session's spent names are the names of all its rows.

const clientCols = `ord, id, session_id, name, requested_name, tools, ttl_seconds, expires_at,
	created_at, last_ping_at, gone_at, gone_reason`

func scanClient(s scanner) (*baton.RegisteredClient, int64, error) {
	var (
		c               baton.RegisteredClient
		ord             int64
		tools, created  string
		ping            string
		expires, goneAt sql.NullString
	)
	err := s.Scan(&ord, &c.ID, &c.SessionID, &c.Name, &c.RequestedName, &tools, &c.TTLSeconds, &expires,
		&created, &ping, &goneAt, &c.GoneReason)
	if err != nil {
		return nil, 0, err
	}
	if err := json.Unmarshal([]byte(tools), &c.Tools); err != nil {
		return nil, 0, fmt.Errorf("store: decode client tools: %w", err)
	}
	if c.Tools == nil {
		c.Tools = []baton.ClientTool{}
	}
	if c.ExpiresAt, err = parseNullTime(expires); err != nil {
		return nil, 0, err
	}
	if c.CreatedAt, err = parseTime(created); err != nil {
		return nil, 0, err
	}
	if c.LastPingAt, err = parseTime(ping); err != nil {
		return nil, 0, err
	}
	if c.GoneAt, err = parseNullTime(goneAt); err != nil {
		return nil, 0, err
	}
	return &c, ord, nil
}

func encodeClientTools(tools []baton.ClientTool) (string, error) {
	if tools == nil {
		tools = []baton.ClientTool{}
	}
	b, err := json.Marshal(tools)
	if err != nil {
		return "", fmt.Errorf("store: encode client tools: %w", err)
	}
	return string(b), nil
}

func errNoClient(id string) error { return baton.Errorf(baton.ECodeNotFound, "no client %s", id) }

// expiry is the expiry of a client with ttl pinged at at (nil for never).
func expiry(ttl int, at time.Time) *time.Time {
	if ttl <= 0 {
		return nil
	}
	e := at.Add(time.Duration(ttl) * time.Second)
	return &e
}

// AssignName returns requested, or the smallest requested-N (N ≥ 2) not in
// spent, with the base truncated so the result stays within
// baton.MaxClientNameLen.
func AssignName(requested string, spent map[string]bool) string {
	if !spent[requested] {
		return requested
	}
	for n := 2; ; n++ {
		suffix := "-" + strconv.Itoa(n)
		base := requested
		if max := baton.MaxClientNameLen - len(suffix); len(base) > max {
			base = base[:max]
		}
		if name := base + suffix; !spent[name] {
			return name
		}
	}
}

// CreateClient assigns c's name, checks the session and the live cap,
// inserts c and appends mk's event, in one transaction. Empty ID and
// CreatedAt are filled; LastPingAt is CreatedAt and ExpiresAt follows.
func (db *DB) CreateClient(ctx context.Context, c *baton.RegisteredClient, maxLive int, mk func(*baton.RegisteredClient) *baton.Event) error {
	if c.ID == "" {
		c.ID = baton.NewUUID()
	}
	if c.CreatedAt.IsZero() {
		c.CreatedAt = baton.Now()
	}
	c.LastPingAt = c.CreatedAt
	c.ExpiresAt = expiry(c.TTLSeconds, c.CreatedAt)
	if c.Tools == nil {
		c.Tools = []baton.ClientTool{}
	}
	tools, err := encodeClientTools(c.Tools)
	if err != nil {
		return err
	}
	return db.w.do(ctx, func(t *wtx) error {
		var state string
		err := t.get(`SELECT state FROM sessions WHERE id = $1`+t.w.lock, []any{c.SessionID}, &state)
		if errors.Is(err, sql.ErrNoRows) {
			return errNoSession(c.SessionID)
		}
		if err != nil {
			return fmt.Errorf("create client: %w", err)
		}
		if baton.SessionState(state) != baton.StateOpen {
			return baton.Errorf(baton.ECodeSessionClosed, "session is %s", state)
		}
		names, err := t.column(`SELECT name FROM session_clients WHERE session_id = $1`, c.SessionID)
		if err != nil {
			return fmt.Errorf("create client: %w", err)
		}
		live, err := t.column(`SELECT id FROM session_clients WHERE session_id = $1 AND gone_at IS NULL`, c.SessionID)
		if err != nil {
			return fmt.Errorf("create client: %w", err)
		}
		if len(live) >= maxLive {
			return baton.Errorf(baton.ECodeConflict, "the session already holds %d live clients, the most it may", maxLive)
		}
		spent := make(map[string]bool, len(names))
		for _, n := range names {
			spent[n] = true
		}
		c.Name = AssignName(c.RequestedName, spent)
		_, err = t.exec(`INSERT INTO session_clients (id, session_id, name, requested_name, tools, ttl_seconds,
	expires_at, created_at, last_ping_at, gone_at, gone_reason)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, NULL, '')`,
			c.ID, c.SessionID, c.Name, c.RequestedName, tools, c.TTLSeconds,
			nullTime(c.ExpiresAt), formatTime(c.CreatedAt), formatTime(c.LastPingAt))
		if err != nil {
			return fmt.Errorf("create client: %w", err)
		}
		if mk != nil {
			ev := mk(c)
			ev.SessionID = c.SessionID
			return t.append(ev)
		}
		return nil
	})
}

// Client returns a client of the session in any state, or ECodeNotFound.
func (db *DB) Client(ctx context.Context, sessionID, id string) (*baton.RegisteredClient, error) {
	row := db.queryRow(ctx, `SELECT `+clientCols+` FROM session_clients WHERE session_id = $1 AND id = $2`, sessionID, id)
	c, _, err := scanClient(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNoClient(id)
	}
	if err != nil {
		return nil, fmt.Errorf("get client: %w", err)
	}
	return c, nil
}

// LiveClients returns the session's clients not gone, in registration
// order.
func (db *DB) LiveClients(ctx context.Context, sessionID string) ([]*baton.RegisteredClient, error) {
	return db.clients(ctx, `SELECT `+clientCols+` FROM session_clients WHERE session_id = $1 AND gone_at IS NULL ORDER BY ord`, sessionID)
}

// DueClients returns clients not gone whose expiry is at or before now.
func (db *DB) DueClients(ctx context.Context, now time.Time) ([]*baton.RegisteredClient, error) {
	return db.clients(ctx, `SELECT `+clientCols+` FROM session_clients
WHERE gone_at IS NULL AND expires_at IS NOT NULL AND expires_at <= $1 ORDER BY ord`, formatTime(now))
}

func (db *DB) clients(ctx context.Context, query string, args ...any) ([]*baton.RegisteredClient, error) {
	rows, err := db.query(ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("list clients: %w", err)
	}
	defer rows.Close()
	out := []*baton.RegisteredClient{}
	for rows.Next() {
		c, _, err := scanClient(rows)
		if err != nil {
			return nil, fmt.Errorf("list clients: %w", err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list clients: %w", err)
	}
	return out, nil
}

// liveClient reads a client for update and fails with ECodeNotFound when
// it is gone or, unless at is zero, not live at at.
func (t *wtx) liveClient(sessionID, id string, at time.Time) (*baton.RegisteredClient, error) {
	row := t.tx.QueryRowContext(t.ctx, `SELECT `+clientCols+` FROM session_clients WHERE session_id = $1 AND id = $2`+t.w.lock, sessionID, id)
	c, _, err := scanClient(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNoClient(id)
	}
	if err != nil {
		t.dirty = true
		return nil, fmt.Errorf("get client: %w", err)
	}
	if c.GoneAt != nil || !at.IsZero() && !c.Live(at) {
		return nil, errNoClient(id)
	}
	return c, nil
}

// PingClient records a ping at at on a client that is not gone (even one
// past its expiry that the sweeper has not ended yet: callers decide).
func (db *DB) PingClient(ctx context.Context, sessionID, id string, at time.Time) (*baton.RegisteredClient, error) {
	var out *baton.RegisteredClient
	err := db.w.do(ctx, func(t *wtx) error {
		c, err := t.liveClient(sessionID, id, time.Time{})
		if err != nil {
			return err
		}
		c.LastPingAt = at
		c.ExpiresAt = expiry(c.TTLSeconds, at)
		if _, err := t.exec(`UPDATE session_clients SET last_ping_at = $2, expires_at = $3 WHERE id = $1`,
			id, formatTime(at), nullTime(c.ExpiresAt)); err != nil {
			return fmt.Errorf("ping client: %w", err)
		}
		out = c
		return nil
	})
	return out, err
}

// SetRegisteredTools replaces a live client's tools and appends ev.
func (db *DB) SetRegisteredTools(ctx context.Context, sessionID, id string, tools []baton.ClientTool, at time.Time, ev *baton.Event) error {
	enc, err := encodeClientTools(tools)
	if err != nil {
		return err
	}
	if ev != nil {
		ev.SessionID = sessionID
	}
	return db.w.do(ctx, func(t *wtx) error {
		if _, err := t.liveClient(sessionID, id, at); err != nil {
			return err
		}
		if _, err := t.exec(`UPDATE session_clients SET tools = $2 WHERE id = $1`, id, enc); err != nil {
			return fmt.Errorf("set client tools: %w", err)
		}
		if ev != nil {
			return t.append(ev)
		}
		return nil
	})
}

// EndClient marks a client gone and appends ev; false (and nothing
// appended) when it already was. An unknown client is ECodeNotFound.
func (db *DB) EndClient(ctx context.Context, sessionID, id, reason string, at time.Time, ev *baton.Event) (bool, error) {
	if ev != nil {
		ev.SessionID = sessionID
	}
	var ended bool
	err := db.w.do(ctx, func(t *wtx) error {
		ended = false
		n, err := t.execAffected(`UPDATE session_clients SET gone_at = $3, gone_reason = $4
WHERE session_id = $1 AND id = $2 AND gone_at IS NULL`, sessionID, id, formatTime(at), reason)
		if err != nil {
			return fmt.Errorf("end client: %w", err)
		}
		if n == 0 {
			var one int
			err := t.get(`SELECT 1 FROM session_clients WHERE session_id = $1 AND id = $2`, []any{sessionID, id}, &one)
			if errors.Is(err, sql.ErrNoRows) {
				return errNoClient(id)
			}
			return err
		}
		ended = true
		if ev != nil {
			return t.append(ev)
		}
		return nil
	})
	return ended, err
}
