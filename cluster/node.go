package cluster

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/baton-engine/baton"
)

// DefaultLeaseTTL is how long a session lease lasts without renewal
// (BATON_LEASE_TTL): a node that stops is replaced within about this long.
const DefaultLeaseTTL = 5 * time.Second

// dialTimeout bounds connecting to another node.
const dialTimeout = 3 * time.Second

// nodeTransport is how a node talks to the others: directly, never
// through HTTP_PROXY, with a dial timeout so that a node that heartbeats
// but cannot be reached (a partition between nodes) fails in time and the
// request is tried again, and kept-alive connections for the traffic
// between nodes.
func nodeTransport() *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	}
}

// orphanBatch is how many sessions without a live lease one sweep takes
// over at most; the next sweep, a third of a TTL later, takes more.
const orphanBatch = 100

// Store is what a node needs of the store: the node registry, the
// leases, and the fence of its appends (Own after acquiring a lease,
// Disown after losing one).
type Store interface {
	baton.NodeRegistry
	baton.LeaseStore
	Own(sessionID string, epoch int64)
	Disown(sessionID string)
}

// Engine is told which sessions this node gains and loses.
type Engine interface {
	// Adopt prepares a session taken over from another owner; the store
	// already fences appends at the new epoch.
	Adopt(ctx context.Context, sessionID string) error
	// Evict drops the runtime of a session this node no longer owns.
	Evict(sessionID string)
	// CloseRevoked closes a session whose keys were all revoked on
	// another node.
	CloseRevoked(ctx context.Context, sessionID string) error
	// Busy reports whether the session has work in hand here (a running
	// or queued turn): a draining node hands the others over at once.
	Busy(sessionID string) bool
}

// Options configure a Node.
type Options struct {
	Store  Store
	Engine Engine
	// ID names this node; it must be the store's NodeID.
	ID string
	// AdvertiseURL is this node's client-port base URL, where the other
	// nodes forward requests for the sessions it owns
	// (BATON_ADVERTISE_URL; by default the client listener's URL). It may
	// be set after New, before Open.
	AdvertiseURL string
	Version      string
	// LeaseTTL is the lease duration (DefaultLeaseTTL when <= 0). Leases
	// are renewed and orphans swept every LeaseTTL/3.
	LeaseTTL time.Duration
	// Transport carries forwarded requests (a dedicated http.Transport
	// when nil).
	Transport http.RoundTripper
	Logger    *slog.Logger
	// OnTick, when set, runs last in every round of the loop, with the
	// same budget as each step (cmd/baton: the executor tools' Refresh).
	OnTick func(ctx context.Context) error
}

// Node is this process's membership of the cluster. Its goroutine runs
// from Open to Close.
type Node struct {
	opts Options
	ttl  time.Duration
	log  *slog.Logger
	rt   http.RoundTripper

	mu       sync.Mutex
	owned    map[string]owned         // sessions this node holds a lease on
	remote   map[string]remote        // recently seen owners of other sessions
	inflight map[string]chan struct{} // sessions being resolved (one lookup at a time)
	draining bool

	watches watches // forwarded requests in flight, by target node

	active     map[string]int      // requests being served here, by session: a drain keeps those sessions
	handedOver map[string]struct{} // sessions a draining node let go; requests for them go elsewhere

	cancel context.CancelFunc
	done   chan struct{}
}

// owned is a lease this node holds. since is when it was acquired or
// first seen, so that a renewal that started earlier does not count it
// as lost.
type owned struct {
	epoch int64
	since time.Time
}

// remote is another node's live lease as last read: requests go there
// until it is stale or the owner turns them away.
type remote struct {
	url   string
	node  string
	until time.Time
}

// New returns a node; it joins the cluster at Open.
func New(opts Options) *Node {
	n := &Node{
		opts: opts, ttl: opts.LeaseTTL, log: opts.Logger, rt: opts.Transport,
		owned: map[string]owned{}, remote: map[string]remote{}, inflight: map[string]chan struct{}{},
		active: map[string]int{}, handedOver: map[string]struct{}{},
	}
	if n.ttl <= 0 {
		n.ttl = DefaultLeaseTTL
	}
	if n.log == nil {
		n.log = slog.New(slog.DiscardHandler)
	}
	if n.rt == nil {
		n.rt = nodeTransport()
	}
	return n
}

// ID is the node's id.
func (n *Node) ID() string { return n.opts.ID }

// SetAdvertiseURL sets the URL the node registers at Open.
func (n *Node) SetAdvertiseURL(u string) { n.opts.AdvertiseURL = u }

// Open registers the node and starts its loop. Leases still held under
// the node's id, by a previous run under the same BATON_NODE_ID that
// stopped within the TTL, are expired first: this process's store does
// not fence them in nor its engine hold them, so renewing them as its own
// would strand their sessions. They are taken over like any stopped
// node's.
func (n *Node) Open(ctx context.Context) error {
	if err := n.opts.Store.RemoveNode(ctx, n.opts.ID); err != nil && baton.ErrorCode(err) != baton.ECodeNotFound {
		return err
	}
	if err := n.register(ctx); err != nil {
		return err
	}
	lctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	n.cancel, n.done = cancel, make(chan struct{})
	go func() {
		defer close(n.done)
		n.loop(lctx)
	}()
	n.log.Info("cluster node joined", "node_id", n.opts.ID, "advertise_url", n.opts.AdvertiseURL, "lease_ttl", n.ttl)
	return nil
}

func (n *Node) register(ctx context.Context) error {
	return n.opts.Store.RegisterNode(ctx, &baton.Node{ID: n.opts.ID, AdvertiseURL: n.opts.AdvertiseURL, Version: n.opts.Version})
}

// Drain marks the node draining: it takes over no more sessions, and
// the registry shows it. Shutdown calls it first.
func (n *Node) Drain(ctx context.Context) error {
	n.mu.Lock()
	n.draining = true
	n.mu.Unlock()
	if k := n.watches.cutStreams(); k > 0 {
		n.log.Info("relayed streams cut for shutdown", "node_id", n.opts.ID, "streams", k)
	}
	n.handOverIdle(ctx)
	return n.opts.Store.SetDraining(ctx, n.opts.ID, true)
}

// handOverIdle releases, from the start of a drain and then at every
// round of the loop, the leases of the sessions with no work in hand
// here, so that the other nodes serve them at once instead of waiting for
// the drain to end: a request that finds this node gone takes them over
// on its next try. What is still busy at Close is handed over then.
func (n *Node) handOverIdle(ctx context.Context) {
	n.mu.Lock()
	idle := make(map[string]int64)
	for id, o := range n.owned {
		if _, resolving := n.inflight[id]; !resolving && n.active[id] == 0 && !n.opts.Engine.Busy(id) {
			idle[id] = o.epoch
			delete(n.owned, id)
			n.handedOver[id] = struct{}{}
			n.inflight[id] = make(chan struct{}) // requests wait for the release
		}
	}
	n.mu.Unlock()
	released := 0
	for id, epoch := range idle {
		n.opts.Store.Disown(id)
		n.opts.Engine.Evict(id)
		if ok, err := n.opts.Store.ReleaseLease(ctx, id, n.opts.ID, epoch); err != nil {
			n.log.Warn("release lease", "node_id", n.opts.ID, "session_id", id, "err", err)
		} else if ok {
			released++
		}
		n.mu.Lock()
		done := n.inflight[id]
		delete(n.inflight, id)
		n.mu.Unlock()
		close(done)
	}
	if len(idle) > 0 {
		n.log.Info("idle sessions handed over", "node_id", n.opts.ID, "sessions", released)
	}
}

// errHandedOver is why a request that was routed here looks again: the
// session was handed over meanwhile.
var errHandedOver = baton.Errorf(baton.ECodeUnavailable, "the session was handed over to another node")

// hold counts a request about sessionID that this node serves now, so
// that a drain does not hand the session over under it; the returned
// func ends it. It refuses (ok false) a session being handed over or
// already handed over: the request must look for its owner again.
func (n *Node) hold(sessionID string) (release func(), ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.holdLocked(sessionID, false)
}

// holdOwned is hold for a session this node owns, and refuses any other:
// the route and the hold of the common case in one lock.
func (n *Node) holdOwned(sessionID string) (release func(), ok bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.holdLocked(sessionID, true)
}

func (n *Node) holdLocked(sessionID string, ownedOnly bool) (release func(), ok bool) {
	if _, own := n.owned[sessionID]; ownedOnly && !own {
		return nil, false
	}
	if _, busy := n.inflight[sessionID]; busy {
		return nil, false
	}
	if _, gone := n.handedOver[sessionID]; gone {
		return nil, false
	}
	n.active[sessionID]++
	return func() {
		n.mu.Lock()
		if n.active[sessionID]--; n.active[sessionID] <= 0 {
			delete(n.active, sessionID)
		}
		n.mu.Unlock()
	}, true
}

// Close stops the loop and leaves the cluster: the node's row is removed
// and its leases expire now (keeping their epochs, which still fence this
// node out), so the other nodes take its sessions over at once. Call it
// after the engine has stopped, so that nothing appends any more. Close
// of a node that was never opened does nothing.
func (n *Node) Close() error {
	if n.cancel == nil {
		return nil
	}
	n.cancel()
	<-n.done
	n.cancel = nil
	n.mu.Lock()
	ids := make([]string, 0, len(n.owned))
	for id := range n.owned {
		ids = append(ids, id)
	}
	n.owned = map[string]owned{}
	n.mu.Unlock()
	for _, id := range ids {
		n.opts.Store.Disown(id)
	}
	ctx, cancel := context.WithTimeout(context.Background(), n.ttl)
	defer cancel()
	err := n.opts.Store.RemoveNode(ctx, n.opts.ID)
	if baton.ErrorCode(err) == baton.ECodeNotFound {
		err = nil
	}
	n.log.Info("cluster node left", "node_id", n.opts.ID, "sessions_handed_over", len(ids))
	return err
}

// loop renews, heartbeats and sweeps every third of the TTL until ctx ends.
func (n *Node) loop(ctx context.Context) {
	t := time.NewTicker(n.ttl / 3)
	defer t.Stop()
	for i := 1; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n.tick(ctx, i%pruneEvery == 0)
	}
}

// tick is one round of the loop. Each step has a TTL/3 budget, so a slow
// database delays the next round instead of piling calls up.
func (n *Node) tick(ctx context.Context, prune bool) {
	step := func(what string, f func(context.Context) error) {
		sctx, cancel := context.WithTimeout(ctx, n.ttl/3)
		defer cancel()
		if err := f(sctx); err != nil && ctx.Err() == nil {
			n.log.Warn("cluster "+what, "node_id", n.opts.ID, "err", err)
		}
	}
	step("lease renewal", n.renew)
	n.mu.Lock()
	draining := n.draining
	n.mu.Unlock()
	if draining { // sessions whose work ended since the drain began go too
		step("handover", func(ctx context.Context) error { n.handOverIdle(ctx); return nil })
	}
	step("heartbeat", n.heartbeat)
	step("takeover sweep", n.sweep)
	step("revoked sessions sweep", n.closeRevoked)
	step("forward targets check", n.checkTargets)
	if prune {
		step("dead node sweep", n.prune)
	}
	if n.opts.OnTick != nil {
		step("executor tools refresh", n.opts.OnTick)
	}
}

// pruneEvery is how many rounds of the loop pass between dead-node sweeps.
const pruneEvery = 30

// deadAfter is how long a node may miss heartbeats before the others
// remove it from the registry: long enough that a node paused for a while
// comes back and registers again, short enough that `baton admin nodes`
// does not list yesterday's crashed processes.
func (n *Node) deadAfter() time.Duration { return max(10*n.ttl, time.Minute) }

// prune removes nodes whose heartbeat stopped long ago. Their leases
// lapsed long before, and keep their epochs.
func (n *Node) prune(ctx context.Context) error {
	nodes, err := n.opts.Store.Nodes(ctx)
	if err != nil {
		return err
	}
	for _, o := range nodes {
		if o.ID == n.opts.ID || o.HeartbeatAge < n.deadAfter() {
			continue
		}
		if err := n.opts.Store.RemoveNode(ctx, o.ID); err != nil && baton.ErrorCode(err) != baton.ECodeNotFound {
			return err
		}
		n.log.Info("dead node removed", "node_id", o.ID, "heartbeat_age", o.HeartbeatAge)
	}
	return nil
}

// renew extends this node's leases and evicts the sessions it lost.
func (n *Node) renew(ctx context.Context) error {
	start := time.Now()
	leases, err := n.opts.Store.RenewLeases(ctx, n.opts.ID, n.ttl)
	if err != nil {
		return err
	}
	held := make(map[string]int64, len(leases))
	for _, l := range leases {
		held[l.SessionID] = l.Epoch
	}
	var lost []string
	n.mu.Lock()
	for id, o := range n.owned {
		if _, ok := held[id]; !ok && o.since.Before(start) {
			lost = append(lost, id)
			delete(n.owned, id)
			// Resolving waits until the session is disowned and evicted, so
			// that a takeover right away is not undone by either.
			n.inflight[id] = make(chan struct{})
		}
	}
	for id, epoch := range held { // sessions opened here since the last round
		if _, ok := n.owned[id]; !ok {
			n.owned[id] = owned{epoch: epoch, since: start}
		}
	}
	n.mu.Unlock()
	for _, id := range lost {
		n.opts.Store.Disown(id)
		n.opts.Engine.Evict(id)
		n.mu.Lock()
		done := n.inflight[id]
		delete(n.inflight, id)
		n.mu.Unlock()
		close(done)
		n.log.Info("session lease ended: closed, or taken over by another node", "node_id", n.opts.ID, "session_id", id)
	}
	return nil
}

// closeRevoked closes the sessions this node owns whose keys were all
// revoked, on whichever node: a revocation closes at once only the
// sessions its own node owns.
func (n *Node) closeRevoked(ctx context.Context) error {
	ids, err := n.opts.Store.RevokedSessions(ctx, n.opts.ID, orphanBatch)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		errs = append(errs, n.opts.Engine.CloseRevoked(ctx, id))
	}
	return errors.Join(errs...)
}

// heartbeat records that the node is alive, registering it again if
// another node removed it meanwhile.
func (n *Node) heartbeat(ctx context.Context) error {
	err := n.opts.Store.HeartbeatNode(ctx, n.opts.ID)
	if baton.ErrorCode(err) == baton.ECodeNotFound {
		return n.register(ctx)
	}
	return err
}

// sweep takes over open sessions that nobody holds, so that a stopped
// node's paused turns keep their abandonment deadlines and interrupted
// turns are ended without waiting for a request.
func (n *Node) sweep(ctx context.Context) error {
	n.mu.Lock()
	draining := n.draining
	n.mu.Unlock()
	if draining {
		return nil
	}
	ids, err := n.opts.Store.OrphanedSessions(ctx, orphanBatch)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if _, err := n.route(ctx, id, false); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Owned reports how many sessions this node holds.
func (n *Node) Owned() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.owned)
}
