package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
	sdk "github.com/baton-engine/baton/client/executor"
	"github.com/baton-engine/baton/executor"
	"github.com/baton-engine/baton/store"
)

// fakeHands is a node's local executor hands: tools by environment, and
// calls answered by call (an "ok" result when nil).
type fakeHands struct {
	mu       sync.Mutex
	tools    map[string][]baton.ToolDef
	calls    []baton.ExecutorCall // without OnProgress
	released []string
	call     func(ctx context.Context, c baton.ExecutorCall) (baton.ExecutorResult, error)
	// releases receives each released session id.
	releases chan string
}

var _ LocalHands = (*fakeHands)(nil)

func newFakeHands(tools map[string][]baton.ToolDef) *fakeHands {
	return &fakeHands{tools: tools, releases: make(chan string, 16)}
}

func (f *fakeHands) Tools(envIDs []string) []baton.ExecutorTool {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []baton.ExecutorTool
	seen := map[string]bool{}
	for _, env := range envIDs {
		for _, d := range f.tools[env] {
			if !seen[d.Name] {
				seen[d.Name] = true
				out = append(out, baton.ExecutorTool{EnvironmentID: env, ToolDef: d})
			}
		}
	}
	return out
}

func (f *fakeHands) ToolsByEnvironment() map[string][]baton.ToolDef {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string][]baton.ToolDef, len(f.tools))
	for env, defs := range f.tools {
		out[env] = slices.Clone(defs)
	}
	return out
}

func (f *fakeHands) setTools(tools map[string][]baton.ToolDef) {
	f.mu.Lock()
	f.tools = tools
	f.mu.Unlock()
}

func (f *fakeHands) Call(ctx context.Context, c baton.ExecutorCall) (baton.ExecutorResult, error) {
	f.mu.Lock()
	rec := c
	rec.OnProgress = nil
	f.calls = append(f.calls, rec)
	call := f.call
	f.mu.Unlock()
	if call != nil {
		return call(ctx, c)
	}
	return baton.ExecutorResult{ExecutorID: "exe_fake", Content: json.RawMessage(`"ok"`)}, nil
}

func (f *fakeHands) Release(sessionID string) {
	f.mu.Lock()
	f.released = append(f.released, sessionID)
	f.mu.Unlock()
	f.releases <- sessionID
}

func (f *fakeHands) callsMade() []baton.ExecutorCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

func (f *fakeHands) releasedSessions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.released)
}

// countingStore counts a node's calls to its ToolStore.
type countingStore struct {
	ToolStore
	publishes, reads atomic.Int64
}

func (s *countingStore) PublishNodeTools(ctx context.Context, nodeID string, tools map[string][]baton.ToolDef) error {
	s.publishes.Add(1)
	return s.ToolStore.PublishNodeTools(ctx, nodeID, tools)
}

func (s *countingStore) RemoteTools(ctx context.Context, selfID string, maxAge time.Duration) ([]baton.NodeTools, error) {
	s.reads.Add(1)
	return s.ToolStore.RemoteTools(ctx, selfID, maxAge)
}

// handsNode is a node's executor side: its store, its Hands over local,
// and a loopback server whose handler is Hands.Mount over next.
type handsNode struct {
	id     string
	db     *store.DB
	store  *countingStore
	h      *Hands
	srv    *httptest.Server
	secret string
	// nexts counts the requests that reached next.
	nexts atomic.Int64
}

// startHands opens node id's store, Hands and server, and registers the
// node with the server's URL. next serves what is not internal (404 when
// nil).
func (c *testCluster) startHands(t *testing.T, id string, local LocalHands, next http.Handler) *handsNode {
	t.Helper()
	if next == nil {
		next = http.NotFoundHandler()
	}
	db, err := store.Open(context.Background(), store.Options{URL: c.url, NodeID: id, LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close store of %s: %v", id, err)
		}
	})
	secret, err := db.ClusterSecret(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	hn := &handsNode{id: id, db: db, store: &countingStore{ToolStore: db}, secret: secret}
	hn.h = NewHands(HandsOptions{Local: local, Store: hn.store, ID: id, Secret: secret, LeaseTTL: time.Minute})
	hn.srv = httptest.NewServer(hn.h.Mount(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hn.nexts.Add(1)
		next.ServeHTTP(w, r)
	})))
	t.Cleanup(hn.srv.Close)
	t.Cleanup(func() { _ = hn.h.Close() }) // first: its releases end before the server goes
	if err := db.RegisterNode(t.Context(), &baton.Node{ID: id, AdvertiseURL: hn.srv.URL, Version: "test"}); err != nil {
		t.Fatal(err)
	}
	return hn
}

func (hn *handsNode) refresh(t *testing.T) {
	t.Helper()
	if err := hn.h.Refresh(t.Context()); err != nil {
		t.Fatalf("refresh %s: %v", hn.id, err)
	}
}

func tool(name, by string) baton.ToolDef {
	return baton.ToolDef{Name: name, Description: &by, InputSchema: json.RawMessage(`{"type":"object"}`)}
}

// listed is a tool as a test compares it: where, what, defined by whom.
type listed struct{ Env, Name, By string }

func listTools(tools []baton.ExecutorTool) []listed {
	out := make([]listed, len(tools))
	for i, tl := range tools {
		out[i] = listed{tl.EnvironmentID, tl.Name, *tl.Description}
	}
	return out
}

func TestHandsTools(t *testing.T) {
	c := newTestCluster(t)
	a := c.startHands(t, "a", newFakeHands(map[string][]baton.ToolDef{
		"env_a": {tool("a1", "a")}, "env_b": {tool("x", "a")},
	}), nil)
	bLocal := newFakeHands(map[string][]baton.ToolDef{
		"env_a": {tool("a1", "b"), tool("lookup", "b")}, "env_b": {tool("b2", "b")}, "env_c": {tool("c1", "b")},
	})
	b := c.startHands(t, "b", bLocal, nil)
	cn := c.startHands(t, "c", newFakeHands(map[string][]baton.ToolDef{
		"env_a": {tool("lookup", "c"), tool("z", "c")}, "env_0": {tool("x", "c")},
	}), nil)
	envs := []string{"env_0", "env_a", "env_b"}

	// Before any refresh: the local tools alone.
	if diff := cmp.Diff([]listed{{"env_a", "a1", "a"}, {"env_b", "x", "a"}}, listTools(a.h.Tools(envs))); diff != "" {
		t.Fatalf("before refresh (-want +got):\n%s", diff)
	}

	b.refresh(t)
	cn.refresh(t)
	a.refresh(t)
	// For each environment in order, the local tools and then the other
	// nodes' in node id order, every name once: env_0's x (on c) hides
	// the local env_b x, a1 stays local, lookup is b's.
	want := []listed{
		{"env_0", "x", "c"},
		{"env_a", "a1", "a"}, {"env_a", "lookup", "b"}, {"env_a", "z", "c"},
		{"env_b", "b2", "b"},
	}
	reads, publishes := a.store.reads.Load(), a.store.publishes.Load()
	for range 3 {
		if diff := cmp.Diff(want, listTools(a.h.Tools(envs))); diff != "" {
			t.Fatalf("after refresh (-want +got):\n%s", diff)
		}
	}
	if r, p := a.store.reads.Load(), a.store.publishes.Load(); r != reads || p != publishes {
		t.Errorf("Tools read the store: %d reads, %d publishes, want %d and %d", r, p, reads, publishes)
	}
	if got := listTools(a.h.Tools([]string{"env_none"})); len(got) != 0 {
		t.Errorf("an environment nobody serves lists %v", got)
	}

	// Unchanged tools are not published again; changed ones are, and the
	// other nodes see them at their next refresh.
	if n := b.store.publishes.Load(); n != 1 {
		t.Fatalf("b published %d times, want 1", n)
	}
	b.refresh(t)
	if n := b.store.publishes.Load(); n != 1 {
		t.Errorf("b published its unchanged tools again: %d publishes", n)
	}
	bLocal.setTools(map[string][]baton.ToolDef{"env_b": {tool("b3", "b")}})
	b.refresh(t)
	if n := b.store.publishes.Load(); n != 2 {
		t.Errorf("b published %d times after a change, want 2", n)
	}
	a.refresh(t)
	want = []listed{{"env_0", "x", "c"}, {"env_a", "a1", "a"}, {"env_a", "lookup", "c"}, {"env_a", "z", "c"}, {"env_b", "b3", "b"}}
	if diff := cmp.Diff(want, listTools(a.h.Tools(envs))); diff != "" {
		t.Errorf("after b's change (-want +got):\n%s", diff)
	}

	// A draining node serves no new calls: its tools go.
	if err := a.db.SetDraining(t.Context(), "c", true); err != nil {
		t.Fatal(err)
	}
	a.refresh(t)
	want = []listed{{"env_a", "a1", "a"}, {"env_b", "x", "a"}, {"env_b", "b3", "b"}}
	if diff := cmp.Diff(want, listTools(a.h.Tools(envs))); diff != "" {
		t.Errorf("c draining (-want +got):\n%s", diff)
	}
}

// call runs c on hn's Hands on a goroutine.
func (hn *handsNode) callAsync(c baton.ExecutorCall) <-chan outcome {
	ch := make(chan outcome, 1)
	go func() {
		res, err := hn.h.Call(context.Background(), c)
		ch <- outcome{res, err}
	}()
	return ch
}

// recv returns the next value of ch, failing t if none comes in time.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(requestTimeout):
		t.Fatal("timed out")
		panic("unreachable")
	}
}

func execCall(session, name string) baton.ExecutorCall {
	return baton.ExecutorCall{SessionID: session, ProfileID: "pro_1", EnvironmentID: "env_a", ToolCallID: "call_" + session + "_" + name,
		Name: name, Input: json.RawMessage(`{"q":"word"}`), Timeout: 90 * time.Second}
}

// twoNodes starts a with one local tool and b with lookup, both in
// env_a, and refreshes them.
func twoNodes(t *testing.T) (a, b *handsNode, aLocal, bLocal *fakeHands) {
	t.Helper()
	c := newTestCluster(t)
	aLocal = newFakeHands(map[string][]baton.ToolDef{"env_a": {tool("mine", "a")}})
	bLocal = newFakeHands(map[string][]baton.ToolDef{"env_a": {tool("lookup", "b"), tool("mine", "b")}})
	a = c.startHands(t, "a", aLocal, nil)
	b = c.startHands(t, "b", bLocal, nil)
	b.refresh(t)
	a.refresh(t)
	return a, b, aLocal, bLocal
}

func TestHandsRemoteCall(t *testing.T) {
	a, _, aLocal, bLocal := twoNodes(t)
	half, two := 1.0, 2.0
	bLocal.call = func(ctx context.Context, c baton.ExecutorCall) (baton.ExecutorResult, error) {
		c.OnProgress(baton.ExecutorProgress{Message: "half", Progress: &half, Total: &two})
		c.OnProgress(baton.ExecutorProgress{Message: "almost"})
		return baton.ExecutorResult{ExecutorID: "exe_b", Content: json.RawMessage(`[{"type":"text","text":"found"}]`), IsError: true}, nil
	}
	var progress []baton.ExecutorProgress
	c := execCall("ses_1", "lookup")
	c.OnProgress = func(p baton.ExecutorProgress) { progress = append(progress, p) }
	res, err := a.h.Call(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	want := baton.ExecutorResult{ExecutorID: "exe_b", Content: json.RawMessage(`[{"type":"text","text":"found"}]`), IsError: true}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Errorf("result (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]baton.ExecutorProgress{{Message: "half", Progress: &half, Total: &two}, {Message: "almost"}}, progress); diff != "" {
		t.Errorf("progress (-want +got):\n%s", diff)
	}
	c.OnProgress = nil
	if diff := cmp.Diff([]baton.ExecutorCall{c}, bLocal.callsMade()); diff != "" {
		t.Errorf("b ran (-want +got):\n%s", diff)
	}
	if n := len(aLocal.callsMade()); n != 0 {
		t.Errorf("a ran %d calls of a tool only b serves", n)
	}

	// b's hands' errors come back as they are; an internal one without
	// its detail.
	for _, tc := range []struct {
		err  error
		want *baton.Error
	}{
		{baton.Errorf(baton.ECodeUnavailable, "every executor is at capacity"), baton.Errorf(baton.ECodeUnavailable, "every executor is at capacity")},
		{errors.New("secret detail"), baton.Errorf(baton.ECodeInternal, "tool 'lookup' failed on its executor")},
	} {
		bLocal.call = func(context.Context, baton.ExecutorCall) (baton.ExecutorResult, error) {
			return baton.ExecutorResult{ExecutorID: "exe_b"}, tc.err
		}
		res, err := a.h.Call(t.Context(), execCall("ses_2", "lookup"))
		var got *baton.Error
		if !errors.As(err, &got) || *got != *tc.want || res.ExecutorID != "exe_b" {
			t.Errorf("b's hands failing with %v: %+v, %v; want %v from exe_b", tc.err, res, err, tc.want)
		}
	}
}

func TestHandsLocalFirst(t *testing.T) {
	a, _, aLocal, bLocal := twoNodes(t)
	// mine is served here and on b; nobody serves nothing: both run here.
	for _, name := range []string{"mine", "nothing"} {
		if _, err := a.h.Call(t.Context(), execCall("ses_1", name)); err != nil {
			t.Fatal(err)
		}
	}
	if got := aLocal.callsMade(); len(got) != 2 || got[0].Name != "mine" || got[1].Name != "nothing" {
		t.Errorf("a ran %+v, want mine and nothing", got)
	}
	if n := len(bLocal.callsMade()); n != 0 {
		t.Errorf("b ran %d calls", n)
	}
	// Releasing a session no other node served stays here.
	a.h.Release("ses_1")
	if err := a.h.Close(); err != nil { // waits for the releases sent
		t.Fatal(err)
	}
	if got := bLocal.releasedSessions(); len(got) != 0 {
		t.Errorf("b released %v", got)
	}
	if got := aLocal.releasedSessions(); !slices.Equal(got, []string{"ses_1"}) {
		t.Errorf("a released %v", got)
	}
}

func TestHandsRelease(t *testing.T) {
	a, _, aLocal, bLocal := twoNodes(t)
	if _, err := a.h.Call(t.Context(), execCall("ses_1", "lookup")); err != nil {
		t.Fatal(err)
	}
	a.h.Release("ses_1")
	if got := aLocal.releasedSessions(); !slices.Equal(got, []string{"ses_1"}) {
		t.Errorf("a released %v", got)
	}
	if got := recv(t, bLocal.releases); got != "ses_1" {
		t.Errorf("b released %s, want ses_1", got)
	}
	// Released once: a second Release sends nothing more.
	a.h.Release("ses_1")
	if err := a.h.Close(); err != nil {
		t.Fatal(err)
	}
	if got := bLocal.releasedSessions(); !slices.Equal(got, []string{"ses_1"}) {
		t.Errorf("b released %v, want ses_1 once", got)
	}
	// A closed Hands sends no call to another node.
	if _, err := a.h.Call(t.Context(), execCall("ses_3", "lookup")); baton.ErrorCode(err) != baton.ECodeUnavailable {
		t.Errorf("call after Close: %v, want unavailable", err)
	}
}

// blockingCall makes hands' calls wait for their context, reporting each
// start on the returned channel.
func blockingCall(f *fakeHands) <-chan struct{} {
	started := make(chan struct{}, 1)
	f.call = func(ctx context.Context, c baton.ExecutorCall) (baton.ExecutorResult, error) {
		started <- struct{}{}
		<-ctx.Done()
		return baton.ExecutorResult{}, baton.Errorf(baton.ECodeUnavailable, "cancelled")
	}
	return started
}

func TestHandsNodeDiesMidCall(t *testing.T) {
	a, b, _, bLocal := twoNodes(t)
	started := blockingCall(bLocal)
	ch := a.callAsync(execCall("ses_1", "lookup"))
	recv(t, started)
	b.srv.CloseClientConnections() // b's process is gone
	got := recv(t, ch)
	if baton.ErrorCode(got.err) != baton.ECodeUnavailable || !strings.Contains(got.err.Error(), "the node b, where the executor serving tool 'lookup' is connected, failed during the call") {
		t.Fatalf("call whose node died: %v", got.err)
	}
	if n := len(bLocal.callsMade()); n != 1 {
		t.Errorf("b ran %d calls, want 1 (never sent again)", n)
	}
}

func TestHandsNodeStopsHeartbeating(t *testing.T) {
	c := newTestCluster(t)
	aLocal := newFakeHands(nil)
	bLocal := newFakeHands(map[string][]baton.ToolDef{"env_a": {tool("lookup", "b")}})
	a := c.startHands(t, "a", aLocal, nil)
	b := c.startHands(t, "b", bLocal, nil)
	b.refresh(t)
	a.refresh(t)
	started := blockingCall(bLocal)
	ch := a.callAsync(execCall("ses_1", "lookup"))
	recv(t, started)
	// b is paused: its connection stays open, its heartbeat stops. a's
	// next refresh fails the call and drops b's tools.
	if _, err := c.sql.Exec(`UPDATE nodes SET heartbeat_at = now() - interval '1 hour' WHERE id = 'b'`); err != nil {
		t.Fatal(err)
	}
	a.refresh(t)
	got := recv(t, ch)
	if !strings.Contains(baton.ErrorMessage(got.err), "the node b, where the executor serving tool 'lookup' is connected, failed during the call") {
		t.Fatalf("call whose node stopped heartbeating: %v", got.err)
	}
	if tools := a.h.Tools([]string{"env_a"}); len(tools) != 0 {
		t.Errorf("b's tools still listed: %v", listTools(tools))
	}
}

func TestHandsCallerCancels(t *testing.T) {
	a, _, _, bLocal := twoNodes(t)
	started := make(chan struct{}, 1)
	cancelled := make(chan struct{})
	bLocal.call = func(ctx context.Context, c baton.ExecutorCall) (baton.ExecutorResult, error) {
		started <- struct{}{}
		<-ctx.Done()
		close(cancelled)
		return baton.ExecutorResult{}, ctx.Err()
	}
	ctx, cancel := context.WithCancel(t.Context())
	ch := make(chan error, 1)
	go func() {
		_, err := a.h.Call(ctx, execCall("ses_1", "lookup"))
		ch <- err
	}()
	recv(t, started)
	cancel()
	if err := recv(t, ch); baton.ErrorMessage(err) != "the call to tool 'lookup' was cancelled" {
		t.Errorf("cancelled call: %v", err)
	}
	recv(t, cancelled) // b's call ends with the request
}

func TestHandsInternalAuth(t *testing.T) {
	a, b, _, bLocal := twoNodes(t)
	good := "Bearer " + b.secret
	body := `{"session_id":"ses_1","environment_id":"env_a","tool_call_id":"call_1","name":"lookup"}`
	tests := []struct {
		name, method, path, auth, body string
		status                         int
		typ                            string // the problem type, when there is a problem body
	}{
		{"no credential", "POST", callPath, "", body, 401, "unauthorized"},
		{"wrong secret", "POST", callPath, "Bearer " + strings.Repeat("0", 64), body, 401, "unauthorized"},
		{"empty bearer", "POST", callPath, "Bearer ", body, 401, "unauthorized"},
		{"basic", "POST", callPath, "Basic " + b.secret, body, 401, "unauthorized"},
		{"release without credential", "POST", releasePath, "", `{"session_id":"ses_1"}`, 401, "unauthorized"},
		{"unknown path without credential", "GET", internalPrefix + "v1/nodes", "", "", 401, "unauthorized"},
		{"unknown path", "GET", internalPrefix + "v1/nodes", good, "", 404, ""},
		{"wrong method", "GET", callPath, good, "", 405, ""},
		{"not JSON", "POST", callPath, good, "{", 400, "bad_request"},
		{"missing fields", "POST", callPath, good, `{"session_id":"ses_1"}`, 400, "bad_request"},
		{"negative timeout", "POST", callPath, good, `{"session_id":"ses_1","environment_id":"env_a","tool_call_id":"call_1","name":"lookup","timeout_ms":-1}`, 400, "bad_request"},
		{"release without session", "POST", releasePath, good, `{}`, 400, "bad_request"},
		{"too large", "POST", callPath, good, `{"session_id":"` + strings.Repeat("s", maxInternalBody) + `"}`, 413, "payload_too_large"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tc.method, b.srv.URL+tc.path, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := a.h.rt.RoundTrip(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
			if tc.typ == "" {
				return
			}
			var p struct {
				Type   string `json:"type"`
				Status int    `json:"status"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&p); err != nil || p.Type != tc.typ || p.Status != tc.status {
				t.Errorf("problem %+v (%v), want type %s", p, err, tc.typ)
			}
		})
	}
	if n := len(bLocal.callsMade()); n != 0 {
		t.Errorf("b ran %d calls", n)
	}
	if n := b.nexts.Load(); n != 0 {
		t.Errorf("%d internal requests reached the client port's handler", n)
	}
}

// tokens is the executor token service of TestHandsRealExecutor: a
// token names its environment.
type tokens struct{}

func (tokens) Issue(_ context.Context, _, scope, owner string) (string, *baton.ExecutorGrant, error) {
	return "tok_" + owner, &baton.ExecutorGrant{Scope: scope, EnvironmentID: owner, CredentialID: "cred_1", ExpiresAt: time.Now().Add(time.Hour)}, nil
}

func (tokens) Verify(_ context.Context, token string) (*baton.ExecutorGrant, error) {
	env, ok := strings.CutPrefix(token, "tok_")
	if !ok {
		return nil, baton.Errorf(baton.ECodeUnauthorized, "bad token")
	}
	return &baton.ExecutorGrant{Scope: baton.ExecutorScopeEnvironment, EnvironmentID: env, CredentialID: "cred_1", ExpiresAt: time.Now().Add(time.Hour)}, nil
}

// TestHandsRealExecutor runs a call on an executor connected to node b
// (the SDK, over WebSocket, to a real executor.Hub) from node a.
func TestHandsRealExecutor(t *testing.T) {
	c := newTestCluster(t)
	hub, err := executor.Open(executor.Options{Tokens: tokens{}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hub.Close(context.Background()) })
	bLocal := executor.NewHands(hub)
	t.Cleanup(func() { _ = bLocal.Close() })
	mux := http.NewServeMux()
	mux.Handle("GET /v1/executors/connect", hub)
	mux.HandleFunc("POST /v1/environments/{id}/token", func(w http.ResponseWriter, r *http.Request) {
		tok, g, _ := tokens{}.Issue(r.Context(), "", baton.ExecutorScopeEnvironment, r.PathValue("id"))
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"token": tok, "expires_at": baton.FormatTime(g.ExpiresAt)})
	})
	aLocal := newFakeHands(nil)
	a := c.startHands(t, "a", aLocal, nil)
	b := c.startHands(t, "b", bLocal, mux)

	lookup := func(by string) sdk.Tool {
		return sdk.Tool{Def: sdk.ToolDef{Name: "lookup", Description: by}, Handle: func(ctx context.Context, call sdk.Call) (sdk.Result, error) {
			_ = call.Progress("looking", 1, 2)
			return sdk.TextResult("found " + string(call.Input) + " by " + by), nil
		}}
	}
	grep := sdk.Tool{Def: sdk.ToolDef{Name: "grep", Description: "exe_2"}, Handle: func(context.Context, sdk.Call) (sdk.Result, error) {
		return sdk.TextResult("grepped"), nil
	}}
	for _, x := range []struct {
		id    string
		tools []sdk.Tool
	}{{"exe_2", []sdk.Tool{lookup("exe_2"), grep}}, {"exe_1", []sdk.Tool{lookup("exe_1")}}} {
		e, err := sdk.New(sdk.Config{BaseURL: b.srv.URL, Credential: "bae_exc_test", Scope: sdk.Environment("env_a"), ExecutorID: x.id, Tools: x.tools})
		if err != nil {
			t.Fatal(err)
		}
		if err := e.Open(t.Context()); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Close(context.Background()) })
	}

	b.refresh(t)
	a.refresh(t)
	// b's hub lists lookup once, as exe_1 (the smallest id) defines it.
	if diff := cmp.Diff([]listed{{"env_a", "lookup", "exe_1"}, {"env_a", "grep", "exe_2"}}, listTools(a.h.Tools([]string{"env_a"}))); diff != "" {
		t.Fatalf("a's tools (-want +got):\n%s", diff)
	}

	var progress []string
	call := execCall("ses_1", "grep")
	res, err := a.h.Call(t.Context(), call)
	if err != nil || res.ExecutorID != "exe_2" || string(res.Content) != `[{"text":"grepped","type":"text"}]` {
		t.Fatalf("grep on b: %+v %s, %v", res, res.Content, err)
	}
	call = execCall("ses_1", "lookup")
	call.ToolCallID = "call_2"
	call.OnProgress = func(p baton.ExecutorProgress) { progress = append(progress, p.Message) }
	res, err = a.h.Call(t.Context(), call)
	// The session is bound to exe_2 by its first call and stays there.
	if err != nil || res.ExecutorID != "exe_2" || string(res.Content) != `[{"text":"found {\"q\":\"word\"} by exe_2","type":"text"}]` {
		t.Fatalf("lookup on b: %+v %s, %v", res, res.Content, err)
	}
	if !slices.Equal(progress, []string{"looking"}) {
		t.Errorf("progress %v, want [looking]", progress)
	}
	if n := len(aLocal.callsMade()); n != 0 {
		t.Errorf("a ran %d calls", n)
	}
}

func BenchmarkHandsTools(b *testing.B) {
	local := newFakeHands(map[string][]baton.ToolDef{"env_a": {tool("a1", "a"), tool("a2", "a")}})
	x := NewHands(HandsOptions{Local: local, ID: "a"})
	defer x.Close()
	var remote []baton.NodeTools
	for _, id := range []string{"b", "c"} {
		var defs []baton.ToolDef
		for _, n := range []string{"t1", "t2", "t3", "t4", "t5"} {
			defs = append(defs, tool(id+n, id))
		}
		remote = append(remote, baton.NodeTools{NodeID: id, AdvertiseURL: "http://" + id, Tools: map[string][]baton.ToolDef{"env_a": defs}})
	}
	envs := []string{"env_a", "env_b"}
	b.Run("local", func(b *testing.B) {
		for b.Loop() {
			_ = x.Tools(envs)
		}
	})
	x.snap.Store(newSnapshot(remote))
	b.Run("remote", func(b *testing.B) {
		for b.Loop() {
			_ = x.Tools(envs)
		}
	})
}
