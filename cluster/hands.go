package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-engine/baton"
)

// LocalHands is this node's executor hands (executor.Hands): the tools of
// the environment-scoped executors connected here.
type LocalHands interface {
	baton.ExecutorHands
	// ToolsByEnvironment lists the tools of every environment with
	// connected executors, each list as Tools lists it for that
	// environment alone.
	ToolsByEnvironment() map[string][]baton.ToolDef
}

// ToolStore is where the nodes publish the executor tools they serve and
// read each other's (store.DB in cluster mode).
type ToolStore interface {
	// PublishNodeTools replaces what nodeID serves.
	PublishNodeTools(ctx context.Context, nodeID string, tools map[string][]baton.ToolDef) error
	// RemoteTools lists the registered nodes other than selfID whose
	// heartbeat is younger than maxAge, in node id order, with their
	// tools.
	RemoteTools(ctx context.Context, selfID string, maxAge time.Duration) ([]baton.NodeTools, error)
}

// HandsOptions configure Hands.
type HandsOptions struct {
	Local LocalHands
	Store ToolStore
	// ID is this node's id; Secret authenticates the nodes' internal
	// requests to each other (store.DB.ClusterSecret), sent and checked.
	ID     string
	Secret string
	// LeaseTTL is the cluster's lease TTL (DefaultLeaseTTL when <= 0): a
	// node that has not heartbeated for this long serves no tools here,
	// and the calls in flight to it fail at the next Refresh.
	LeaseTTL time.Duration
	// Transport carries calls to the other nodes (a dedicated
	// http.Transport when nil).
	Transport http.RoundTripper
	Logger    *slog.Logger
}

// Hands is the engine's baton.ExecutorHands on a cluster node: the tools
// of the executors connected to this node (Local) and, through the other
// nodes, of those connected to them. Tools and Call read an in-memory
// snapshot of the other nodes' tools that Refresh, called by the node's
// loop, reloads from the store: listing tools, which precedes every model
// call, never queries the database. A call for a tool an executor
// connected here serves runs here; any other goes to the first node, in
// node id order, that serves it, over its internal endpoint
// (internal.go), and is never sent twice: it gets one result or an
// error.
type Hands struct {
	opts HandsOptions
	ttl  time.Duration
	log  *slog.Logger
	rt   http.RoundTripper

	snap  atomic.Pointer[snapshot]
	calls watches // calls in flight, by the node serving them

	ctx  context.Context // ends at Close: pending releases give up
	stop context.CancelFunc
	wg   sync.WaitGroup // release goroutines

	refreshMu sync.Mutex // one Refresh at a time
	published []byte     // the last tools published, as JSON; nil before the first
	rounds    int        // Refresh rounds since the last publish

	mu     sync.Mutex
	closed bool
	served map[string]map[string]string // session → node id → URL of the nodes its calls went to
}

var _ baton.ExecutorHands = (*Hands)(nil)

// republishEvery is how many Refresh rounds pass at most between two
// publishes of unchanged tools: a node whose rows another node deleted
// (it was removed from the registry while paused) is listed again.
const republishEvery = 30

// callGrace is how long past a call's own timeout the caller waits for
// the serving node, which enforces the timeout, to answer.
const callGrace = 30 * time.Second

// releaseTimeout bounds one release sent to another node.
const releaseTimeout = 10 * time.Second

// NewHands returns Hands over opts.Local; the other nodes' tools appear
// at the first Refresh.
func NewHands(opts HandsOptions) *Hands {
	ctx, stop := context.WithCancel(context.Background())
	x := &Hands{opts: opts, ttl: opts.LeaseTTL, log: opts.Logger, rt: opts.Transport, ctx: ctx, stop: stop, served: map[string]map[string]string{}}
	if x.ttl <= 0 {
		x.ttl = DefaultLeaseTTL
	}
	if x.log == nil {
		x.log = slog.New(slog.DiscardHandler)
	}
	if x.rt == nil {
		x.rt = nodeTransport()
	}
	return x
}

// Close refuses new calls to other nodes and stops the releases still
// being sent. Calls in flight end with their context. Local is not
// closed: its owner closes it.
func (x *Hands) Close() error {
	x.mu.Lock()
	x.closed = true
	x.mu.Unlock()
	x.stop()
	x.wg.Wait()
	if t, ok := x.rt.(*http.Transport); ok && x.opts.Transport == nil {
		t.CloseIdleConnections()
	}
	return nil
}

// snapshot is the other nodes' tools as last read, never modified.
type snapshot struct {
	envs map[string]*envTools
}

// envTools is one environment's tools on the other nodes.
type envTools struct {
	tools []baton.ExecutorTool // in node id order, each name once
	by    map[string]peer      // tool name → the first node serving it
}

// peer is another node.
type peer struct{ id, url string }

// newSnapshot indexes the live nodes' tools; draining nodes and nodes
// without an address serve none.
func newSnapshot(nodes []baton.NodeTools) *snapshot {
	s := &snapshot{envs: map[string]*envTools{}}
	for _, n := range nodes {
		if n.Draining || n.AdvertiseURL == "" {
			continue
		}
		p := peer{id: n.NodeID, url: strings.TrimSuffix(n.AdvertiseURL, "/")}
		for env, defs := range n.Tools {
			e := s.envs[env]
			if e == nil {
				e = &envTools{by: map[string]peer{}}
				s.envs[env] = e
			}
			for _, d := range defs {
				if _, dup := e.by[d.Name]; dup || d.Name == "" {
					continue
				}
				e.by[d.Name] = p
				e.tools = append(e.tools, baton.ExecutorTool{EnvironmentID: env, ToolDef: d})
			}
		}
	}
	return s
}

// Refresh publishes this node's tools when they changed since the last
// publish (or republishEvery rounds passed), reloads the other nodes'
// tools, and fails the calls in flight to nodes that stopped
// heartbeating. The node's loop calls it every third of the lease TTL.
func (x *Hands) Refresh(ctx context.Context) error {
	x.refreshMu.Lock()
	defer x.refreshMu.Unlock()
	var errs []error
	if err := x.publish(ctx); err != nil {
		errs = append(errs, fmt.Errorf("publish executor tools: %w", err))
	}
	nodes, err := x.opts.Store.RemoteTools(ctx, x.opts.ID, x.ttl)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("read executor tools: %w", err))...)
	}
	x.snap.Store(newSnapshot(nodes))
	alive := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		alive[n.NodeID] = true
	}
	for _, id := range x.calls.targets() {
		if !alive[id] {
			if k := x.calls.fail(id); k > 0 {
				x.log.Warn("executor calls failed: their node stopped heartbeating", "node_id", x.opts.ID, "target", id, "calls", k)
			}
		}
	}
	return errors.Join(errs...)
}

// publish writes Local's tools unless they are what was last written.
// refreshMu is held.
func (x *Hands) publish(ctx context.Context) error {
	tools := x.opts.Local.ToolsByEnvironment()
	b, err := json.Marshal(tools) // map keys sorted: equal tools, equal bytes
	if err != nil {
		return err
	}
	x.rounds++
	if x.published != nil && x.rounds < republishEvery && bytes.Equal(b, x.published) {
		return nil
	}
	if err := x.opts.Store.PublishNodeTools(ctx, x.opts.ID, tools); err != nil {
		return err
	}
	x.published, x.rounds = b, 0
	return nil
}

// Tools lists Local's tools and the other nodes' of envIDs, each name
// once: for each environment in order, Local's, then the other nodes' in
// node id order. (Local lists a name once across envIDs already, first
// environment first, so the first environment serving a name owns it.)
// It reads memory only.
func (x *Hands) Tools(envIDs []string) []baton.ExecutorTool {
	local := x.opts.Local.Tools(envIDs)
	s := x.snap.Load()
	if s == nil {
		return local
	}
	n := 0
	for _, env := range envIDs {
		if e := s.envs[env]; e != nil {
			n += len(e.tools)
		}
	}
	if n == 0 {
		return local
	}
	out := make([]baton.ExecutorTool, 0, len(local)+n)
	seen := make(map[string]bool, len(local)+n)
	for _, env := range envIDs {
		for _, t := range local {
			if t.EnvironmentID == env && !seen[t.Name] {
				seen[t.Name] = true
				out = append(out, t)
			}
		}
		if e := s.envs[env]; e != nil {
			for _, t := range e.tools {
				if !seen[t.Name] {
					seen[t.Name] = true
					out = append(out, t)
				}
			}
		}
	}
	return out
}

// Call runs c here when an executor connected here serves c.Name in
// c.EnvironmentID, or when no other node does (Local then says why it
// cannot); otherwise on the first other node serving it.
func (x *Hands) Call(ctx context.Context, c baton.ExecutorCall) (baton.ExecutorResult, error) {
	p, ok := x.remote(c.EnvironmentID, c.Name)
	if !ok || x.servesLocally(c.EnvironmentID, c.Name) {
		return x.opts.Local.Call(ctx, c)
	}
	return x.callRemote(ctx, p, c)
}

// remote returns the other node serving name in env, by the snapshot.
func (x *Hands) remote(env, name string) (peer, bool) {
	s := x.snap.Load()
	if s == nil {
		return peer{}, false
	}
	e := s.envs[env]
	if e == nil {
		return peer{}, false
	}
	p, ok := e.by[name]
	return p, ok
}

func (x *Hands) servesLocally(env, name string) bool {
	for _, t := range x.opts.Local.Tools([]string{env}) {
		if t.Name == name {
			return true
		}
	}
	return false
}

// callRemote sends c to node p and relays its progress and outcome. The
// call is bounded by its timeout plus callGrace, and fails when p stops
// heartbeating (Refresh) or its stream breaks: either way p failed, and
// the call may or may not have run; it is not sent again.
func (x *Hands) callRemote(ctx context.Context, p peer, c baton.ExecutorCall) (baton.ExecutorResult, error) {
	if !x.remember(c.SessionID, p) {
		return baton.ExecutorResult{}, baton.Errorf(baton.ECodeUnavailable, "the server is shutting down; executor tools are unavailable")
	}
	body, err := baton.EncodeJSON(newCallRequest(c)) // the input as it is: no HTML escaping
	if err != nil {
		return baton.ExecutorResult{}, fmt.Errorf("encode executor call: %w", err)
	}
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer x.calls.add(p.id, cancel)()
	if c.Timeout > 0 {
		var stop context.CancelFunc
		cctx, stop = context.WithTimeout(cctx, c.Timeout+callGrace)
		defer stop()
	}
	req, err := http.NewRequestWithContext(cctx, http.MethodPost, p.url+callPath, bytes.NewReader(body))
	if err != nil {
		return baton.ExecutorResult{}, err
	}
	x.authorize(req)
	req.Header.Set("Content-Type", "application/json")
	resp, err := x.rt.RoundTrip(req)
	if err != nil {
		return baton.ExecutorResult{}, x.failed(ctx, cctx, p, c, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
		x.log.Warn("executor call refused by its node", "node_id", x.opts.ID, "target", p.id, "status", resp.StatusCode, "body", string(b))
		return baton.ExecutorResult{}, baton.Errorf(baton.ECodeUnavailable,
			"the node %s, where the executor serving tool '%s' is connected, refused the call", p.id, c.Name)
	}
	dec := json.NewDecoder(resp.Body)
	for {
		var f callFrame
		if err := dec.Decode(&f); err != nil {
			return baton.ExecutorResult{}, x.failed(ctx, cctx, p, c, err)
		}
		switch {
		case f.Result != nil:
			return baton.ExecutorResult{ExecutorID: f.Result.ExecutorID, Content: f.Result.Content, IsError: f.Result.IsError}, nil
		case f.Error != nil:
			return baton.ExecutorResult{ExecutorID: f.Error.ExecutorID}, &baton.Error{Code: f.Error.Code, Message: f.Error.Message}
		case f.Progress != nil && c.OnProgress != nil:
			c.OnProgress(*f.Progress)
		}
	}
}

// failed explains a remote call that got no outcome: the caller gave up
// (ctx), or the node serving it failed (cctx's cause says how).
func (x *Hands) failed(ctx, cctx context.Context, p peer, c baton.ExecutorCall, err error) error {
	if ctx.Err() != nil {
		return baton.Errorf(baton.ECodeUnavailable, "the call to tool '%s' was cancelled", c.Name)
	}
	if cause := context.Cause(cctx); cause != nil {
		err = cause
	}
	x.log.Warn("executor call: its node failed", "node_id", x.opts.ID, "target", p.id,
		"session_id", c.SessionID, "tool", c.Name, "tool_call_id", c.ToolCallID, "err", err)
	return baton.Errorf(baton.ECodeUnavailable,
		"the node %s, where the executor serving tool '%s' is connected, failed during the call; the tool may or may not have run", p.id, c.Name)
}

// remember notes that a call of sessionID goes to p, so that Release
// reaches p. It reports false once Hands is closed.
func (x *Hands) remember(sessionID string, p peer) bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return false
	}
	m := x.served[sessionID]
	if m == nil {
		m = map[string]string{}
		x.served[sessionID] = m
	}
	m[p.id] = p.url
	return true
}

// Release ends the session's bindings here and, in the background, on
// every other node its calls went to.
func (x *Hands) Release(sessionID string) {
	x.opts.Local.Release(sessionID)
	x.mu.Lock()
	defer x.mu.Unlock()
	nodes := x.served[sessionID]
	delete(x.served, sessionID)
	if x.closed {
		return
	}
	for id, url := range nodes {
		x.wg.Add(1)
		go func() {
			defer x.wg.Done()
			x.release(peer{id: id, url: url}, sessionID)
		}()
	}
}

// release asks node p to release the session's bindings there.
func (x *Hands) release(p peer, sessionID string) {
	ctx, cancel := context.WithTimeout(x.ctx, releaseTimeout)
	defer cancel()
	body, _ := json.Marshal(releaseRequest{SessionID: sessionID}) // a string: cannot fail
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url+releasePath, bytes.NewReader(body))
	if err != nil {
		x.log.Warn("executor release", "node_id", x.opts.ID, "target", p.id, "session_id", sessionID, "err", err)
		return
	}
	x.authorize(req)
	req.Header.Set("Content-Type", "application/json")
	resp, err := x.rt.RoundTrip(req)
	if err != nil {
		if x.ctx.Err() == nil {
			x.log.Warn("executor release", "node_id", x.opts.ID, "target", p.id, "session_id", sessionID, "err", err)
		}
		return
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		x.log.Warn("executor release refused", "node_id", x.opts.ID, "target", p.id, "session_id", sessionID, "status", resp.StatusCode)
	}
}

// authorize sets the cluster secret on a request to another node.
func (x *Hands) authorize(req *http.Request) {
	req.Header.Set("Authorization", "Bearer "+x.opts.Secret)
	req.Header.Set(HeaderForwardedBy, x.opts.ID)
}
