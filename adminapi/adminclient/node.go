package adminclient

import (
	"context"
	"encoding/json"
	"time"
)

// Node is one cluster node as GET /admin/v1/nodes lists it. Times are
// the server's RFC 3339 UTC strings.
type Node struct {
	ID             string `json:"id"`
	AdvertiseURL   string `json:"advertise_url"`
	Version        string `json:"version"`
	StartedAt      string `json:"started_at"`
	HeartbeatAt    string `json:"heartbeat_at"`
	HeartbeatAgeMS int64  `json:"heartbeat_age_ms"`
	Draining       bool   `json:"draining"`
	Sessions       int    `json:"sessions"` // live leases
}

// HeartbeatAge is how old the node's last heartbeat was when the server
// answered, by the database's clock.
func (n *Node) HeartbeatAge() time.Duration {
	return time.Duration(n.HeartbeatAgeMS) * time.Millisecond
}

// NodeList is the body of GET /admin/v1/nodes. Cluster is false, and
// Nodes empty, when the server is a single node (SQLite, or PostgreSQL
// without cluster mode).
type NodeList struct {
	Cluster bool   `json:"cluster"`
	Nodes   []Node `json:"nodes"`
}

// Nodes lists the cluster's nodes, oldest first; raw is the body as the
// server sent it. A body without a nodes array is ErrUnexpected.
func (c *Client) Nodes(ctx context.Context) (l *NodeList, raw json.RawMessage, err error) {
	if err := c.Get(ctx, "/admin/v1/nodes", nil, &raw); err != nil {
		return nil, nil, err
	}
	l = new(NodeList)
	if err := json.Unmarshal(raw, l); err != nil || l.Nodes == nil {
		return nil, nil, ErrUnexpected
	}
	return l, raw, nil
}
