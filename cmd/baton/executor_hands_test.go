package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/client"
	exsdk "github.com/baton-engine/baton/client/executor"
)

// End-to-end tests of executors serving sessions as hands
// (bma.executor.v1.1): environment executors' tools in turns of a real
// server, driven by a mock model and SDK executors.

// handsServer starts a server on the mock model with an environment and
// a profile using it; env sets more variables (name, value pairs).
type handsServer struct {
	*server
	m       *mockProvider
	net     *execNet
	env     string // environment id
	secret  string // its credential
	credID  string
	profile string
}

func newHandsServer(t *testing.T, env ...string) *handsServer {
	t.Helper()
	m := newMockProvider(t)
	s := startServer(t, loopConfig(t, m.entry("mock"), env...))
	h := &handsServer{server: s, m: m}
	h.env, h.secret, h.credID = s.environment(fmt.Sprintf("env-%d", profileSeq.Add(1)))
	h.profile = loopProfile(t, s, map[string]any{"primary_provider": "mock", "executor_environments": []string{h.env}})
	h.net = newExecNet(t, s)
	return h
}

// executor starts an SDK executor of the environment serving tools.
func (h *handsServer) executor(t *testing.T, id string, tools ...exsdk.Tool) *exsdk.Executor {
	t.Helper()
	return startSDKExecutor(t, h.net, exsdk.Config{Credential: h.secret, Scope: exsdk.Environment(h.env), ExecutorID: id, Tools: tools})
}

// session opens a session on the profile.
func (h *handsServer) session(t *testing.T) *client.Session {
	t.Helper()
	hn, _ := loopHarness(t, h.server, h.profile)
	sess, err := hn.Connect(loopCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	return sess
}

func textTool(name string, fn func(ctx context.Context, c exsdk.Call) (exsdk.Result, error)) exsdk.Tool {
	desc := "test tool " + name
	return exsdk.Tool{Def: exsdk.ToolDef{Name: name, Description: desc, InputSchema: json.RawMessage(`{"type":"object"}`)}, Handle: fn}
}

// toolResults returns the tool_result blocks of the request's last
// message.
func toolResults(t testing.TB, r *mockRequest) []map[string]any {
	t.Helper()
	last := r.Messages[len(r.Messages)-1]
	var bs []map[string]any
	_ = json.Unmarshal(last.Content, &bs)
	var out []map[string]any
	for _, b := range bs {
		if b["type"] == "tool_result" {
			out = append(out, b)
		}
	}
	return out
}

func blockText(b map[string]any) string {
	var parts []string
	cs, _ := b["content"].([]any)
	for _, c := range cs {
		if m, ok := c.(map[string]any); ok {
			parts = append(parts, fmt.Sprint(m["text"]))
		}
	}
	return strings.Join(parts, "\n")
}

// TestExecutorToolRoundTrip: a profile's environment executor serves two
// calls of one model message concurrently, reports progress, and the
// model gets both results without the turn pausing; the log records each
// call and result.
func TestExecutorToolRoundTrip(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "an executor's tools reach the other nodes within a third of the lease TTL, not at once")
	h := newHandsServer(t)
	var started sync.WaitGroup
	started.Add(2)
	h.executor(t, "exe_round", textTool("upper", func(ctx context.Context, c exsdk.Call) (exsdk.Result, error) {
		started.Done()
		started.Wait() // both calls run at once, or neither returns
		var in struct{ Text string }
		_ = json.Unmarshal(c.Input, &in)
		_ = c.Progress("working on "+in.Text, 1, 2)
		return exsdk.TextResult(strings.ToUpper(in.Text)), nil
	}))
	sess := h.session(t)
	h.m.push(mockTool(mockUse{ID: "toolu_1", Name: "upper", Input: `{"text":"hi"}`}, mockUse{ID: "toolu_2", Name: "upper", Input: `{"text":"yo"}`}), mockText("done"))
	mustReply(t, recv(t, goSend(loopCtx(t), sess, "go")), "done")

	reqs := h.m.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d provider requests", len(reqs))
	}
	if n := slices.Index(reqs[0].Tools, "upper"); n < 0 || slices.Index(reqs[0].Tools[n+1:], "upper") >= 0 {
		t.Fatalf("advertised tools %v: want upper once", reqs[0].Tools)
	}
	got := map[string]string{}
	for _, b := range toolResults(t, reqs[1]) {
		if b["is_error"] == true {
			t.Errorf("error result %v", b)
		}
		got[b["tool_use_id"].(string)] = blockText(b)
	}
	if diff := cmp.Diff(map[string]string{"toolu_1": "HI", "toolu_2": "YO"}, got); diff != "" {
		t.Fatalf("results the model got (-want +got):\n%s", diff)
	}

	evs := loopEvents(t, h.server, sess.ID)
	for _, ev := range ofType(evs, "tool.call") {
		if p := payload(t, ev); p["dispatch"] != "executor" {
			t.Errorf("tool.call %v", p)
		}
	}
	for _, use := range []string{"toolu_1", "toolu_2"} {
		var seq []string
		for _, ev := range evs {
			p := payload(t, ev)
			if p["tool_use_id"] != use && p["id"] != use {
				continue
			}
			switch ev.Type {
			case "executor.tool.call":
				if p["environment_id"] != h.env || p["tool"] != "upper" || !strings.HasPrefix(fmt.Sprint(p["tool_call_id"]), "call_") {
					t.Errorf("executor.tool.call %v", p)
				}
			case "executor.tool.progress":
				if !strings.HasPrefix(fmt.Sprint(p["message"]), "working on ") || p["progress"] != 1.0 || p["total"] != 2.0 {
					t.Errorf("executor.tool.progress %v", p)
				}
			case "executor.tool.result":
				if p["executor_id"] != "exe_round" || p["is_error"] != false || p["environment_id"] != h.env {
					t.Errorf("executor.tool.result %v", p)
				}
			case "tool.result":
				if p["dispatch"] != "executor" || p["is_error"] != false {
					t.Errorf("tool.result %v", p)
				}
			}
			seq = append(seq, ev.Type)
		}
		want := []string{"tool.call", "executor.tool.call", "executor.tool.progress", "executor.tool.result", "tool.result"}
		if diff := cmp.Diff(want, seq); diff != "" {
			t.Errorf("events of %s (-want +got):\n%s", use, diff)
		}
	}

	// Closing the session releases it on the executor.
	if err := sess.Close(loopCtx(t)); err != nil {
		t.Fatal(err)
	}
	h.net.waitFor(t, "session.stop", func() bool {
		return strings.Contains(h.net.read(), `"method":"session.stop","params":{"session_id":"`+sess.ID+`"`)
	})
}

// TestExecutorTwoInEnvironment: two executors of one environment share
// the sessions (least loaded first), and a tool both serve is advertised
// once.
func TestExecutorTwoInEnvironment(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "an executor's tools reach the other nodes within a third of the lease TTL, not at once")
	h := newHandsServer(t)
	who := func(name string) exsdk.Tool {
		return textTool("who", func(context.Context, exsdk.Call) (exsdk.Result, error) { return exsdk.TextResult(name), nil })
	}
	h.executor(t, "exe_1", who("one"))
	h.executor(t, "exe_2", who("two"))
	seen := map[string]int{}
	for i := range 2 {
		sess := h.session(t)
		for j := range 2 { // the second call reuses the session's executor
			h.m.push(mockTool(mockUse{ID: fmt.Sprintf("toolu_%d_%d", i, j), Name: "who"}), mockText("ok"))
			mustReply(t, recv(t, goSend(loopCtx(t), sess, "go")), "ok")
			reqs := h.m.requests()
			if n := strings.Count(strings.Join(reqs[len(reqs)-2].Tools, ","), "who"); n != 1 {
				t.Fatalf("who advertised %d times: %v", n, reqs[len(reqs)-2].Tools)
			}
			rs := toolResults(t, reqs[len(reqs)-1])
			if len(rs) != 1 {
				t.Fatalf("results %v", rs)
			}
			seen[fmt.Sprintf("session %d: %s", i, blockText(rs[0]))]++
		}
	}
	want := map[string]int{"session 0: one": 2, "session 1: two": 2}
	if diff := cmp.Diff(want, seen); diff != "" {
		t.Fatalf("who served what (-want +got):\n%s", diff)
	}
}

// TestExecutorToolWithoutExecutor: the executor that was advertised is
// gone when the model calls its tool: the model gets an error result
// that says so, and the turn goes on.
func TestExecutorToolWithoutExecutor(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "an executor's tools reach the other nodes within a third of the lease TTL, not at once")
	h := newHandsServer(t)
	e := h.executor(t, "exe_gone", textTool("lookup", func(context.Context, exsdk.Call) (exsdk.Result, error) {
		return exsdk.TextResult("never"), nil
	}))
	sess := h.session(t)
	reply, gate := mockTool(mockUse{ID: "toolu_1", Name: "lookup"}).gated()
	h.m.push(reply, mockText("sorry"))
	out := goSend(loopCtx(t), sess, "go")
	gate.wait(t)
	if err := e.Close(loopCtx(t)); err != nil {
		t.Fatal(err)
	}
	gate.open()
	mustReply(t, recv(t, out), "sorry")
	reqs := h.m.requests()
	if !slices.Contains(reqs[0].Tools, "lookup") {
		t.Fatalf("lookup was not advertised: %v", reqs[0].Tools)
	}
	rs := toolResults(t, reqs[1])
	want := "executor error: no executor of environment " + h.env + " serving tool 'lookup' is connected"
	if len(rs) != 1 || rs[0]["is_error"] != true || blockText(rs[0]) != want {
		t.Fatalf("results %v, want one error %q", rs, want)
	}
	if slices.Contains(h.m.requests()[1].Tools, "lookup") {
		t.Error("lookup still advertised without an executor")
	}
	res := ofType(loopEvents(t, h.server, sess.ID), "executor.tool.result")
	if len(res) != 1 || payload(t, res[0])["error"] == nil || payload(t, res[0])["executor_id"] != nil {
		t.Fatalf("executor.tool.result %v", res)
	}
}

// TestExecutorKilledMidCall: the executor's connection dies while its
// tool runs; the tool finishes offline, the executor reconnects and
// resumes, and the model gets exactly one result, from one run.
func TestExecutorKilledMidCall(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "an executor's tools reach the other nodes within a third of the lease TTL, not at once")
	h := newHandsServer(t)
	var runs atomic.Int32
	started, release := make(chan struct{}), make(chan struct{})
	h.executor(t, "exe_kill", textTool("slow", func(ctx context.Context, c exsdk.Call) (exsdk.Result, error) {
		if runs.Add(1) == 1 {
			close(started)
		}
		<-release
		return exsdk.TextResult("finished"), nil
	}))
	sess := h.session(t)
	h.m.push(mockTool(mockUse{ID: "toolu_1", Name: "slow"}), mockText("done"))
	out := goSend(loopCtx(t), sess, "go")
	<-started
	h.net.setRefuse(true)
	h.net.kill()
	close(release) // the result is held by the executor while it is away
	dials := h.net.dialCount()
	h.net.setRefuse(false)
	mustReply(t, recv(t, out), "done")

	if n := runs.Load(); n != 1 {
		t.Errorf("the tool ran %d times", n)
	}
	if h.net.dialCount() <= dials {
		t.Error("the executor did not reconnect")
	}
	rs := toolResults(t, h.m.requests()[1])
	if len(rs) != 1 || rs[0]["tool_use_id"] != "toolu_1" || blockText(rs[0]) != "finished" || rs[0]["is_error"] == true {
		t.Fatalf("results the model got: %v", rs)
	}
	if n := len(ofType(loopEvents(t, h.server, sess.ID), "tool.result")); n != 1 {
		t.Errorf("%d tool.result events", n)
	}
}

// TestExecutorLeaseExpiry: an executor that goes silent loses its lease;
// when it does not come back within the resume window the pending call
// fails and the model is told why.
func TestExecutorLeaseExpiry(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "an executor's tools reach the other nodes within a third of the lease TTL, not at once")
	h := newHandsServer(t, "BATON_EXECUTOR_HEARTBEAT_INTERVAL", "200ms", "BATON_EXECUTOR_RESUME_WINDOW", "300ms")
	started := make(chan struct{})
	h.executor(t, "exe_silent", textTool("wait", func(ctx context.Context, c exsdk.Call) (exsdk.Result, error) {
		close(started)
		<-ctx.Done()
		return exsdk.ErrorResult("stopped"), nil
	}))
	sess := h.session(t)
	h.m.push(mockTool(mockUse{ID: "toolu_1", Name: "wait"}), mockText("gave up"))
	out := goSend(loopCtx(t), sess, "go")
	<-started
	h.net.freeze()
	mustReply(t, recv(t, out), "gave up")
	rs := toolResults(t, h.m.requests()[1])
	want := "executor error: the executor running tool 'wait' disconnected and did not come back within 300ms"
	if len(rs) != 1 || rs[0]["is_error"] != true || blockText(rs[0]) != want {
		t.Fatalf("results %v, want %q", rs, want)
	}
}

// TestExecutorCredentialRevoked: revoking a credential closes its live
// connections with 4001, and an SDK executor using it stops for good.
func TestExecutorCredentialRevoked(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "revoking a credential closes its connections on the revoking node only")
	h := newHandsServer(t)
	e := h.executor(t, "exe_rev", textTool("x", func(context.Context, exsdk.Call) (exsdk.Result, error) { return exsdk.TextResult("x"), nil }))

	// A raw connection with a token of the same credential.
	ctx := loopCtx(t)
	tok := h.exchange("/v1/environments/"+h.env+"/token", h.secret)
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(h.clientURL, "http")+"/v1/executors/connect", &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + tok.Token}}, Subprotocols: []string{"bma.executor.v1.1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ws.CloseNow()
	reg := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"executor.register","params":{"protocol":"bma.executor.v1.1","environment_id":%q,"capabilities":{}}}`, h.env)
	if err := ws.Write(ctx, websocket.MessageText, []byte(reg)); err != nil {
		t.Fatal(err)
	}
	if _, b, err := ws.Read(ctx); err != nil || !strings.Contains(string(b), `"executor_id"`) {
		t.Fatalf("register: %s %v", b, err)
	}

	mustStatus(t, h.admin("DELETE", "/admin/v1/environments/"+h.env+"/credentials/"+h.credID, nil), 204)
	for {
		_, _, err := ws.Read(ctx)
		if err != nil {
			if code := websocket.CloseStatus(err); code != 4001 {
				t.Fatalf("closed with %d (%v), want 4001", code, err)
			}
			break
		}
	}
	select {
	case <-e.Done():
	case <-time.After(loopWait):
		t.Fatal("the SDK executor kept going with a revoked credential")
	}
	if e.Err() == nil {
		t.Error("the SDK executor stopped without saying why")
	}
}

// TestExecutorServerRestart: executors connected to a server that
// restarts are drained and closed with 1001, not retired: they reconnect
// to the restarted server and serve its sessions.
func TestExecutorServerRestart(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "an executor's tools reach the other nodes within a third of the lease TTL, not at once")
	h := newHandsServer(t)
	e := h.executor(t, "exe_restart", textTool("ping", func(context.Context, exsdk.Call) (exsdk.Result, error) {
		return exsdk.TextResult("pong"), nil
	}))
	roundTrip := func(s *server, sessionID, id string) string {
		t.Helper()
		hn, _ := loopHarness(t, s, h.profile)
		var sess *client.Session
		var err error
		if sessionID == "" {
			sess, err = hn.Connect(loopCtx(t))
		} else {
			sess, err = hn.Join(loopCtx(t), sessionID)
		}
		if err != nil {
			t.Fatal(err)
		}
		h.m.push(mockTool(mockUse{ID: id, Name: "ping"}), mockText("ok"))
		mustReply(t, recv(t, goSend(loopCtx(t), sess, "go")), "ok")
		reqs := h.m.requests()
		if rs := toolResults(t, reqs[len(reqs)-1]); len(rs) != 1 || blockText(rs[0]) != "pong" {
			t.Fatalf("results %v", rs)
		}
		return sess.ID
	}
	sid := roundTrip(h.server, "", "toolu_1")
	h.stop()
	if !strings.Contains(h.net.read(), `"method":"executor.drain"`) {
		t.Error("the executor was not drained at shutdown")
	}
	if strings.Contains(h.net.read(), `"method":"executor.close"`) {
		t.Error("the executor was retired (executor.close) at a restart")
	}
	dials := h.net.dialCount()
	s2 := runServer(t, h.dir, h.server.env)
	h.net.point(s2)
	h.net.waitFor(t, "a registration with the restarted server", func() bool {
		return h.net.dialCount() > dials && strings.Count(h.net.read(), `"connection_id"`) >= 2
	})
	// The same session goes on after the restart, on the same executor
	// and under the same session id there.
	roundTrip(s2, sid, "toolu_2")
	assign := `"method":"session.assign","params":{"session_id":"` + sid + `"`
	if n := strings.Count(h.net.read(), assign); n != 2 {
		t.Errorf("the session was assigned %d times, want once per server", n)
	}
	select {
	case <-e.Done():
		t.Fatalf("the executor stopped: %v", e.Err())
	default:
	}
	if e.ExecutorID() != "exe_restart" {
		t.Errorf("executor id %q after the restart", e.ExecutorID())
	}
}

// TestExecutorCallEnds: a call outliving BATON_EXECUTOR_CALL_TIMEOUT,
// and one whose turn is cancelled, end with an error result; either way
// the executor is told (tool.cancel) and its handler stops.
func TestExecutorCallEnds(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "an executor's tools reach the other nodes within a third of the lease TTL, not at once")
	h := newHandsServer(t, "BATON_EXECUTOR_CALL_TIMEOUT", "300ms")
	started, stopped := make(chan string, 2), make(chan string, 2)
	// The handler's own deadline (timeout_ms) ends with the server's; its
	// late result is held back until the server's outcome was checked, so
	// the two cannot race.
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	t.Cleanup(free) // also when the test fails before it frees the handler
	h.executor(t, "exe_ends", textTool("block", func(ctx context.Context, c exsdk.Call) (exsdk.Result, error) {
		started <- c.ID
		<-ctx.Done()
		stopped <- c.ID
		<-release
		return exsdk.ErrorResult("stopped"), nil
	}))
	sess := h.session(t)

	h.m.push(mockTool(mockUse{ID: "toolu_1", Name: "block"}), mockText("timed out"))
	mustReply(t, recv(t, goSend(loopCtx(t), sess, "go")), "timed out")
	rs := toolResults(t, h.m.requests()[1])
	if want := "executor error: tool 'block' did not finish within 300ms"; len(rs) != 1 || blockText(rs[0]) != want {
		t.Fatalf("results %v, want %q", rs, want)
	}
	if id := <-started; id != <-stopped {
		t.Fatalf("another call stopped")
	}
	free()

	h.m.push(mockTool(mockUse{ID: "toolu_2", Name: "block"}))
	out := goSend(loopCtx(t), sess, "again")
	id := <-started
	if err := sess.CancelTurn(loopCtx(t)); err != nil {
		t.Fatal(err)
	}
	mustReply(t, recv(t, out), "The turn was cancelled.")
	if got := <-stopped; got != id {
		t.Fatalf("stopped %s, want %s", got, id)
	}
	h.net.waitFor(t, "tool.cancel", func() bool {
		return strings.Contains(h.net.read(), `"method":"tool.cancel","params":{"session_id":"`+sess.ID+`","tool_call_id":"`+id+`"}`)
	})
	var last map[string]any
	for _, ev := range ofType(loopEvents(t, h.server, sess.ID), "executor.tool.result") {
		last = payload(t, ev)
	}
	if last["error"] != "the call to tool 'block' was cancelled" || last["tool_call_id"] != id {
		t.Fatalf("executor.tool.result %v", last)
	}
}

// TestExecutorHubConfig: the hub's durations come from the environment
// (Go durations or whole seconds), with defaults, and bad values are
// configuration errors that name the variable.
func TestExecutorHubConfig(t *testing.T) {
	t.Parallel()
	c, err := loadServeConfig(envFunc(map[string]string{}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := [3]time.Duration{c.Executor.HeartbeatInterval, c.Executor.ResumeWindow, c.Executor.CallTimeout}; got != [3]time.Duration{10 * time.Second, time.Minute, 2 * time.Minute} {
		t.Errorf("defaults %v", got)
	}
	c, err = loadServeConfig(envFunc(map[string]string{
		"BATON_EXECUTOR_HEARTBEAT_INTERVAL": "250ms", "BATON_EXECUTOR_RESUME_WINDOW": "5", "BATON_EXECUTOR_CALL_TIMEOUT": "1m30s",
	}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := [3]time.Duration{c.Executor.HeartbeatInterval, c.Executor.ResumeWindow, c.Executor.CallTimeout}; got != [3]time.Duration{250 * time.Millisecond, 5 * time.Second, 90 * time.Second} {
		t.Errorf("from the environment %v", got)
	}
	for _, name := range []string{"BATON_EXECUTOR_HEARTBEAT_INTERVAL", "BATON_EXECUTOR_RESUME_WINDOW", "BATON_EXECUTOR_CALL_TIMEOUT"} {
		for _, v := range []string{"0", "-1s", "soon"} {
			if _, err := loadServeConfig(envFunc(map[string]string{name: v}), nil); err == nil || !strings.Contains(err.Error(), name) {
				t.Errorf("%s=%q: %v", name, v, err)
			}
		}
	}
}
