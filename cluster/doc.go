// Package cluster makes several Baton nodes that share one PostgreSQL
// database act as one Baton (docs/cluster.md).
//
// Each open session is owned by exactly one node: the one holding its
// lease row, which the store fences every append with. A Node keeps this
// process's part of that contract:
//
//   - it registers the node and its advertised client URL, and heartbeats;
//   - it renews its leases every third of their TTL, and tells the engine
//     about sessions it lost (taken over while this node was paused or cut
//     off) so their runtime is dropped;
//   - it takes over sessions whose owner stopped renewing (kill -9, a
//     crash, a partition), from its sweep or on the first request for one,
//     and tells the engine to adopt them;
//   - its Forward middleware sends every session-scoped request of the
//     client port to the owner's advertised URL, streaming the answer
//     back, so any node serves any request;
//   - Close removes the node, which expires its leases at once: a graceful
//     shutdown hands its sessions over without waiting for the TTL;
//   - its Hands serve the engine the tools of executors connected to any
//     node: each node publishes its executors' tools in the database, and
//     a call for a tool only another node's executor serves goes to that
//     node's internal endpoint, authenticated by the cluster's secret.
//
// The database is the only shared component and its clock the only clock
// leases are judged by. The package imports the root package, wire (for
// the error frame of a broken stream) and internal/httpx; the store and
// the engine are reached through the interfaces in node.go, wired by
// cmd/baton.
//
// # Files
//
//	node.go     Options, Node, Open and Close, the heartbeat, renewal and takeover loop
//	route.go    Route: whether a session is served here or by which node, acquiring leases
//	forward.go  Forward: the client-port middleware and its streaming proxy
//	watch.go    forwarded requests in flight, cancelled when their node stops heartbeating or this one stops
//	hands.go    Hands: executor tools served across nodes (baton.ExecutorHands over the local hub and the others')
//	internal.go the nodes' internal endpoints (executor calls and releases), authenticated by the cluster secret
package cluster
