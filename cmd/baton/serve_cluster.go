package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/baton-engine/baton/cluster"
	"github.com/baton-engine/baton/executor"
	"github.com/baton-engine/baton/store"
)

// openClusterHands returns the executor hands of a cluster node: the
// tools of the executors connected here (local) and, through the other
// nodes, of those connected to them (docs/cluster.md). The engine takes
// it as its Executors in place of local; the node's loop refreshes it,
// and the client port serves its internal endpoints (clusterRoute).
// Close it after the engine and before the executor side.
func openClusterHands(ctx context.Context, db *store.DB, nodeID string, ttl time.Duration, local *executor.Hands, log *slog.Logger) (*cluster.Hands, error) {
	secret, err := db.ClusterSecret(ctx)
	if err != nil {
		return nil, fmt.Errorf("cluster secret: %w", err)
	}
	return cluster.NewHands(cluster.HandsOptions{
		Local: local, Store: db, ID: nodeID, Secret: secret, LeaseTTL: ttl, Logger: log,
	}), nil
}

// clusterRoute is the client port's Route on a cluster node: the other
// nodes' internal requests are served by hands, never forwarded; every
// other request goes through the node's Forward.
func clusterRoute(node *cluster.Node, hands *cluster.Hands) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return hands.Mount(node.Forward(next))
	}
}
