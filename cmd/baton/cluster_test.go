package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/client"
	"github.com/baton-engine/baton/internal/testkit"
	"github.com/baton-engine/baton/store"
)

// The cluster tests run several real `baton serve` processes on one
// throwaway PostgreSQL schema (docs/cluster.md) and drive them through the
// Go SDK, whose requests a round-robin transport spreads over the nodes.

// clusterLeaseTTL is short, so that takeovers after a kill happen within
// the test's patience; it is not a timing assertion.
const clusterLeaseTTL = "1s"

type testCluster struct {
	t        *testing.T
	env      map[string]string
	nodes    []*child
	adminKey string
	key      string // client key of a scripted profile that allows get_time
	keyID    string // its id
}

// startCluster starts n nodes sharing one fresh PostgreSQL schema, or
// skips without PostgreSQL.
func startCluster(t *testing.T, n int) *testCluster {
	t.Helper()
	return startClusterWith(t, n, "", "script")
}

// startClusterWith is startCluster with extra config-file text and the
// test profile's primary provider.
func startClusterWith(t *testing.T, n int, extraConfig, provider string) *testCluster {
	t.Helper()
	if testing.Short() {
		t.Skip("cluster tests start real processes")
	}
	dsn := postgresSchema(t)
	_, env := prepare(t, testkit.Config{ConfigFile: testConfig + extraConfig, Log: "info", Env: map[string]string{
		"BATON_DATABASE_URL": dsn, "BATON_LEASE_TTL": clusterLeaseTTL,
	}})
	c := &testCluster{t: t, env: env}
	for range n {
		c.nodes = append(c.nodes, startChild(t, env)) // the first one writes the admin key
	}
	b, err := os.ReadFile(env["BAE_ADMIN_KEY_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	c.adminKey = strings.TrimSpace(string(b))
	r := call(t, "POST", c.nodes[n-1].adminURL+"/admin/v1/profiles", c.adminKey,
		map[string]any{"name": "tools", "primary_provider": provider, "allowed_tools": []string{"get_time"}})
	mustStatus(t, r, 201)
	r = call(t, "POST", c.nodes[0].adminURL+"/admin/v1/keys", c.adminKey, map[string]any{"name": "k", "profile_id": r.json(t)["id"]})
	mustStatus(t, r, 201)
	c.key, c.keyID = r.json(t)["key"].(string), r.json(t)["id"].(string)
	return c
}

// clientURLs returns the client URLs of the given nodes (all by default).
func (c *testCluster) clientURLs(nodes ...*child) []string {
	if nodes == nil {
		nodes = c.nodes
	}
	var out []string
	for _, n := range nodes {
		out = append(out, n.clientURL)
	}
	return out
}

// owners returns, by node advertise URL, how many sessions each node owns,
// as the admin API of node i reports it.
func (c *testCluster) owners(i int) map[string]int {
	c.t.Helper()
	r := call(c.t, "GET", c.nodes[i].adminURL+"/admin/v1/nodes", c.adminKey, nil)
	mustStatus(c.t, r, 200)
	var body struct {
		Cluster bool
		Nodes   []struct {
			AdvertiseURL string `json:"advertise_url"`
			Sessions     int
		}
	}
	if err := json.Unmarshal(r.body, &body); err != nil || !body.Cluster {
		c.t.Fatalf("nodes: %s (%v)", r.body, err)
	}
	out := map[string]int{}
	for _, n := range body.Nodes {
		out[n.AdvertiseURL] = n.Sessions
	}
	return out
}

// roundRobin sends each request to the next of its hosts in turn. Like
// a load balancer it can take a host out and wait until the requests it
// sent there are answered (drain), before the host is stopped.
type roundRobin struct {
	tr *http.Transport

	mu       sync.Mutex
	hosts    []string
	next     int
	inflight map[string]int
	idle     *sync.Cond // signalled when a request ends
}

func newRoundRobin(t *testing.T, urls []string) *roundRobin {
	rr := &roundRobin{tr: http.DefaultTransport.(*http.Transport).Clone(), inflight: map[string]int{}}
	rr.idle = sync.NewCond(&rr.mu)
	rr.tr.MaxIdleConnsPerHost = 64
	rr.point(urls)
	t.Cleanup(rr.tr.CloseIdleConnections)
	return rr
}

// point replaces the hosts.
func (rr *roundRobin) point(urls []string) {
	rr.mu.Lock()
	defer rr.mu.Unlock()
	rr.hosts = rr.hosts[:0]
	for _, u := range urls {
		rr.hosts = append(rr.hosts, strings.TrimPrefix(u, "http://"))
	}
}

func (rr *roundRobin) RoundTrip(req *http.Request) (*http.Response, error) {
	rr.mu.Lock()
	host := rr.hosts[rr.next%len(rr.hosts)]
	rr.next++
	rr.inflight[host]++
	rr.mu.Unlock()
	r := req.Clone(req.Context())
	r.URL.Host, r.Host = host, ""
	resp, err := rr.tr.RoundTrip(r)
	if err != nil {
		rr.done(host)
		return nil, err
	}
	resp.Body = &endBody{ReadCloser: resp.Body, end: func() { rr.done(host) }}
	return resp, nil
}

func (rr *roundRobin) done(host string) {
	rr.mu.Lock()
	rr.inflight[host]--
	rr.mu.Unlock()
	rr.idle.Broadcast()
}

// drain waits until every request sent to base has been answered, and
// closes the idle connections, so that stopping it cuts no request.
func (rr *roundRobin) drain(base string) {
	host := strings.TrimPrefix(base, "http://")
	rr.mu.Lock()
	for rr.inflight[host] > 0 {
		rr.idle.Wait()
	}
	rr.mu.Unlock()
	rr.tr.CloseIdleConnections()
}

// endBody calls end once, when the body is closed.
type endBody struct {
	io.ReadCloser
	once sync.Once
	end  func()
}

func (b *endBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.end)
	return err
}

// harness is an SDK harness over rr whose get_time tool calls fn.
func (c *testCluster) harness(rr *roundRobin, fn func() string) *client.Harness {
	h := client.NewHarness(client.Config{BaseURL: "http://baton.test", ClientKey: c.key, HTTPClient: &http.Client{Transport: rr}})
	h.RegisterTool(client.ToolDef{Name: "get_time", Description: "time"}, func(context.Context, json.RawMessage) (any, error) {
		return fn(), nil
	})
	return h
}

// TestClusterAnyNodeServesAnyRequest: with every request of the SDK sent
// to the next of three nodes, a session opens, subscribes, makes client
// tool round trips and serves a registered client as on one node; exactly
// one node owns it, every node reads the same log, and the subscription
// saw that log in order without a gap or duplicate.
func TestClusterAnyNodeServesAnyRequest(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := loopCtx(t)
	rr := newRoundRobin(t, c.clientURLs())
	sess, err := c.harness(rr, func() string { return "12:00" }).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := sess.Subscribe(ctx, client.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()

	const rounds = 4
	for i := range rounds {
		r, err := sess.Send(ctx, "call get_time {}")
		mustReply(t, sent{r, err}, "get_time returned: 12:00")
		if i == 0 {
			drivers, err := sess.Participants(ctx)
			if err != nil || len(drivers) != 1 {
				t.Fatalf("participants %v, %v; want the one driver on every node", drivers, err)
			}
		}
	}
	laptop, err := client.RegisterClient(ctx, client.Config{BaseURL: "http://baton.test", HTTPClient: &http.Client{Transport: rr}},
		sess.ID, sess.Key, "laptop", client.Never(), laptopTool("L", nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	r, err := sess.Send(ctx, `call client__laptop__read_file {"path":"x"}`)
	mustReply(t, sent{r, err}, "client__laptop__read_file returned: L:x")
	if err := laptop.Close(ctx); err != nil {
		t.Fatal(err)
	}

	owned := 0
	for i := range c.nodes {
		for _, n := range c.owners(i) {
			owned += n
		}
	}
	if owned != len(c.nodes) { // each node's view counts the one owner once
		t.Errorf("sessions owned across %d views: %d, want one owner seen by each", len(c.nodes), owned)
	}
	// The session list names the owner (a node id the node list knows).
	lr := call(t, "GET", c.nodes[2].adminURL+"/admin/v1/sessions?state=open", c.adminKey, nil)
	mustStatus(t, lr, 200)
	var list struct {
		Items []struct {
			ID    string `json:"id"`
			Owner string `json:"owner_node_id"`
		}
	}
	if err := json.Unmarshal(lr.body, &list); err != nil || len(list.Items) != 1 || list.Items[0].ID != sess.ID ||
		!strings.Contains(string(call(t, "GET", c.nodes[0].adminURL+"/admin/v1/nodes", c.adminKey, nil).body), `"id":"`+list.Items[0].Owner+`"`) {
		t.Errorf("open sessions %s (%v): want this session with its owner's node id", lr.body, err)
	}

	var logs [][]client.Event
	for _, n := range c.nodes {
		logs = append(logs, adminEvents(t, n.adminURL, c.adminKey, sess.ID))
	}
	for i := 1; i < len(logs); i++ {
		if fmt.Sprint(eventIDs(logs[i])) != fmt.Sprint(eventIDs(logs[0])) {
			t.Fatalf("node %d reads a different log than node 0", i)
		}
	}
	log := logs[0]
	var seen []client.Event
	for len(seen) == 0 || seen[len(seen)-1].ID != log[len(log)-1].ID {
		ev, err := sub.Next(ctx)
		if err != nil || len(seen) == len(log) {
			t.Fatalf("subscription after %d events (the log has %d): %v", len(seen), len(log), err)
		}
		seen = append(seen, ev)
	}
	// The subscription saw everything after it started, once each, in
	// order: the whole log after the events of the open.
	if got, want := eventIDs(seen), eventIDs(log[len(log)-len(seen):]); fmt.Sprint(got) != fmt.Sprint(want) || len(seen) < len(log)-3 {
		t.Errorf("subscription saw\n %v\nthe log has\n %v", got, want)
	}
}

// TestClusterPausedTurnSurvivesOwnerKill: the owner of a session is killed
// with SIGKILL while its turn is paused on a client tool; the results,
// sent to the other nodes, resume the turn there once the lease lapses,
// with exactly one tool result in the log.
func TestClusterPausedTurnSurvivesOwnerKill(t *testing.T) {
	t.Parallel()
	testClusterOwnerStops(t, func(owner *child) { owner.kill() })
}

// TestClusterPausedTurnSurvivesOwnerSIGTERM: the same with a graceful
// stop, which hands the session over without waiting for the lease.
func TestClusterPausedTurnSurvivesOwnerSIGTERM(t *testing.T) {
	t.Parallel()
	testClusterOwnerStops(t, func(owner *child) {
		if err := owner.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := owner.cmd.Wait(); err != nil {
			t.Errorf("the owner did not exit cleanly on SIGTERM: %v", err)
		}
	})
}

func testClusterOwnerStops(t *testing.T, stop func(owner *child)) {
	c := startCluster(t, 3)
	ctx := loopCtx(t)
	rr := newRoundRobin(t, c.clientURLs(c.nodes[0])) // opened on node 0, which owns it
	paused, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := c.harness(rr, func() string {
		once.Do(func() { close(paused) })
		<-resume
		return "12:00"
	})
	sess, err := h.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := c.owners(1)[c.nodes[0].clientURL]; got != 1 {
		t.Fatalf("node 0 owns %d sessions, want the one it opened", got)
	}
	ch := goSend(ctx, sess, "call get_time {}")
	select {
	case <-paused:
	case out := <-ch:
		t.Fatalf("Send returned before the tool ran: %v", out.err)
	}
	stop(c.nodes[0])
	rr.point(c.clientURLs(c.nodes[1:]...))
	close(resume)

	mustReply(t, recv(t, ch), "get_time returned: 12:00")
	log := adminEvents(t, c.nodes[1].adminURL, c.adminKey, sess.ID)
	results := 0
	for _, ev := range log {
		if ev.Type == "tool.result" {
			results++
		}
		if ev.Type == "session.error" {
			t.Errorf("unexpected session.error %s", ev.Payload)
		}
	}
	if results != 1 {
		t.Errorf("%d tool.result events, want exactly one", results)
	}
	// The session lives on: another round trip on the survivors.
	r, err := sess.Send(ctx, "call get_time {}")
	mustReply(t, sent{r, err}, "get_time returned: 12:00")
	owners := c.owners(2)
	if owners[c.nodes[0].clientURL] != 0 || owners[c.nodes[1].clientURL]+owners[c.nodes[2].clientURL] != 1 {
		t.Errorf("owners after the stop: %v, want one survivor", owners)
	}
}

// TestClusterRunningTurnOwnerKilled: the owner is killed with SIGKILL
// while its turn waits on the model. A subscription with stream_deltas,
// which only the owner can serve and another node relays, ends with the
// error frame that says to resume; resumed from its last event, like a
// plain subscription served by the other node all along, it sees the new
// owner end the turn with session.error turn_interrupted. The Send whose
// turn died returns instead of hanging, and the session takes the next
// message.
func TestClusterRunningTurnOwnerKilled(t *testing.T) {
	t.Parallel()
	mock := newMockProvider(t)
	mock.push(mockHang())
	c := startClusterWith(t, 3, mock.entry("mock"), "mock")
	ctx := loopCtx(t)
	rr := newRoundRobin(t, c.clientURLs(c.nodes[0]))
	sess, err := c.harness(rr, func() string { return "12:00" }).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rr.point(c.clientURLs(c.nodes[1])) // from now on, through node 1
	relayed, err := sess.Subscribe(ctx, client.SubscribeOptions{StreamDeltas: true})
	if err != nil {
		t.Fatal(err)
	}
	defer relayed.Close()
	plain, err := sess.Subscribe(ctx, client.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	ch := goSend(ctx, sess, "hello")
	mock.next(t) // the model call is in flight on node 0
	seen := readUntil(t, ctx, relayed, "client.message.send")
	c.nodes[0].kill()
	for {
		ev, err := relayed.Next(ctx)
		if err != nil {
			if !strings.Contains(err.Error(), "since_event_id") {
				t.Fatalf("relayed subscription after its owner died: %v, want the error frame to resume from", err)
			}
			break
		}
		seen = append(seen, ev)
	}
	// The Send whose turn died returns: with an error, or, when the SDK
	// sent its message again after the broken stream, with the new
	// owner's answer to it. It never hangs.
	retried := recv(t, ch).err == nil

	resumed, err := sess.Subscribe(ctx, client.SubscribeOptions{SinceEventID: seen[len(seen)-1].ID, StreamDeltas: true})
	if err != nil {
		t.Fatal(err)
	}
	defer resumed.Close()
	for _, sub := range []*client.Subscription{resumed, plain} {
		evs := readUntil(t, ctx, sub, "session.error")
		if p := payload(t, evs[len(evs)-1]); p["reason"] != "turn_interrupted" {
			t.Fatalf("session.error %v, want turn_interrupted", p)
		}
	}
	rr.point(c.clientURLs(c.nodes[1:]...))
	// Unless the SDK sent it again, the interrupted message stays in the
	// conversation unanswered, and the model gets it with the next one
	// (the mock echoes the user texts of the last user turn).
	want := "mock: hello\nagain"
	if retried {
		want = "mock: again"
	}
	r, err := sess.Send(ctx, "again")
	mustReply(t, sent{r, err}, want)
}

// storeLog reads a session's log straight from the store and checks that
// it is numbered 1…n without a gap or duplicate.
func (c *testCluster) storeLog(ctx context.Context, sid string) []*baton.Event {
	c.t.Helper()
	db, err := store.Open(ctx, store.Options{URL: c.env["BATON_DATABASE_URL"]})
	if err != nil {
		c.t.Fatal(err)
	}
	defer db.Close()
	var log []*baton.Event
	cursor := ""
	for {
		items, next, err := db.Events(ctx, sid, baton.Page{Cursor: cursor, Limit: 500})
		if err != nil {
			c.t.Fatal(err)
		}
		for _, ev := range items {
			if ev.Seq != int64(len(log)+1) {
				c.t.Fatalf("session %s: event %d of the log has seq %d", sid, len(log)+1, ev.Seq)
			}
			log = append(log, ev)
		}
		if next == "" {
			return log
		}
		cursor = next
	}
}

// countTypes counts the log's events by type.
func countTypes(log []*baton.Event) map[string]int {
	n := map[string]int{}
	for _, ev := range log {
		n[ev.Type]++
	}
	return n
}

// TestClusterRollingRestart: while sessions make client-tool round trips
// through a round-robin over the live nodes, every node in turn is
// stopped with SIGTERM and replaced by a new process. No round trip fails,
// and every session's log is whole: one tool result per tool call, one
// reply per message.
func TestClusterRollingRestart(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := loopCtx(t)
	rr := newRoundRobin(t, c.clientURLs())
	const sessions = 6
	var (
		wg     sync.WaitGroup
		stop   = make(chan struct{})
		mu     sync.Mutex
		rounds = map[string]int{}
		errs   []error
	)
	sids := make([]string, sessions)
	for i := range sessions {
		sess, err := c.harness(rr, func() string { return "12:00" }).Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		sids[i] = sess.ID
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r, err := sess.Send(ctx, "call get_time {}")
				mu.Lock()
				switch {
				case err != nil:
					errs = append(errs, err)
				case r.Message.Text() != "get_time returned: 12:00":
					errs = append(errs, fmt.Errorf("reply %q", r.Message.Text()))
				default:
					rounds[sess.ID]++
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		}()
	}
	// progress waits until every session has made n more round trips.
	progress := func(n int) {
		mu.Lock()
		base := maps.Clone(rounds)
		mu.Unlock()
		for {
			mu.Lock()
			done, failed := true, len(errs) > 0
			for _, sid := range sids {
				if rounds[sid] < base[sid]+n {
					done = false
				}
			}
			mu.Unlock()
			if done || failed || ctx.Err() != nil {
				return
			}
			runtime.Gosched()
		}
	}
	progress(2)
	for i := range c.nodes {
		old := c.nodes[i]
		var rest []*child
		for j, n := range c.nodes {
			if j != i {
				rest = append(rest, n)
			}
		}
		rr.point(c.clientURLs(rest...)) // the load balancer takes the node out first
		rr.drain(old.clientURL)         // and lets its requests finish
		if err := old.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if err := old.cmd.Wait(); err != nil {
			t.Errorf("node %d did not exit cleanly on SIGTERM: %v", i, err)
		}
		c.nodes[i] = startChild(t, c.env)
		rr.point(c.clientURLs())
		progress(2)
	}
	close(stop)
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d round trips failed during the rolling restart, first: %v", len(errs), errs[0])
	}
	for _, sid := range sids {
		n := countTypes(c.storeLog(ctx, sid))
		if n["tool.call"] != rounds[sid] || n["tool.result"] != rounds[sid] || n["client.message.send"] != 2*rounds[sid] || n["session.error"] != 0 {
			t.Errorf("session %s after %d round trips: %v", sid, rounds[sid], n)
		}
	}
}

// TestClusterStaleOwnerCannotAppend: the owner is stopped with SIGSTOP
// past its lease while a turn waits on a client tool; another node takes
// the session over and finishes the turn. Resumed, the old owner either
// forwards a new message to the new owner or has its append refused by
// the fence: the message is answered once, and the log stays one history.
func TestClusterStaleOwnerCannotAppend(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2)
	ctx := loopCtx(t)
	a, b := c.nodes[0], c.nodes[1]
	rr := newRoundRobin(t, c.clientURLs(a))
	paused, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	h := c.harness(rr, func() string {
		once.Do(func() { close(paused) })
		<-resume
		return "12:00"
	})
	sess, err := h.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ch := goSend(ctx, sess, "call get_time {}")
	<-paused
	if err := a.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	defer func() {
		if stopped {
			a.cmd.Process.Signal(syscall.SIGCONT)
		}
	}()
	rr.point(c.clientURLs(b))
	close(resume)
	mustReply(t, recv(t, ch), "get_time returned: 12:00") // b took over once a's lease lapsed

	if err := a.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	rr.point(c.clientURLs(a)) // straight to the stale owner
	r, err := sess.Send(ctx, "after the pause")
	if err != nil {
		rr.point(c.clientURLs(b))
		r, err = sess.Send(ctx, "after the pause")
	}
	mustReply(t, sent{r, err}, "You said: after the pause")
	n := countTypes(c.storeLog(ctx, sess.ID))
	if n["tool.result"] != 1 || n["server.message.send"] != 3 || n["session.error"] != 0 {
		t.Errorf("log after the stale owner came back: %v; want one tool result, three replies", n)
	}
	owners := c.owners(1)
	if owners[a.clientURL] != 0 || owners[b.clientURL] != 1 {
		t.Errorf("owners %v; want b alone", owners)
	}
}

// TestShutdownEndsSubscriptions: a graceful stop ends live subscriptions
// at once with an error frame saying how to resume, and registered
// clients' calls streams, instead of letting them hold the drain until
// BAE_SHUTDOWN_TIMEOUT.
func TestShutdownEndsSubscriptions(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	s := startServer(t, func(env map[string]string) { env["BAE_SHUTDOWN_TIMEOUT"] = "600" })
	pro := loopProfile(t, s, map[string]any{"primary_provider": "script"})
	h, _ := loopHarness(t, s, pro)
	sess, err := h.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := sess.Subscribe(ctx, client.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	// A registered client's calls stream must not hold the drain either.
	rc, err := client.RegisterClient(ctx, client.Config{BaseURL: s.clientURL}, sess.ID, sess.Key, "laptop", client.Never(), laptopTool("L", nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Abort()
	r, err := sess.Send(ctx, `call client__laptop__read_file {"path":"x"}`) // its calls stream is open
	mustReply(t, sent{r, err}, "client__laptop__read_file returned: L:x")
	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		s.stop()
	}()
	for err == nil { // the client's registration events first
		_, err = sub.Next(ctx)
	}
	if !strings.Contains(err.Error(), "shutting down") || !strings.Contains(err.Error(), "since_event_id") {
		t.Fatalf("subscription at shutdown: %v, want the shutting-down error frame", err)
	}
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("the server did not stop while a subscription was open")
	}
}

// TestClusterRevokeClosesSessionsOnEveryNode: revoking a client key
// through one node's admin API closes the sessions it orphans on every
// node: the owner of each records session.close client_key_revoked.
func TestClusterRevokeClosesSessionsOnEveryNode(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2)
	ctx := loopCtx(t)
	a, b := c.nodes[0], c.nodes[1]
	sess, err := c.harness(newRoundRobin(t, c.clientURLs(a)), func() string { return "" }).Connect(ctx) // owned by a
	if err != nil {
		t.Fatal(err)
	}
	sub, err := sess.Subscribe(ctx, client.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	mustStatus(t, call(t, "DELETE", b.adminURL+"/admin/v1/keys/"+c.keyID, c.adminKey, nil), 204)
	evs := readUntil(t, ctx, sub, "session.close")
	if p := payload(t, evs[len(evs)-1]); p["reason"] != "client_key_revoked" {
		t.Errorf("session.close %v, want client_key_revoked", p)
	}
}

// TestClusterSubscriptionSurvivesOwnerKill: a subscription served by a
// node that does not own the session (rings and the log feed it) goes on
// through its owner's SIGKILL: it gets every event of the log after its
// start, the new owner's included, once each and in order, and no error.
// An unsubscribe sent to another node ends it.
func TestClusterSubscriptionSurvivesOwnerKill(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 3)
	ctx := loopCtx(t)
	owner, watcher, survivor := c.nodes[0], c.nodes[1], c.nodes[2]
	rr := newRoundRobin(t, c.clientURLs(owner))
	sess, err := c.harness(rr, func() string { return "12:00" }).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	page, err := sess.Events(ctx, "", 100)
	if err != nil {
		t.Fatal(err)
	}
	since := page.Items[len(page.Items)-1].ID
	rr.point(c.clientURLs(watcher))
	sub, err := sess.Subscribe(ctx, client.SubscribeOptions{SinceEventID: since})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	rr.point(c.clientURLs(owner))
	r, err := sess.Send(ctx, "call get_time {}")
	mustReply(t, sent{r, err}, "get_time returned: 12:00")
	seen := readUntil(t, ctx, sub, "server.message.send")
	seen = append(seen, readUntil(t, ctx, sub, "server.message.send")...) // the pause, then the answer

	owner.kill()
	rr.point(c.clientURLs(survivor))
	r, err = sess.Send(ctx, "call get_time {}")
	mustReply(t, sent{r, err}, "get_time returned: 12:00")
	seen = append(seen, readUntil(t, ctx, sub, "server.message.send")...)
	seen = append(seen, readUntil(t, ctx, sub, "server.message.send")...)

	log := c.storeLog(ctx, sess.ID)
	var after []string
	for i, ev := range log {
		if ev.ID == since {
			for _, e := range log[i+1:] {
				after = append(after, e.ID)
			}
		}
	}
	if got := eventIDs(seen); fmt.Sprint(got) != fmt.Sprint(after) {
		t.Errorf("the subscription saw\n %v\nthe log after its start has\n %v", got, after)
	}

	rr.point(c.clientURLs(survivor))
	if err := sess.Unsubscribe(ctx); err != nil {
		t.Fatal(err)
	}
	if ev, err := sub.Next(ctx); err == nil {
		t.Fatalf("after an unsubscribe through another node the subscription got %s", ev.Type)
	}
}
