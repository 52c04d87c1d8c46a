package cluster

import (
	"context"
	"errors"
	"sync"
)

// errOwnerGone is the cause of a forwarded request cancelled because the
// node it went to stopped heartbeating: it is paused (SIGSTOP, a long GC),
// cut off, or dead without having closed its connections. Its leases
// lapse with its heartbeats, so the request is sent again and reaches the
// session's next owner.
var errOwnerGone = errors.New("the node owning the session stopped heartbeating")

// watches are the forwarded requests in flight, by the node they went
// to. A TCP connection to a stopped process stays open, so without them a
// request would wait on it forever; each round of the node's loop instead
// reads the registry once, whatever the number of requests, and cancels
// those whose target has missed a lease TTL of heartbeats.
type watches struct {
	mu     sync.Mutex
	byNode map[string]map[*watch]struct{}
}

type watch struct {
	cancel context.CancelCauseFunc
	stream bool // a subscription or calls stream, which only its client ends
}

// errNodeStopping is the cause of the relayed streams a stopping node
// cuts: their clients subscribe or connect again, through another node.
var errNodeStopping = errors.New("the node relaying this stream is shutting down")

// add watches a request forwarded to node; the returned func stops it.
func (ws *watches) add(node string, cancel context.CancelCauseFunc) func() {
	return ws.addWatch(node, &watch{cancel: cancel})
}

// addStream watches a long-lived stream relayed from node, which a
// stopping node cuts (cutStreams).
func (ws *watches) addStream(node string, cancel context.CancelCauseFunc) func() {
	return ws.addWatch(node, &watch{cancel: cancel, stream: true})
}

func (ws *watches) addWatch(node string, w *watch) func() {
	ws.mu.Lock()
	if ws.byNode == nil {
		ws.byNode = map[string]map[*watch]struct{}{}
	}
	if ws.byNode[node] == nil {
		ws.byNode[node] = map[*watch]struct{}{}
	}
	ws.byNode[node][w] = struct{}{}
	ws.mu.Unlock()
	return func() {
		ws.mu.Lock()
		delete(ws.byNode[node], w)
		if len(ws.byNode[node]) == 0 {
			delete(ws.byNode, node)
		}
		ws.mu.Unlock()
	}
}

// cutStreams cancels every relayed stream, so that they do not hold a
// stopping node's drain until its shutdown timeout.
func (ws *watches) cutStreams() int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	n := 0
	for _, m := range ws.byNode {
		for w := range m {
			if w.stream {
				w.cancel(errNodeStopping)
				n++
			}
		}
	}
	return n
}

// targets returns the nodes that have requests in flight.
func (ws *watches) targets() []string {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	out := make([]string, 0, len(ws.byNode))
	for node := range ws.byNode {
		out = append(out, node)
	}
	return out
}

// fail cancels every request in flight to node.
func (ws *watches) fail(node string) int {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for w := range ws.byNode[node] {
		w.cancel(errOwnerGone)
	}
	n := len(ws.byNode[node])
	delete(ws.byNode, node)
	return n
}

// checkTargets cancels the forwarded requests whose target node has not
// heartbeated for a lease TTL, or left the registry.
func (n *Node) checkTargets(ctx context.Context) error {
	targets := n.watches.targets()
	if len(targets) == 0 {
		return nil
	}
	nodes, err := n.opts.Store.Nodes(ctx)
	if err != nil {
		return err
	}
	alive := make(map[string]bool, len(nodes))
	for _, o := range nodes {
		alive[o.ID] = o.HeartbeatAge < n.ttl
	}
	for _, id := range targets {
		if !alive[id] {
			if k := n.watches.fail(id); k > 0 {
				n.log.Warn("forwarded requests cancelled: their node stopped heartbeating", "node_id", n.opts.ID, "target", id, "requests", k)
			}
		}
	}
	return nil
}
