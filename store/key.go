package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/baton-engine/baton"
)

const keyCols = `ord, id, name, key_hash, key_prefix, role, profile_id, client_id, scopes, created_at, last_used_at`

func scanKey(s scanner) (*baton.Key, int64, error) {
	var (
		k                   baton.Key
		ord                 int64
		role, scopes, c     string
		profile, client, lu sql.NullString
	)
	err := s.Scan(&ord, &k.ID, &k.Name, &k.Hash, &k.Prefix, &role, &profile, &client, &scopes, &c, &lu)
	if err != nil {
		return nil, 0, err
	}
	k.Role = baton.KeyRole(role)
	k.ProfileID, k.ClientID = profile.String, client.String
	if k.Scopes, err = decodeStrings(scopes); err != nil {
		return nil, 0, err
	}
	if k.CreatedAt, err = parseTime(c); err != nil {
		return nil, 0, err
	}
	if k.LastUsedAt, err = parseNullTime(lu); err != nil {
		return nil, 0, err
	}
	return &k, ord, nil
}

// insertKey inserts k inside a write transaction.
func (t *wtx) insertKey(k *baton.Key, scopes string) error {
	_, err := t.exec(`INSERT INTO keys (id, name, key_hash, key_prefix, role, profile_id, client_id, scopes, created_at, last_used_at)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
		k.ID, k.Name, k.Hash, k.Prefix, string(k.Role), nullString(k.ProfileID), nullString(k.ClientID),
		scopes, formatTime(k.CreatedAt), nullTime(k.LastUsedAt))
	if err != nil {
		return fmt.Errorf("insert key: %w", err)
	}
	return nil
}

// prepareKey fills k's defaults (ID, CreatedAt, client scopes) and encodes
// its scopes.
func prepareKey(k *baton.Key) (string, error) {
	switch k.Role {
	case baton.RoleClient, baton.RoleSession, baton.RoleAdmin:
	default:
		return "", fmt.Errorf("store: invalid key role %q", k.Role)
	}
	if k.ID == "" {
		k.ID = baton.NewID(baton.PrefixKey)
	}
	if k.CreatedAt.IsZero() {
		k.CreatedAt = baton.Now()
	}
	if k.Role == baton.RoleClient && k.Scopes == nil { // an empty list stays empty
		k.Scopes = slices.Clone(baton.DefaultScopes)
	}
	if k.Scopes == nil {
		k.Scopes = []string{}
	}
	return encodeStrings(k.Scopes)
}

// CreateKey inserts k, filling ID and CreatedAt when empty; client keys
// created with nil Scopes get baton.DefaultScopes (a non-nil empty list is
// kept: a key with no scopes).
func (db *DB) CreateKey(ctx context.Context, k *baton.Key) error {
	scopes, err := prepareKey(k)
	if err != nil {
		return fmt.Errorf("create key: %w", err)
	}
	return db.w.do(ctx, func(t *wtx) error { return t.insertKey(k, scopes) })
}

// KeyByHash returns the active key of role with the given digest, or
// ECodeNotFound.
func (db *DB) KeyByHash(ctx context.Context, role baton.KeyRole, hash string) (*baton.Key, error) {
	row := db.queryRow(ctx, `SELECT `+keyCols+` FROM keys
WHERE key_hash = $1 AND role = $2 AND deleted_at IS NULL`, hash, string(role))
	k, _, err := scanKey(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, baton.Errorf(baton.ECodeNotFound, "no active %s key with that hash", role)
	}
	if err != nil {
		return nil, fmt.Errorf("get key: %w", err)
	}
	return k, nil
}

// ListKeys returns active keys of role in creation order.
func (db *DB) ListKeys(ctx context.Context, role baton.KeyRole, page baton.Page) ([]*baton.Key, string, error) {
	after, err := parseCursor(page.Cursor)
	if err != nil {
		return nil, "", err
	}
	limit := pageLimit(page.Limit)
	items, next, err := list(ctx, db.read, scanKey, limit, `SELECT `+keyCols+` FROM keys
WHERE role = $1 AND deleted_at IS NULL AND ord > $2 ORDER BY ord LIMIT $3`, string(role), after, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("list keys: %w", err)
	}
	return items, next, nil
}

// RevokeClientKey soft-deletes the active client key id and every active
// session key minted for it, then closes each open session in which it held
// a session key and that has no active session key left, appending
// mkClose(sessionID) to each (none when mkClose is nil). All of it is one
// transaction. It returns the closed session ids in creation order.
// mkClose runs on the writer goroutine, possibly more than once per session
// if the batch is retried: it must be quick and free of side effects.
func (db *DB) RevokeClientKey(ctx context.Context, id string, mkClose func(sessionID string) *baton.Event) ([]string, error) {
	var closed []string
	err := db.w.do(ctx, func(t *wtx) error {
		closed = nil
		var n int64
		if err := t.get(`SELECT COUNT(*) FROM keys WHERE id = $1 AND role = 'client' AND deleted_at IS NULL`,
			[]any{id}, &n); err != nil {
			return fmt.Errorf("revoke client key: %w", err)
		}
		if n == 0 {
			return baton.Errorf(baton.ECodeNotFound, "no active client key %s", id)
		}
		held, err := t.column(`SELECT s.id FROM sessions s
WHERE s.state = 'open' AND EXISTS (SELECT 1 FROM keys k
	WHERE k.name = s.id AND k.role = 'session' AND k.client_id = $1 AND k.deleted_at IS NULL)
ORDER BY s.ord`, id)
		if err != nil {
			return fmt.Errorf("revoke client key: %w", err)
		}
		now := formatTime(baton.Now())
		if _, err := t.exec(`UPDATE keys SET deleted_at = $2 WHERE id = $1`, id, now); err != nil {
			return fmt.Errorf("revoke client key: %w", err)
		}
		if _, err := t.exec(`UPDATE keys SET deleted_at = $2
WHERE client_id = $1 AND role = 'session' AND deleted_at IS NULL`, id, now); err != nil {
			return fmt.Errorf("revoke session keys: %w", err)
		}
		for _, sid := range held {
			if err := t.get(`SELECT COUNT(*) FROM keys WHERE name = $1 AND role = 'session' AND deleted_at IS NULL`,
				[]any{sid}, &n); err != nil {
				return fmt.Errorf("revoke client key: %w", err)
			}
			if n > 0 {
				continue // another participant is still active
			}
			if t.w.fence != nil && !t.w.fence.owns(sid) {
				continue // cluster mode: its owner closes it (RevokedSessions)
			}
			if _, err := t.exec(`UPDATE sessions SET state = 'closed', closed_at = $2 WHERE id = $1 AND state = 'open'`,
				sid, now); err != nil {
				return fmt.Errorf("close session: %w", err)
			}
			if mkClose != nil {
				if ev := mkClose(sid); ev != nil {
					ev.SessionID = sid
					if err := t.append(ev); err != nil {
						return err
					}
				}
			}
			closed = append(closed, sid)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	db.notifyForgotten(ctx, id) // the other nodes' key caches
	return closed, nil
}

// RevokeAdminKeys soft-deletes every active admin key.
func (db *DB) RevokeAdminKeys(ctx context.Context) error {
	return db.w.do(ctx, func(t *wtx) error {
		if _, err := t.exec(`UPDATE keys SET deleted_at = $1 WHERE role = 'admin' AND deleted_at IS NULL`,
			formatTime(baton.Now())); err != nil {
			return fmt.Errorf("revoke admin keys: %w", err)
		}
		return nil
	})
}

// TouchKeys records last-use times in one write. A time older than the
// stored one is ignored; unknown ids are ignored.
func (db *DB) TouchKeys(ctx context.Context, used map[string]time.Time) error {
	if len(used) == 0 {
		return nil
	}
	ids := slices.Sorted(maps.Keys(used))
	return db.w.do(ctx, func(t *wtx) error {
		for _, id := range ids {
			at := formatTime(used[id])
			if _, err := t.exec(`UPDATE keys SET last_used_at = $2
WHERE id = $1 AND (last_used_at IS NULL OR last_used_at < $2)`, id, at); err != nil {
				return fmt.Errorf("touch keys: %w", err)
			}
		}
		return nil
	})
}
