package store

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	"github.com/baton-engine/baton"
)

// PublishNodeTools replaces, in one transaction, the executor tools node
// nodeID says it serves (by environment; empty: none). It also deletes
// the rows of nodes that are no longer registered, skipping those
// another transaction holds, so that nodes that stopped without saying
// so leave nothing behind. Skipping a publish that changes nothing is the
// caller's job.
func (db *DB) PublishNodeTools(ctx context.Context, nodeID string, tools map[string][]baton.ToolDef) error {
	c, err := db.cluster()
	if err != nil {
		return err
	}
	if nodeID == "" {
		return baton.Errorf(baton.ECodeBadRequest, "node has no id")
	}
	rows := make(map[string]string, len(tools))
	for env, defs := range tools {
		if len(defs) == 0 {
			continue
		}
		b, err := json.Marshal(defs)
		if err != nil {
			return fmt.Errorf("publish node tools: %w", err)
		}
		rows[env] = string(b)
	}
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("publish node tools: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	// SKIP LOCKED: two nodes sweeping the same leftovers never wait for,
	// nor deadlock with, each other or a node replacing its own rows.
	if _, err := tx.ExecContext(ctx, `DELETE FROM node_tools WHERE (node_id, environment_id) IN (
	SELECT t.node_id, t.environment_id FROM node_tools t
	WHERE t.node_id <> $1 AND NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = t.node_id)
	FOR UPDATE SKIP LOCKED)`, nodeID); err != nil {
		return fmt.Errorf("publish node tools: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM node_tools WHERE node_id = $1`, nodeID); err != nil {
		return fmt.Errorf("publish node tools: %w", err)
	}
	for env, defs := range rows {
		if _, err := tx.ExecContext(ctx, `INSERT INTO node_tools (node_id, environment_id, tools) VALUES ($1, $2, $3)`,
			nodeID, env, defs); err != nil {
			return fmt.Errorf("publish node tools: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("publish node tools: %w", err)
	}
	return nil
}

// RemoteTools returns the executor tools of every registered node other
// than selfID whose heartbeat is younger than maxAge by the database's
// clock, in node id order. A node that publishes no tools is listed with
// none, so that the list also says which nodes are alive; a draining one
// is listed with Draining set. A removed node has no row in nodes, and
// its tools are not listed.
func (db *DB) RemoteTools(ctx context.Context, selfID string, maxAge time.Duration) ([]baton.NodeTools, error) {
	c, err := db.cluster()
	if err != nil {
		return nil, err
	}
	rows, err := c.QueryContext(ctx, `SELECT n.id, n.advertise_url, n.draining, t.environment_id, t.tools
FROM nodes n LEFT JOIN node_tools t ON t.node_id = n.id
WHERE n.id <> $1 AND n.heartbeat_at > now() - $2::bigint * interval '1 microsecond'
ORDER BY n.id, t.environment_id`, selfID, micros(maxAge))
	if err != nil {
		return nil, fmt.Errorf("remote tools: %w", err)
	}
	defer rows.Close()
	var out []baton.NodeTools
	for rows.Next() {
		var n baton.NodeTools
		var env, tools sql.NullString
		if err := rows.Scan(&n.NodeID, &n.AdvertiseURL, &n.Draining, &env, &tools); err != nil {
			return nil, fmt.Errorf("remote tools: %w", err)
		}
		if len(out) == 0 || out[len(out)-1].NodeID != n.NodeID {
			n.Tools = map[string][]baton.ToolDef{}
			out = append(out, n)
		}
		if !env.Valid {
			continue // a node without tools
		}
		var defs []baton.ToolDef
		if err := json.Unmarshal([]byte(tools.String), &defs); err != nil {
			return nil, fmt.Errorf("remote tools: node %s environment %s: %w", n.NodeID, env.String, err)
		}
		out[len(out)-1].Tools[env.String] = defs
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("remote tools: %w", err)
	}
	return out, nil
}

// ClusterSecret returns the secret the nodes of the cluster authenticate
// their internal requests to each other with: 32 random bytes in hex,
// created by the first node that asks and the same for every node after.
func (db *DB) ClusterSecret(ctx context.Context) (string, error) {
	c, err := db.cluster()
	if err != nil {
		return "", err
	}
	var b [32]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never returns an error.
	if _, err := c.ExecContext(ctx, `INSERT INTO cluster_secret (id, secret) VALUES (1, $1) ON CONFLICT (id) DO NOTHING`,
		hex.EncodeToString(b[:])); err != nil {
		return "", fmt.Errorf("cluster secret: %w", err)
	}
	var secret string
	if err := c.QueryRowContext(ctx, `SELECT secret FROM cluster_secret WHERE id = 1`).Scan(&secret); err != nil {
		return "", fmt.Errorf("cluster secret: %w", err)
	}
	return secret, nil
}
