package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/baton-engine/baton"
	"github.com/jackc/pgx/v5/pgconn"
)

var (
	_ baton.NodeRegistry = (*DB)(nil)
	_ baton.LeaseStore   = (*DB)(nil)
)

// DefaultLeaseTTL is the lease CreateSession takes in cluster mode when
// Options.LeaseTTL is not set.
const DefaultLeaseTTL = 5 * time.Second

// errSingleNode answers the cluster methods on SQLite.
func errSingleNode() error {
	return baton.Errorf(baton.ECodeUnavailable, "clustering needs PostgreSQL; a SQLite store serves one node")
}

// micros is a TTL as the microseconds the SQL below adds to now().
func micros(ttl time.Duration) int64 { return max(0, ttl.Microseconds()) }

// cluster returns the pool cluster statements run on, outside the writer:
// a takeover waits for the row locks of in-flight appends, which must not
// stall this node's other writes.
func (db *DB) cluster() (*sql.DB, error) {
	if db.dialect != DialectPostgres {
		return nil, errSingleNode()
	}
	return db.write, nil
}

// RegisterNode inserts or replaces node n, started and heartbeat now (the
// database's now), not draining.
func (db *DB) RegisterNode(ctx context.Context, n *baton.Node) error {
	c, err := db.cluster()
	if err != nil {
		return err
	}
	if n.ID == "" {
		return baton.Errorf(baton.ECodeBadRequest, "node has no id")
	}
	_, err = c.ExecContext(ctx, `INSERT INTO nodes (id, advertise_url, version, started_at, heartbeat_at, draining)
VALUES ($1, $2, $3, now(), now(), false)
ON CONFLICT (id) DO UPDATE SET advertise_url = excluded.advertise_url, version = excluded.version,
	started_at = now(), heartbeat_at = now(), draining = false`, n.ID, n.AdvertiseURL, n.Version)
	if err != nil {
		return fmt.Errorf("register node: %w", err)
	}
	return nil
}

func errNoNode(id string) error { return baton.Errorf(baton.ECodeNotFound, "no node %s", id) }

// HeartbeatNode sets node id's heartbeat to now; a node that is not
// registered (removed meanwhile) is ECodeNotFound.
func (db *DB) HeartbeatNode(ctx context.Context, id string) error {
	return db.updateNode(ctx, "heartbeat node", id, `UPDATE nodes SET heartbeat_at = now() WHERE id = $1`)
}

// SetDraining marks node id draining, or not.
func (db *DB) SetDraining(ctx context.Context, id string, draining bool) error {
	return db.updateNode(ctx, "set draining", id, `UPDATE nodes SET draining = $2 WHERE id = $1`, draining)
}

func (db *DB) updateNode(ctx context.Context, what, id, query string, args ...any) error {
	c, err := db.cluster()
	if err != nil {
		return err
	}
	res, err := c.ExecContext(ctx, query, append([]any{id}, args...)...)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	} else if n == 0 {
		return errNoNode(id)
	}
	return nil
}

// Nodes lists the registered nodes, oldest first, with the live leases
// each holds and its heartbeat's age by the database's clock.
func (db *DB) Nodes(ctx context.Context) ([]*baton.Node, error) {
	c, err := db.cluster()
	if err != nil {
		return nil, err
	}
	rows, err := c.QueryContext(ctx, `SELECT id, advertise_url, version, started_at, heartbeat_at,
	EXTRACT(EPOCH FROM now() - heartbeat_at)::float8, draining,
	(SELECT COUNT(*) FROM session_leases l WHERE l.node_id = n.id AND l.expires_at > now())
FROM nodes n ORDER BY started_at, id`)
	if err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	defer rows.Close()
	var out []*baton.Node
	for rows.Next() {
		var n baton.Node
		var age float64
		if err := rows.Scan(&n.ID, &n.AdvertiseURL, &n.Version, &n.StartedAt, &n.HeartbeatAt, &age, &n.Draining, &n.Sessions); err != nil {
			return nil, fmt.Errorf("list nodes: %w", err)
		}
		n.StartedAt, n.HeartbeatAt = n.StartedAt.UTC(), n.HeartbeatAt.UTC()
		n.HeartbeatAge = time.Duration(age * float64(time.Second))
		out = append(out, &n)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list nodes: %w", err)
	}
	return out, nil
}

// RemoveNode deletes node id and expires its leases now, keeping their
// epochs: the node is fenced out as soon as another node takes them over.
func (db *DB) RemoveNode(ctx context.Context, id string) error {
	c, err := db.cluster()
	if err != nil {
		return err
	}
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("remove node: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	if _, err := tx.ExecContext(ctx, `UPDATE session_leases SET expires_at = LEAST(expires_at, now()) WHERE node_id = $1`, id); err != nil {
		return fmt.Errorf("remove node: %w", err)
	}
	res, err := tx.ExecContext(ctx, `DELETE FROM nodes WHERE id = $1`, id)
	if err != nil {
		return fmt.Errorf("remove node: %w", err)
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("remove node: %w", err)
	} else if n == 0 {
		return errNoNode(id)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("remove node: %w", err)
	}
	return nil
}

// acquireLeaseSQL creates the lease at epoch 1 or takes it over. The
// conflicting row is locked first, so a takeover waits for every append
// that holds it FOR SHARE (writer.go) and then sees the latest row.
const acquireLeaseSQL = `INSERT INTO session_leases AS l (session_id, node_id, epoch, expires_at)
VALUES ($1, $2, 1, now() + $3::bigint * interval '1 microsecond')
ON CONFLICT (session_id) DO UPDATE SET node_id = excluded.node_id, epoch = l.epoch + 1, expires_at = excluded.expires_at
WHERE l.expires_at <= now() OR l.node_id = excluded.node_id
RETURNING epoch, expires_at, expires_at > now()`

// AcquireLease makes nodeID the owner of sessionID (see
// baton.LeaseStore). The new epoch is not yet fenced-in: the caller tells
// the writer with Own once it has read the session's log.
func (db *DB) AcquireLease(ctx context.Context, sessionID, nodeID string, ttl time.Duration) (baton.Lease, bool, error) {
	c, err := db.cluster()
	if err != nil {
		return baton.Lease{}, false, err
	}
	l := baton.Lease{SessionID: sessionID, NodeID: nodeID}
	err = c.QueryRowContext(ctx, acquireLeaseSQL, sessionID, nodeID, micros(ttl)).Scan(&l.Epoch, &l.ExpiresAt, &l.Live)
	var pe *pgconn.PgError
	switch {
	case err == nil:
		l.ExpiresAt = l.ExpiresAt.UTC()
		return l, true, nil
	case errors.As(err, &pe) && pe.Code == "23503": // foreign_key_violation
		return baton.Lease{}, false, errNoSession(sessionID)
	case !errors.Is(err, sql.ErrNoRows):
		return baton.Lease{}, false, fmt.Errorf("acquire lease: %w", err)
	}
	// Another node holds it live.
	held, err := db.LeaseHolder(ctx, sessionID)
	if err != nil {
		return baton.Lease{}, false, fmt.Errorf("acquire lease: %w", err)
	}
	return held, false, nil
}

// RenewLeases extends nodeID's live leases of sessions not closed (open,
// or in state error, which still takes events) and returns them, in
// session order (see baton.LeaseStore). The lease of a closed session is
// left to lapse: nothing needs an owner there any more, and the nodes'
// session counts drop.
func (db *DB) RenewLeases(ctx context.Context, nodeID string, ttl time.Duration) ([]baton.Lease, error) {
	c, err := db.cluster()
	if err != nil {
		return nil, err
	}
	rows, err := c.QueryContext(ctx, `WITH renewed AS (
	UPDATE session_leases SET expires_at = now() + $2::bigint * interval '1 microsecond'
	WHERE node_id = $1 AND expires_at > now()
	AND EXISTS (SELECT 1 FROM sessions s WHERE s.id = session_leases.session_id AND s.state <> 'closed')
	RETURNING session_id, epoch, expires_at)
SELECT session_id, epoch, expires_at, expires_at > now() FROM renewed ORDER BY session_id`, nodeID, micros(ttl))
	if err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	defer rows.Close()
	var out []baton.Lease
	for rows.Next() {
		l := baton.Lease{NodeID: nodeID}
		if err := rows.Scan(&l.SessionID, &l.Epoch, &l.ExpiresAt, &l.Live); err != nil {
			return nil, fmt.Errorf("renew leases: %w", err)
		}
		l.ExpiresAt = l.ExpiresAt.UTC()
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("renew leases: %w", err)
	}
	return out, nil
}

// ReleaseLease expires nodeID's lease on sessionID at epoch now.
func (db *DB) ReleaseLease(ctx context.Context, sessionID, nodeID string, epoch int64) (bool, error) {
	c, err := db.cluster()
	if err != nil {
		return false, err
	}
	res, err := c.ExecContext(ctx, `UPDATE session_leases SET expires_at = LEAST(expires_at, now())
WHERE session_id = $1 AND node_id = $2 AND epoch = $3`, sessionID, nodeID, epoch)
	if err != nil {
		return false, fmt.Errorf("release lease: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("release lease: %w", err)
	}
	return n > 0, nil
}

// LeaseHolder returns sessionID's lease and its holder's advertised URL;
// a session without a lease row is ECodeNotFound.
func (db *DB) LeaseHolder(ctx context.Context, sessionID string) (baton.Lease, error) {
	c, err := db.cluster()
	if err != nil {
		return baton.Lease{}, err
	}
	l := baton.Lease{SessionID: sessionID}
	err = c.QueryRowContext(ctx, `SELECT l.node_id, l.epoch, l.expires_at, l.expires_at > now(), COALESCE(n.advertise_url, '')
FROM session_leases l LEFT JOIN nodes n ON n.id = l.node_id WHERE l.session_id = $1`, sessionID).
		Scan(&l.NodeID, &l.Epoch, &l.ExpiresAt, &l.Live, &l.AdvertiseURL)
	if errors.Is(err, sql.ErrNoRows) {
		return baton.Lease{}, baton.Errorf(baton.ECodeNotFound, "session %s has no lease", sessionID)
	}
	if err != nil {
		return baton.Lease{}, fmt.Errorf("lease holder: %w", err)
	}
	l.ExpiresAt = l.ExpiresAt.UTC()
	return l, nil
}

// OrphanedSessions returns up to limit open sessions without a live lease
// (see baton.LeaseStore), oldest first. It walks the open sessions by the
// sessions_state index and looks each one's lease up by its key.
func (db *DB) OrphanedSessions(ctx context.Context, limit int) ([]string, error) {
	c, err := db.cluster()
	if err != nil {
		return nil, err
	}
	out, err := queryColumn(ctx, c, `SELECT s.id FROM sessions s LEFT JOIN session_leases l ON l.session_id = s.id
WHERE s.state = 'open' AND (l.session_id IS NULL OR l.expires_at <= now()) ORDER BY s.ord LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("orphaned sessions: %w", err)
	}
	return out, nil
}

// RevokedSessions returns up to limit open sessions that nodeID holds a
// live lease on and that no participant can act in any more: every
// session key of theirs was revoked. In a cluster the node that revokes a
// client key closes such sessions only where it is the owner; each owner
// closes its own (see baton.LeaseStore).
func (db *DB) RevokedSessions(ctx context.Context, nodeID string, limit int) ([]string, error) {
	c, err := db.cluster()
	if err != nil {
		return nil, err
	}
	out, err := queryColumn(ctx, c, `SELECT s.id FROM session_leases l JOIN sessions s ON s.id = l.session_id
WHERE l.node_id = $1 AND l.expires_at > now() AND s.state = 'open'
AND NOT EXISTS (SELECT 1 FROM keys k WHERE k.name = s.id AND k.role = 'session' AND k.deleted_at IS NULL)
ORDER BY s.ord LIMIT $2`, nodeID, limit)
	if err != nil {
		return nil, fmt.Errorf("revoked sessions: %w", err)
	}
	return out, nil
}

// SessionOwners maps each of sessionIDs with a live lease to its holder
// (see baton.LeaseStore), in one statement.
func (db *DB) SessionOwners(ctx context.Context, sessionIDs []string) (map[string]string, error) {
	c, err := db.cluster()
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(sessionIDs))
	if len(sessionIDs) == 0 {
		return out, nil
	}
	rows, err := c.QueryContext(ctx, `SELECT session_id, node_id FROM session_leases
WHERE session_id = ANY($1::text[]) AND expires_at > now()`, sessionIDs)
	if err != nil {
		return nil, fmt.Errorf("session owners: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, node string
		if err := rows.Scan(&id, &node); err != nil {
			return nil, fmt.Errorf("session owners: %w", err)
		}
		out[id] = node
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("session owners: %w", err)
	}
	return out, nil
}
