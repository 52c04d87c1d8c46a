package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/baton-engine/baton"
)

const sessionCols = `ord, id, client_key_id, profile_id, state, client_version,
	client_tools, sandbox_tools, subagent_tools, created_at, closed_at`

func scanSession(s scanner) (*baton.Session, int64, error) {
	var (
		x                  baton.Session
		ord                int64
		state, c           string
		version, closedAt  sql.NullString
		tools, sbx, agents string
	)
	err := s.Scan(&ord, &x.ID, &x.ClientKeyID, &x.ProfileID, &state, &version, &tools, &sbx, &agents, &c, &closedAt)
	if err != nil {
		return nil, 0, err
	}
	x.State = baton.SessionState(state)
	if version.Valid {
		x.ClientVersion = &version.String
	}
	if x.ClientTools, err = decodeMap[baton.ToolDef](tools); err != nil {
		return nil, 0, err
	}
	if x.SandboxTools, err = decodeMap[baton.ToolDef](sbx); err != nil {
		return nil, 0, err
	}
	if x.SubagentTools, err = decodeMap[baton.SubagentToolDef](agents); err != nil {
		return nil, 0, err
	}
	if x.CreatedAt, err = parseTime(c); err != nil {
		return nil, 0, err
	}
	if x.ClosedAt, err = parseNullTime(closedAt); err != nil {
		return nil, 0, err
	}
	return &x, ord, nil
}

// declarations is the encoded form of a session's three tool maps.
type declarations struct{ tools, sbx, agents string }

func encodeDeclarations(tools, sbx map[string][]baton.ToolDef, agents map[string][]baton.SubagentToolDef) (declarations, error) {
	var d declarations
	var err error
	if d.tools, err = encodeMap(tools); err != nil {
		return d, err
	}
	if d.sbx, err = encodeMap(sbx); err != nil {
		return d, err
	}
	if d.agents, err = encodeMap(agents); err != nil {
		return d, err
	}
	return d, nil
}

func errNoSession(id string) error { return baton.Errorf(baton.ECodeNotFound, "no session %s", id) }

// CreateSession inserts s, the session key (nil for failed-open audit rows)
// and events in one transaction. In cluster mode an open session also gets
// its lease, held by this node at epoch 1, in the same transaction, and
// this node owns it (Own) once it is committed. Empty ID, State and CreatedAt are filled
// (new id, open, now); events get s.ID as their session. ClosedAt is stored
// as given: a failed-open audit row (state error) has none, as in BAE, since
// it was never open.
func (db *DB) CreateSession(ctx context.Context, s *baton.Session, key *baton.Key, events ...*baton.Event) error {
	if s.ID == "" {
		s.ID = baton.NewID(baton.PrefixSession)
	}
	if s.State == "" {
		s.State = baton.StateOpen
	}
	if !s.State.Valid() {
		return fmt.Errorf("create session: invalid state %q", s.State)
	}
	if s.CreatedAt.IsZero() {
		s.CreatedAt = baton.Now()
	}
	d, err := encodeDeclarations(s.ClientTools, s.SandboxTools, s.SubagentTools)
	if err != nil {
		return fmt.Errorf("create session: %w", err)
	}
	var scopes string
	if key != nil {
		if scopes, err = prepareKey(key); err != nil {
			return fmt.Errorf("create session: %w", err)
		}
	}
	for _, e := range events {
		e.SessionID = s.ID
	}
	return db.w.do(ctx, func(t *wtx) error {
		_, err := t.exec(`INSERT INTO sessions (id, client_key_id, profile_id, state, client_version,
	client_tools, sandbox_tools, subagent_tools, created_at, closed_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
			s.ID, s.ClientKeyID, s.ProfileID, string(s.State), nullStringPtr(s.ClientVersion),
			d.tools, d.sbx, d.agents, formatTime(s.CreatedAt), nullTime(s.ClosedAt))
		if err != nil {
			return fmt.Errorf("create session: %w", err)
		}
		if t.w.fence != nil && s.State == baton.StateOpen {
			// The opener owns the session from its first event on.
			if _, err := t.exec(`INSERT INTO session_leases (session_id, node_id, epoch, expires_at)
VALUES ($1, $2, 1, now() + $3::bigint * interval '1 microsecond')`, s.ID, t.w.fence.node, micros(db.leaseTTL)); err != nil {
				return fmt.Errorf("create session: lease: %w", err)
			}
			t.claim(s.ID)
		}
		if key != nil {
			if err := t.insertKey(key, scopes); err != nil {
				return err
			}
		}
		for _, e := range events {
			if err := t.append(e); err != nil {
				return err
			}
		}
		return nil
	})
}

// Session returns a session in any state, or ECodeNotFound.
func (db *DB) Session(ctx context.Context, id string) (*baton.Session, error) {
	row := db.queryRow(ctx, `SELECT `+sessionCols+` FROM sessions WHERE id = $1`, id)
	s, _, err := scanSession(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNoSession(id)
	}
	if err != nil {
		return nil, fmt.Errorf("get session: %w", err)
	}
	return s, nil
}

// ListSessions returns sessions in creation order, only those in state when
// it is not empty.
func (db *DB) ListSessions(ctx context.Context, state baton.SessionState, page baton.Page) ([]*baton.Session, string, error) {
	after, err := parseCursor(page.Cursor)
	if err != nil {
		return nil, "", err
	}
	limit := pageLimit(page.Limit)
	var items []*baton.Session
	var next string
	if state == "" {
		items, next, err = list(ctx, db.read, scanSession, limit,
			`SELECT `+sessionCols+` FROM sessions WHERE ord > $1 ORDER BY ord LIMIT $2`, after, limit+1)
	} else {
		items, next, err = list(ctx, db.read, scanSession, limit,
			`SELECT `+sessionCols+` FROM sessions WHERE state = $1 AND ord > $2 ORDER BY ord LIMIT $3`,
			string(state), after, limit+1)
	}
	if err != nil {
		return nil, "", fmt.Errorf("list sessions: %w", err)
	}
	return items, next, nil
}

// JoinSession records p's declarations on the open session id (replacing
// an earlier entry of the same client key), inserts key and appends ev, in
// one transaction. A session that is not open is ECodeSessionClosed, a
// missing one ECodeNotFound.
func (db *DB) JoinSession(ctx context.Context, id string, p baton.Participant, key *baton.Key, ev *baton.Event) error {
	var scopes string
	if key != nil {
		var err error
		if scopes, err = prepareKey(key); err != nil {
			return fmt.Errorf("join session: %w", err)
		}
	}
	if ev != nil {
		ev.SessionID = id
	}
	return db.w.do(ctx, func(t *wtx) error {
		var state, tools, sbx, agents string
		err := t.get(`SELECT state, client_tools, sandbox_tools, subagent_tools FROM sessions WHERE id = $1`+t.w.lock,
			[]any{id}, &state, &tools, &sbx, &agents)
		if errors.Is(err, sql.ErrNoRows) {
			return errNoSession(id)
		}
		if err != nil {
			return fmt.Errorf("join session: %w", err)
		}
		if baton.SessionState(state) != baton.StateOpen {
			return baton.Errorf(baton.ECodeSessionClosed, "session is already %s", state)
		}
		ct, err := decodeMap[baton.ToolDef](tools)
		if err != nil {
			return err
		}
		st, err := decodeMap[baton.ToolDef](sbx)
		if err != nil {
			return err
		}
		at, err := decodeMap[baton.SubagentToolDef](agents)
		if err != nil {
			return err
		}
		ct[p.ClientKeyID] = p.Tools
		st[p.ClientKeyID] = p.SandboxTools
		at[p.ClientKeyID] = p.SubagentTools
		d, err := encodeDeclarations(ct, st, at)
		if err != nil {
			return err
		}
		if _, err := t.exec(`UPDATE sessions SET client_tools = $2, sandbox_tools = $3, subagent_tools = $4 WHERE id = $1`,
			id, d.tools, d.sbx, d.agents); err != nil {
			return fmt.Errorf("join session: %w", err)
		}
		if key != nil {
			if err := t.insertKey(key, scopes); err != nil {
				return err
			}
		}
		if ev != nil {
			return t.append(ev)
		}
		return nil
	})
}

// EndSession moves the open session id to state (closed or error), setting
// closed_at, and appends ev in the same transaction. It reports false, and
// appends nothing, when the session is not open; a missing session is
// ECodeNotFound.
func (db *DB) EndSession(ctx context.Context, id string, state baton.SessionState, ev *baton.Event) (bool, error) {
	if state != baton.StateClosed && state != baton.StateError {
		return false, fmt.Errorf("end session: invalid final state %q", state)
	}
	if ev != nil {
		ev.SessionID = id
	}
	var ended bool
	err := db.w.do(ctx, func(t *wtx) error {
		ended = false
		var cur string
		err := t.get(`SELECT state FROM sessions WHERE id = $1`, []any{id}, &cur)
		if errors.Is(err, sql.ErrNoRows) {
			return errNoSession(id)
		}
		if err != nil {
			return fmt.Errorf("end session: %w", err)
		}
		if baton.SessionState(cur) != baton.StateOpen {
			return nil
		}
		n, err := t.execAffected(`UPDATE sessions SET state = $2, closed_at = $3 WHERE id = $1 AND state = 'open'`,
			id, string(state), formatTime(baton.Now()))
		if err != nil {
			return fmt.Errorf("end session: %w", err)
		}
		if n == 0 {
			return nil // ended concurrently by another node
		}
		ended = true
		if ev != nil {
			return t.append(ev)
		}
		return nil
	})
	if err != nil {
		return false, err
	}
	return ended, nil
}
