package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/baton-engine/baton"
)

// Route says where sessionID is served: "" when this node owns it (now,
// possibly by taking it over), otherwise the base URL of the node that
// does. A session that does not exist is served here, so that the
// handler answers as for any unknown session.
func (n *Node) Route(ctx context.Context, sessionID string) (string, error) {
	return n.route(ctx, sessionID, true)
}

// route resolves sessionID; with cached false it reads the lease even if
// a recent answer names another node (that node turned us away, or could
// not be reached).
func (n *Node) route(ctx context.Context, sessionID string, cached bool) (string, error) {
	for {
		n.mu.Lock()
		if _, ok := n.owned[sessionID]; ok {
			n.mu.Unlock()
			return "", nil
		}
		if r, ok := n.remote[sessionID]; ok && cached && time.Now().Before(r.until) {
			n.mu.Unlock()
			return r.url, nil
		}
		wait, busy := n.inflight[sessionID]
		if !busy {
			done := make(chan struct{})
			n.inflight[sessionID] = done
			n.mu.Unlock()
			url, err := n.resolve(ctx, sessionID)
			n.mu.Lock()
			delete(n.inflight, sessionID)
			n.mu.Unlock()
			close(done)
			return url, err
		}
		n.mu.Unlock()
		select { // another request is resolving it: take its answer
		case <-wait:
			cached = true
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
}

// resolve reads the session's lease and, when nobody holds it live,
// takes it over. It runs once at a time per session.
func (n *Node) resolve(ctx context.Context, sessionID string) (string, error) {
	l, err := n.opts.Store.LeaseHolder(ctx, sessionID)
	switch {
	case baton.ErrorCode(err) == baton.ECodeNotFound:
		// No lease row: a session opened before cluster mode, or none at all.
	case err != nil:
		return "", err
	case l.Live && l.NodeID == n.opts.ID:
		// Opened here since the last renewal: the store fences it already.
		n.mu.Lock()
		n.owned[sessionID] = owned{epoch: l.Epoch, since: time.Now()}
		n.mu.Unlock()
		return "", nil
	case l.Live:
		return n.remoteOwner(sessionID, l)
	}
	return n.acquire(ctx, sessionID)
}

// acquire takes the session's lease, or learns who won it.
func (n *Node) acquire(ctx context.Context, sessionID string) (string, error) {
	n.mu.Lock()
	draining := n.draining
	n.mu.Unlock()
	if draining {
		return "", errDraining
	}
	since := time.Now()
	l, ok, err := n.opts.Store.AcquireLease(ctx, sessionID, n.opts.ID, n.ttl)
	switch {
	case baton.ErrorCode(err) == baton.ECodeNotFound:
		return "", nil // no such session: the handler says so
	case err != nil:
		return "", err
	case !ok:
		return n.remoteOwner(sessionID, l)
	}
	n.opts.Store.Own(sessionID, l.Epoch)
	n.mu.Lock()
	n.owned[sessionID] = owned{epoch: l.Epoch, since: since}
	delete(n.remote, sessionID)
	n.mu.Unlock()
	if err := n.opts.Engine.Adopt(ctx, sessionID); err != nil {
		n.log.Warn("adopt session", "node_id", n.opts.ID, "session_id", sessionID, "err", err)
	}
	n.log.Info("session taken over", "node_id", n.opts.ID, "session_id", sessionID, "epoch", l.Epoch)
	return "", nil
}

// remoteOwner remembers another node's live lease for a third of a TTL.
func (n *Node) remoteOwner(sessionID string, l baton.Lease) (string, error) {
	if l.AdvertiseURL == "" {
		return "", baton.Errorf(baton.ECodeUnavailable, "session %s is owned by node %s, which has no address", sessionID, l.NodeID)
	}
	n.mu.Lock()
	n.remote[sessionID] = remote{url: l.AdvertiseURL, node: l.NodeID, until: time.Now().Add(n.ttl / 3)}
	if len(n.remote) > maxRemote {
		n.pruneRemoteLocked()
	}
	n.mu.Unlock()
	return l.AdvertiseURL, nil
}

// maxRemote bounds the cache of other nodes' sessions.
const maxRemote = 1 << 16

// pruneRemoteLocked drops stale entries, and all of them if none was.
func (n *Node) pruneRemoteLocked() {
	now := time.Now()
	for id, r := range n.remote {
		if !now.Before(r.until) {
			delete(n.remote, id)
		}
	}
	if len(n.remote) > maxRemote {
		clear(n.remote)
	}
}

// targetNode returns the node a cached route to sessionID names.
func (n *Node) targetNode(sessionID string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.remote[sessionID].node
}

// forgetRemote drops a cached owner that turned a request away or could
// not be reached.
func (n *Node) forgetRemote(sessionID string) {
	n.mu.Lock()
	delete(n.remote, sessionID)
	n.mu.Unlock()
}

// errDraining is why a draining node does not take a session over.
var errDraining = baton.Errorf(baton.ECodeUnavailable, "this node is shutting down and takes over no sessions")

// errNoOwner is the answer when no node could serve a session in time.
func errNoOwner(sessionID string, err error) error {
	return baton.Errorf(baton.ECodeUnavailable, "%s", fmt.Sprintf("no node could serve session %s: %v", sessionID, err))
}
