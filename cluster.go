package baton

import (
	"context"
	"time"
)

// Several Baton nodes sharing one PostgreSQL database form one Baton: each
// open session is owned by one node, which holds the session's lease. A
// lease is a row with an epoch that every takeover increments; the owner's
// appends are fenced by it, so a node that lost a lease can never append
// to that session again. Expiry is judged by the database's clock alone.

// Node is one Baton process of a cluster, as registered in the database.
type Node struct {
	ID string
	// AdvertiseURL is the node's client-port base URL, where the other
	// nodes forward requests for the sessions it owns.
	AdvertiseURL string
	Version      string
	StartedAt    time.Time
	HeartbeatAt  time.Time
	// HeartbeatAge is how long ago the last heartbeat was, by the
	// database's clock (never a node's).
	HeartbeatAge time.Duration
	// Draining nodes take no new sessions and hand theirs over.
	Draining bool
	// Sessions is how many live (unexpired) leases the node holds.
	Sessions int
}

// Lease is a node's ownership of a session. Epoch starts at 1 and grows by
// one at every takeover, including a node taking back its own lease.
type Lease struct {
	SessionID string
	NodeID    string
	Epoch     int64
	ExpiresAt time.Time
	// Live reports, by the database's clock, that the lease had not
	// expired when it was read.
	Live bool
	// AdvertiseURL is the holder's, when the holder is a registered node.
	AdvertiseURL string
}

// NodeRegistry is the cluster's list of nodes.
type NodeRegistry interface {
	// RegisterNode inserts or replaces node n (started and heartbeat now,
	// not draining); ID, AdvertiseURL and Version are read.
	RegisterNode(ctx context.Context, n *Node) error
	// HeartbeatNode records that node id is alive; an unknown (removed)
	// node is ECodeNotFound and should register again.
	HeartbeatNode(ctx context.Context, id string) error
	// Nodes lists every registered node, oldest first.
	Nodes(ctx context.Context) ([]*Node, error)
	// SetDraining marks node id draining, or not.
	SetDraining(ctx context.Context, id string, draining bool) error
	// RemoveNode deletes node id and expires its leases now (their epochs
	// stay, so a takeover still fences the node out).
	RemoveNode(ctx context.Context, id string) error
}

// LeaseStore grants and renews session leases. A ttl of 0 grants a lease
// that is already expired (tests use it to force a takeover).
type LeaseStore interface {
	// AcquireLease makes nodeID the owner of session sessionID: it creates
	// the lease at epoch 1, or takes it over (epoch + 1) when it expired
	// or is nodeID's own, and reports true with the new lease. When
	// another node holds a live lease it reports false with that lease
	// (and the holder's AdvertiseURL, for forwarding). A missing session
	// is ECodeNotFound.
	AcquireLease(ctx context.Context, sessionID, nodeID string, ttl time.Duration) (Lease, bool, error)
	// RenewLeases extends every live lease of nodeID on a session that is
	// not closed to ttl from now, in one statement, and returns the leases
	// it still holds: a session missing from the result was lost (taken
	// over, released, or expired) or closed, and must be disowned before
	// re-acquiring it.
	RenewLeases(ctx context.Context, nodeID string, ttl time.Duration) ([]Lease, error)
	// ReleaseLease expires nodeID's lease on sessionID now, so that another
	// node can take it over at once (a graceful handover). It reports
	// false when nodeID did not hold the lease at that epoch.
	ReleaseLease(ctx context.Context, sessionID, nodeID string, epoch int64) (bool, error)
	// LeaseHolder returns the session's lease, live or not; a session that
	// never had one is ECodeNotFound.
	LeaseHolder(ctx context.Context, sessionID string) (Lease, error)
	// OrphanedSessions returns up to limit open sessions whose lease has
	// expired, or that never had one: nobody acts for them, and any node
	// may take them over.
	OrphanedSessions(ctx context.Context, limit int) ([]string, error)
	// RevokedSessions returns up to limit open sessions nodeID holds a
	// live lease on whose participants' keys were all revoked: a client
	// key revoked on another node leaves them to their owner to close.
	RevokedSessions(ctx context.Context, nodeID string, limit int) ([]string, error)
	// SessionOwners maps each of the given sessions that has a live lease
	// to its holder's node id.
	SessionOwners(ctx context.Context, sessionIDs []string) (map[string]string, error)
}
