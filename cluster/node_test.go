package cluster

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"go.uber.org/goleak"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/pgtest"
	"github.com/baton-engine/baton/store"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// testCluster is nodes sharing one fresh PostgreSQL schema: each a real
// store.DB in cluster mode, a Node over it, and a real HTTP server on
// loopback whose handler is the node's Forward middleware.
type testCluster struct {
	url    string
	sql    *sql.DB      // the schema, for what only a test does (expiring leases)
	client *http.Client // the clients' side, talking to any node
}

func newTestCluster(t *testing.T) *testCluster {
	t.Helper()
	c := &testCluster{url: pgtest.Schema(t)} // dropped last: after every node and connection is gone
	// Migrate once, before the nodes open the schema.
	db, err := store.Open(context.Background(), store.Options{URL: c.url})
	if err != nil {
		t.Fatalf("open %s: %v", c.url, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if c.sql, err = sql.Open("pgx", c.url); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.sql.Close() })
	tr := &http.Transport{Proxy: nil}
	c.client = &http.Client{Transport: tr}
	t.Cleanup(tr.CloseIdleConnections)
	return c
}

// testNode is one node of a testCluster.
type testNode struct {
	id  string
	db  *store.DB
	n   *Node
	eng *fakeEngine
	srv *httptest.Server
	// served counts the requests its inner handler served.
	served atomic.Int64
}

// nodeSpec varies a test node; the zero value is the usual one.
type nodeSpec struct {
	// ttl is the node's lease TTL: a minute when 0, so that its loop
	// never ticks during a test, which drives renew, sweep and route
	// itself.
	ttl time.Duration
	// storeTTL is the lease CreateSession takes on the node's store: a
	// minute when 0.
	storeTTL time.Duration
	// inner serves the requests routed to the node: echo when nil.
	inner http.Handler
	// store, when set, wraps the node's view of its store.
	store func(Store) Store
}

// start opens node id: its store, its server on loopback :0, and the
// node itself, registered with the server's URL.
func (c *testCluster) start(t *testing.T, id string, spec nodeSpec) *testNode {
	t.Helper()
	if spec.ttl == 0 {
		spec.ttl = time.Minute
	}
	if spec.storeTTL == 0 {
		spec.storeTTL = time.Minute
	}
	if spec.inner == nil {
		spec.inner = echo(id)
	}
	db, err := store.Open(context.Background(), store.Options{URL: c.url, NodeID: id, LeaseTTL: spec.storeTTL})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close store of %s: %v", id, err)
		}
	})
	tn := &testNode{id: id, db: db, eng: &fakeEngine{}}
	var st Store = db
	if spec.store != nil {
		st = spec.store(db)
	}
	tn.n = New(Options{Store: st, Engine: tn.eng, ID: id, Version: "test", LeaseTTL: spec.ttl})
	inner := spec.inner
	tn.srv = httptest.NewServer(tn.n.Forward(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tn.served.Add(1)
		inner.ServeHTTP(w, r)
	})))
	t.Cleanup(tn.srv.Close)
	tn.n.SetAdvertiseURL(tn.srv.URL)
	if err := tn.n.Open(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // first: before its server and store go
		if err := tn.n.Close(); err != nil {
			t.Errorf("close node %s: %v", id, err)
		}
		tn.n.rt.(*http.Transport).CloseIdleConnections()
	})
	return tn
}

// kill stops tn as kill -9 would: its loop stops renewing and its
// server goes away, and nothing is released or removed.
func (tn *testNode) kill() {
	tn.n.cancel()
	<-tn.n.done
	tn.srv.Close()
}

// openSession creates an open session on tn's store, which gives tn its
// lease at epoch 1.
func (tn *testNode) openSession(t *testing.T) string {
	t.Helper()
	s := &baton.Session{ClientKeyID: "key_c", ProfileID: "pro_c"}
	if err := tn.db.CreateSession(t.Context(), s, nil, baton.NewEvent("", "", baton.EventSessionOpen, map[string]string{"k": "v"})); err != nil {
		t.Fatal(err)
	}
	return s.ID
}

// expire moves a session's lease into the past by the database's clock,
// as if its holder had stopped renewing it.
func (c *testCluster) expire(t *testing.T, sessionID string) {
	t.Helper()
	res, err := c.sql.Exec(`UPDATE session_leases SET expires_at = now() - interval '1 second' WHERE session_id = $1`, sessionID)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("expire %s: %d lease rows", sessionID, n)
	}
}

// holder is the session's lease as the store has it.
func (tn *testNode) holder(t *testing.T, sessionID string) baton.Lease {
	t.Helper()
	l, err := tn.db.LeaseHolder(t.Context(), sessionID)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// wantHolder fails t unless the session's lease is node's, live, at epoch.
func wantHolder(t *testing.T, via *testNode, sessionID, node string, epoch int64) {
	t.Helper()
	l := via.holder(t, sessionID)
	if l.NodeID != node || l.Epoch != epoch || !l.Live {
		t.Errorf("lease of %s = node %s epoch %d live %v, want node %s epoch %d live", sessionID, l.NodeID, l.Epoch, l.Live, node, epoch)
	}
}

// served is what the echo handler saw of a request.
type served struct {
	Node         string
	Method       string
	Path         string
	Query        string
	Auth         string
	Body         string
	ForwardedBy  string
	ForwardedFor string
}

// echo answers 201 with what it saw of the request, and names the node
// that served it in X-Served-By.
func echo(id string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, "read body: "+err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("X-Served-By", id)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(served{
			Node: id, Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery,
			Auth: r.Header.Get("Authorization"), Body: string(body),
			ForwardedBy: r.Header.Get(HeaderForwardedBy), ForwardedFor: r.Header.Get("X-Forwarded-For"),
		})
	})
}

// requestTimeout bounds a test request, so that a request the cluster
// never answers fails the test instead of hanging it.
const requestTimeout = 20 * time.Second

// send makes a request to node to and returns the response, its body
// read, and what the echo handler that served it saw.
func (c *testCluster) send(t *testing.T, to *testNode, method, path string, body io.Reader) (*http.Response, served, []byte) {
	t.Helper()
	resp, s, b, err := c.do(t.Context(), to, method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, s, b
}

// do is send for any goroutine.
func (c *testCluster) do(ctx context.Context, to *testNode, method, path string, body io.Reader) (*http.Response, served, []byte, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, to.srv.URL+path, body)
	if err != nil {
		return nil, served{}, nil, err
	}
	req.Header.Set("Authorization", "Bearer bk_test")
	resp, err := c.client.Do(req)
	if err != nil {
		return nil, served{}, nil, fmt.Errorf("%s %s to %s: %w", method, path, to.id, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, served{}, nil, fmt.Errorf("%s %s to %s: read answer: %w", method, path, to.id, err)
	}
	var s served
	if resp.Header.Get("X-Served-By") != "" {
		if err := json.Unmarshal(b, &s); err != nil {
			return nil, served{}, nil, fmt.Errorf("%s %s to %s: echo answer %q: %w", method, path, to.id, b, err)
		}
	}
	return resp, s, b, nil
}

// rpc posts a JSON-RPC call about sessionID to node to and returns who
// served it, failing t unless the echo handler did.
func (c *testCluster) rpc(t *testing.T, to *testNode, sessionID string) served {
	t.Helper()
	resp, s, b := c.send(t, to, http.MethodPost, "/api/v1/sessions/"+sessionID+"/rpc", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"x"}`))
	if resp.StatusCode != http.StatusCreated || s.Node == "" {
		t.Fatalf("rpc to %s: %d %s", to.id, resp.StatusCode, b)
	}
	return s
}

// fakeEngine records what the node tells the engine.
type fakeEngine struct {
	mu      sync.Mutex
	adopted []string
	evicted []string
	revoked []string
	busy    map[string]bool
}

func (e *fakeEngine) Busy(sessionID string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.busy[sessionID]
}

func (e *fakeEngine) CloseRevoked(_ context.Context, sessionID string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.revoked = append(e.revoked, sessionID)
	return nil
}

func (e *fakeEngine) Adopt(_ context.Context, sessionID string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.adopted = append(e.adopted, sessionID)
	return nil
}

func (e *fakeEngine) Evict(sessionID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.evicted = append(e.evicted, sessionID)
}

func (e *fakeEngine) calls() (adopted, evicted []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.adopted), slices.Clone(e.evicted)
}

// wantEngine fails t unless the engine was told exactly these.
func wantEngine(t *testing.T, tn *testNode, adopted, evicted []string) {
	t.Helper()
	a, e := tn.eng.calls()
	if diff := cmp.Diff(adopted, a, cmpEmpty); diff != "" {
		t.Errorf("%s's engine adopted (-want +got):\n%s", tn.id, diff)
	}
	if diff := cmp.Diff(evicted, e, cmpEmpty); diff != "" {
		t.Errorf("%s's engine evicted (-want +got):\n%s", tn.id, diff)
	}
}

// cmpEmpty equates nil and empty slices.
var cmpEmpty = cmp.Comparer(func(a, b []string) bool { return slices.Equal(a, b) })

// TestTakeover: the owner dies (its loop stops, its server goes, its
// lease lapses). A node that had forwarded to it finds it unreachable,
// reads the lease again, takes the session over, tells its engine once,
// and serves the request itself, at epoch 2.
func TestTakeover(t *testing.T) {
	c := newTestCluster(t)
	a, b := c.start(t, "a", nodeSpec{}), c.start(t, "b", nodeSpec{})
	sid := a.openSession(t)
	if s := c.rpc(t, b, sid); s.Node != "a" { // b now remembers a as the owner
		t.Fatalf("before the crash, served by %s, want a", s.Node)
	}

	a.kill()
	c.expire(t, sid)
	s := c.rpc(t, b, sid)
	if s.Node != "b" || s.ForwardedBy != "" {
		t.Errorf("after the crash, served by %s (forwarded by %q), want b itself", s.Node, s.ForwardedBy)
	}
	wantEngine(t, b, []string{sid}, nil)
	wantEngine(t, a, nil, nil)
	wantHolder(t, b, sid, "b", 2)
	if got := b.n.Owned(); got != 1 {
		t.Errorf("b owns %d sessions, want 1", got)
	}
	// Owning it now, b neither adopts it again nor asks the database.
	if s := c.rpc(t, b, sid); s.Node != "b" {
		t.Errorf("next request served by %s, want b", s.Node)
	}
	wantEngine(t, b, []string{sid}, nil)
	// The store fences b in at the new epoch.
	if err := b.db.Append(t.Context(), baton.NewEvent(sid, "", "b.first", map[string]string{})); err != nil {
		t.Errorf("b appending to the session it took over: %v", err)
	}
}

// TestTakeoverWaitsForLapse: while a dead owner's lease is still live,
// a request waits (the node retries, backing off) instead of failing or
// taking the session over early; once the lease lapses, by the
// database's clock, the node serves it. Time-driven: the owner's lease
// is one second long.
func TestTakeoverWaitsForLapse(t *testing.T) {
	c := newTestCluster(t)
	a := c.start(t, "a", nodeSpec{storeTTL: time.Second})
	b := c.start(t, "b", nodeSpec{ttl: 3 * time.Second}) // waits up to 2×3s+1s
	sid := a.openSession(t)
	a.kill()
	if l := b.holder(t, sid); !l.Live {
		t.Fatalf("a's one-second lease lapsed before the request: %+v", l)
	}
	s := c.rpc(t, b, sid)
	if s.Node != "b" {
		t.Errorf("served by %s, want b", s.Node)
	}
	wantEngine(t, b, []string{sid}, nil)
	wantHolder(t, b, sid, "b", 2)
}

// TestLostLease: a owns a session; while a is cut off, its lease lapses
// and b takes it over. a's next renewal finds it gone: the engine evicts
// it and the store no longer fences a in, and a forwards the next request
// about it to b.
func TestLostLease(t *testing.T) {
	c := newTestCluster(t)
	a, b := c.start(t, "a", nodeSpec{}), c.start(t, "b", nodeSpec{})
	sid, kept := a.openSession(t), a.openSession(t)
	ctx := t.Context()
	if err := a.n.renew(ctx); err != nil { // a learns of the sessions opened here
		t.Fatal(err)
	}
	if got := a.n.Owned(); got != 2 {
		t.Fatalf("a owns %d sessions after renewing, want 2", got)
	}
	wantEngine(t, a, nil, nil) // sessions opened here are not adopted

	c.expire(t, sid)
	if url, err := b.n.route(ctx, sid, false); err != nil || url != "" {
		t.Fatalf("b taking over: url %q err %v, want it served by b", url, err)
	}
	wantEngine(t, b, []string{sid}, nil)
	wantHolder(t, b, sid, "b", 2)

	if err := a.n.renew(ctx); err != nil {
		t.Fatal(err)
	}
	wantEngine(t, a, nil, []string{sid})
	if got := a.n.Owned(); got != 1 {
		t.Errorf("a owns %d sessions after losing one, want 1", got)
	}
	wantHolder(t, a, kept, "a", 1) // the other one was renewed
	if err := a.db.Append(ctx, baton.NewEvent(kept, "", "a.kept", map[string]string{})); err != nil {
		t.Errorf("a appending to the session it kept: %v", err)
	}

	s := c.rpc(t, a, sid)
	if s.Node != "b" || s.ForwardedBy != "a" {
		t.Errorf("request to a served by %s (forwarded by %q), want b via a", s.Node, s.ForwardedBy)
	}
	if n := a.served.Load(); n != 0 {
		t.Errorf("a's handler served %d requests, want none", n)
	}
	// A second renewal reports nothing new.
	if err := a.n.renew(ctx); err != nil {
		t.Fatal(err)
	}
	wantEngine(t, a, nil, []string{sid})
}

// TestRenewKeepsFreshTakeover: a lease acquired while a renewal was
// under way is missing from that renewal's answer; it is not counted as
// lost.
func TestRenewKeepsFreshTakeover(t *testing.T) {
	c := newTestCluster(t)
	var then func()
	a := c.start(t, "a", nodeSpec{store: func(s Store) Store {
		return &renewThen{Store: s, then: func() { then() }}
	}})
	sid := a.openSession(t)
	c.expire(t, sid) // not renewed: the renewal's answer lacks it
	then = func() {
		// A request takes the session over after the renewal's
		// statement ran and before the renewal looks at its answer.
		if url, err := a.n.route(t.Context(), sid, false); err != nil || url != "" {
			t.Errorf("a taking over: url %q err %v", url, err)
		}
	}
	if err := a.n.renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	wantEngine(t, a, []string{sid}, nil)
	if got := a.n.Owned(); got != 1 {
		t.Errorf("a owns %d sessions, want 1: the renewal dropped the lease acquired during it", got)
	}
	wantHolder(t, a, sid, "a", 2)
}

// renewThen runs then after RenewLeases' statement, before the node
// sees its answer.
type renewThen struct {
	Store
	then func()
}

func (s *renewThen) RenewLeases(ctx context.Context, nodeID string, ttl time.Duration) ([]baton.Lease, error) {
	ls, err := s.Store.RenewLeases(ctx, nodeID, ttl)
	s.then()
	return ls, err
}

// TestCloseHandsOver: Close removes the node and expires its leases, so
// another node's next sweep takes its sessions over at once; the closed
// node's store no longer appends to them, and a request still reaching it
// goes to the new owner.
func TestCloseHandsOver(t *testing.T) {
	c := newTestCluster(t)
	a, b := c.start(t, "a", nodeSpec{}), c.start(t, "b", nodeSpec{})
	sid := a.openSession(t)
	ctx := t.Context()
	if err := a.n.renew(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.n.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	wantEngine(t, b, nil, nil) // a's lease is live: nothing to take over

	if err := a.n.Close(); err != nil {
		t.Fatal(err)
	}
	if got := a.n.Owned(); got != 0 {
		t.Errorf("a owns %d sessions after Close", got)
	}
	if l := b.holder(t, sid); l.Live || l.NodeID != "a" || l.Epoch != 1 {
		t.Errorf("lease after a's Close = %+v, want a's, epoch 1, expired", l)
	}
	// The lease row still names a at epoch 1, so only Disown keeps a's
	// store from appending.
	if err := a.db.Append(ctx, baton.NewEvent(sid, "", "a.late", map[string]string{})); baton.ErrorCode(err) != baton.ECodeLeaseLost {
		t.Errorf("a appending after Close: %v, want %s", err, baton.ECodeLeaseLost)
	}
	nodes, err := b.db.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(nodes) != 1 || nodes[0].ID != "b" {
		t.Errorf("registry after a's Close: %v, want just b", nodeIDs(nodes))
	}

	if err := b.n.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	wantEngine(t, b, []string{sid}, nil)
	wantHolder(t, b, sid, "b", 2)
	if s := c.rpc(t, a, sid); s.Node != "b" {
		t.Errorf("request to the closed node served by %s, want b", s.Node)
	}
	if err := a.n.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

func nodeIDs(nodes []*baton.Node) []string {
	var ids []string
	for _, n := range nodes {
		ids = append(ids, n.ID)
	}
	return ids
}

// TestDrain: a draining node takes over no orphan, from its sweep or a
// request, and shows as draining; it still forwards to live owners. A
// node that is not draining takes the orphan.
func TestDrain(t *testing.T) {
	c := newTestCluster(t)
	a, b, d := c.start(t, "a", nodeSpec{}), c.start(t, "b", nodeSpec{}), c.start(t, "d", nodeSpec{})
	orphan, live := a.openSession(t), d.openSession(t)
	ctx := t.Context()
	a.kill()
	c.expire(t, orphan)

	if err := b.n.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.n.sweep(ctx); err != nil {
		t.Errorf("draining sweep: %v", err)
	}
	if _, err := b.n.route(ctx, orphan, false); baton.ErrorCode(err) != baton.ECodeUnavailable {
		t.Errorf("draining node routing an orphan: %v, want %s", err, baton.ECodeUnavailable)
	}
	wantEngine(t, b, nil, nil)
	if l := b.holder(t, orphan); l.NodeID != "a" || l.Epoch != 1 || l.Live {
		t.Errorf("orphan's lease after the draining node's sweep = %+v, want a's lapsed one", l)
	}
	nodes, err := b.db.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		if n.Draining != (n.ID == "b") {
			t.Errorf("node %s draining = %v", n.ID, n.Draining)
		}
	}
	if s := c.rpc(t, b, live); s.Node != "d" || s.ForwardedBy != "b" {
		t.Errorf("draining node's request served by %s (forwarded by %q), want d via b", s.Node, s.ForwardedBy)
	}

	if err := d.n.sweep(ctx); err != nil {
		t.Fatal(err)
	}
	wantEngine(t, d, []string{orphan}, nil)
	wantHolder(t, d, orphan, "d", 2)
	if s := c.rpc(t, b, orphan); s.Node != "d" {
		t.Errorf("draining node's request for the adopted orphan served by %s, want d", s.Node)
	}
}

// TestHeartbeatRegistersAgain: a node removed from the registry (taken
// for dead) registers again, with its URL, at its next heartbeat.
func TestHeartbeatRegistersAgain(t *testing.T) {
	c := newTestCluster(t)
	a, b := c.start(t, "a", nodeSpec{}), c.start(t, "b", nodeSpec{})
	ctx := t.Context()
	if err := b.db.RemoveNode(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := a.n.heartbeat(ctx); err != nil {
		t.Fatal(err)
	}
	nodes, err := b.db.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.ID+"="+n.AdvertiseURL)
	}
	slices.Sort(urls)
	if diff := cmp.Diff([]string{"a=" + a.srv.URL, "b=" + b.srv.URL}, urls); diff != "" {
		t.Errorf("registry (-want +got):\n%s", diff)
	}
}

// TestPrune: a node whose heartbeat stopped long ago is removed from the
// registry; a recent one is kept, and so is the pruning node.
func TestPrune(t *testing.T) {
	c := newTestCluster(t)
	a, b := c.start(t, "a", nodeSpec{}), c.start(t, "b", nodeSpec{})
	c.start(t, "d", nodeSpec{})
	old := a.n.deadAfter() + time.Minute
	if _, err := c.sql.Exec(`UPDATE nodes SET heartbeat_at = now() - $1::bigint * interval '1 second' WHERE id IN ('a', 'b')`, int64(old.Seconds())); err != nil {
		t.Fatal(err)
	}
	if err := b.n.prune(t.Context()); err != nil { // b is stale too, but prunes itself never
		t.Fatal(err)
	}
	nodes, err := b.db.Nodes(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"b", "d"}, nodeIDs(nodes)); diff != "" {
		t.Errorf("registry after pruning (-want +got):\n%s", diff)
	}
}

// TestDrainHandsOverIdleSessions: draining releases at once the leases of
// the sessions with no work in hand (disowned and evicted here, taken
// over by the next node that needs them, at a new epoch); a busy session
// stays until Close.
func TestDrainHandsOverIdleSessions(t *testing.T) {
	c := newTestCluster(t)
	a, b := c.start(t, "a", nodeSpec{}), c.start(t, "b", nodeSpec{})
	idle, busy := a.openSession(t), a.openSession(t)
	ctx := t.Context()
	if err := a.n.renew(ctx); err != nil { // a knows what it opened
		t.Fatal(err)
	}
	a.eng.mu.Lock()
	a.eng.busy = map[string]bool{busy: true}
	a.eng.mu.Unlock()
	if err := a.n.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	wantEngine(t, a, nil, []string{idle})
	if l := a.holder(t, idle); l.NodeID != "a" || l.Live {
		t.Errorf("idle session's lease after the drain = %+v, want a's, released", l)
	}
	if l := a.holder(t, busy); l.NodeID != "a" || !l.Live {
		t.Errorf("busy session's lease after the drain = %+v, want a's, live", l)
	}
	if s := c.rpc(t, b, idle); s.Node != "b" {
		t.Errorf("request for the handed-over session served by %s, want b (taking it over)", s.Node)
	}
	wantHolder(t, b, idle, "b", 2)
	if s := c.rpc(t, b, busy); s.Node != "a" {
		t.Errorf("request for the busy session served by %s, want a (still its owner)", s.Node)
	}
}
