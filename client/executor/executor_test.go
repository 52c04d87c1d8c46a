package executor

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/executor/proto"
)

func echoTool() Tool {
	return Tool{
		Def: ToolDef{Name: "echo", Description: "Echo the input", InputSchema: json.RawMessage(`{"type":"object"}`)},
		Handle: func(ctx context.Context, c Call) (Result, error) {
			return Result{Content: c.Input}, nil
		},
	}
}

func TestRegister(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.Tools = []Tool{echoTool(), {Def: ToolDef{Name: "bare"}, Handle: echoTool().Handle}}
	e, _, reg := h.start(t, cfg)

	if reg.ID == nil {
		t.Fatal("executor.register must be a request")
	}
	got := decode[map[string]any](t, reg.Params)
	want := map[string]any{
		"protocol":       "bma.executor.v1.1",
		"environment_id": testEnv,
		"capabilities": map[string]any{"tools": []any{
			map[string]any{"name": "echo", "description": "Echo the input", "input_schema": map[string]any{"type": "object"}},
			map[string]any{"name": "bare", "input_schema": map[string]any{"type": "object", "properties": map[string]any{}}},
		}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("register params (-want +got):\n%s", d)
	}
	if id := e.ExecutorID(); id != "exr_1" {
		t.Errorf("ExecutorID = %q, want exr_1", id)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if d := cmp.Diff([]string{"Bearer " + testCred}, h.tokenAuth); d != "" {
		t.Errorf("token exchange auth (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"/v1/environments/" + testEnv + "/token"}, h.tokenPaths); d != "" {
		t.Errorf("token path (-want +got):\n%s", d)
	}
}

func TestRegisterMachine(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.Scope = Machine("mch_1")
	cfg.Capabilities.Process = &ProcessCapability{MaxSessions: 2}
	_, _, reg := h.start(t, cfg)
	got := decode[map[string]any](t, reg.Params)
	want := map[string]any{
		"protocol":       "bma.executor.v1.1",
		"environment_id": "",
		"capabilities":   map[string]any{"process": map[string]any{"max_sessions": float64(2)}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("register params (-want +got):\n%s", d)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if d := cmp.Diff([]string{"/v1/machines/mch_1/token"}, h.tokenPaths); d != "" {
		t.Errorf("token path (-want +got):\n%s", d)
	}
}

func TestOpenRefusedCredential(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.Credential = CredentialPrefix + "wrong"
	var e *Executor
	var he *HTTPError
	// The refusal and the stop it causes are both ready when Open looks;
	// the refusal must win every time.
	for range 200 {
		var err error
		if e, err = New(cfg); err != nil {
			t.Fatal(err)
		}
		err = e.Open(context.Background())
		if !errors.As(err, &he) || he.Status != 401 || he.Code != "unauthorized" {
			t.Fatalf("Open = %v, want *HTTPError 401 unauthorized", err)
		}
	}
	if h.connections() != 0 {
		t.Errorf("connected %d times with a refused credential", h.connections())
	}
	if !errors.As(e.Err(), &he) {
		t.Errorf("Err = %v", e.Err())
	}
}

func TestOpenRegisterRefused(t *testing.T) {
	h := newHarness(t)
	h.answer("executor.register", func(json.RawMessage) (any, *RPCError) {
		return nil, rpcErr(CodeCapabilityMissing, "capability missing", map[string]string{"reason": "capability_missing", "capability": "process"})
	})
	e, err := New(h.config(t))
	if err != nil {
		t.Fatal(err)
	}
	err = e.Open(context.Background())
	var re *RegisterError
	if !errors.As(err, &re) || re.RPC.Code != CodeCapabilityMissing || re.RPC.Reason() != "capability_missing" {
		t.Fatalf("Open = %v, want *RegisterError -32012", err)
	}
	if n := h.connections(); n != 1 {
		t.Errorf("%d connections, want 1 (no retry)", n)
	}
}

func TestOpenRetriesUntilContext(t *testing.T) {
	h := newHarness(t)
	h.hold("executor.register", true) // the register never gets an answer
	cfg := h.config(t)
	cfg.WriteTimeout = 50 * time.Millisecond // bounds the register wait
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- e.Open(ctx) }()
	h.conn(t).next(t, "executor.register")
	h.conn(t).next(t, "executor.register") // it retried on a new connection
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Open = %v, want context.Canceled", err)
	}
	waitDone(t, e)
}

func TestConfigValidate(t *testing.T) {
	base := Config{BaseURL: "http://127.0.0.1:1", Credential: testCred, Scope: Environment("env_1")}
	for name, mod := range map[string]func(*Config){
		"no base":      func(c *Config) { c.BaseURL = "" },
		"ws base":      func(c *Config) { c.BaseURL = "ws://x" },
		"credential":   func(c *Config) { c.Credential = "bae_ext_x" },
		"scope kind":   func(c *Config) { c.Scope.Kind = "pool" },
		"scope id":     func(c *Config) { c.Scope.ID = "" },
		"agent":        func(c *Config) { c.Capabilities.Agent = &AgentCapability{} },
		"machine bare": func(c *Config) { c.Scope = Machine("mch_1") },
		"dup tool":     func(c *Config) { c.Tools = []Tool{echoTool(), echoTool()} },
		"no handle":    func(c *Config) { c.Tools = []Tool{{Def: ToolDef{Name: "x"}}} },
		"reserved":     func(c *Config) { c.Tools = []Tool{{Def: ToolDef{Name: ProcessExec}, Handle: echoTool().Handle}} },
	} {
		cfg := base
		mod(&cfg)
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted an invalid config", name)
		}
	}
	if _, err := New(base); err != nil {
		t.Errorf("valid config: %v", err)
	}
	m := base
	m.Scope, m.Process = Machine("mch_1"), &Shell{}
	if _, err := New(m); err != nil {
		t.Errorf("machine with a Process handler: %v", err)
	}
}

func TestHeartbeat(t *testing.T) {
	h := newHarness(t)
	h.set(func(h *fakeHarness) { h.heartbeatMS = 10 })
	cfg := h.config(t)
	gate := make(chan struct{})
	cfg.Tools = []Tool{{Def: ToolDef{Name: "wait"}, Handle: func(ctx context.Context, c Call) (Result, error) {
		<-gate
		return TextResult("done"), nil
	}}}
	cfg.Capabilities.Process = &ProcessCapability{}
	e, fc, _ := h.start(t, cfg)

	hb := decode[proto.HeartbeatParams](t, fc.next(t, "executor.heartbeat").Params)
	if d := cmp.Diff(proto.HeartbeatParams{ActiveSessions: []string{}, Load: &proto.Load{}}, hb); d != "" {
		t.Errorf("idle heartbeat (-want +got):\n%s", d)
	}
	fc.result(t, "session.assign", map[string]any{"session_id": "ses_1", "epoch": 1, "metadata": map[string]any{"source": "harness"}}, nil)
	fc.result(t, "tool.call", map[string]any{"session_id": "ses_1", "tool_call_id": "call_1", "name": "wait", "input": map[string]any{}}, nil)
	fc.until(t, "executor.heartbeat", func(f *proto.Frame) bool {
		hb := decode[proto.HeartbeatParams](t, f.Params)
		return cmp.Equal(proto.HeartbeatParams{ActiveSessions: []string{"ses_1"}, Load: &proto.Load{RunningTools: 1}}, hb)
	})
	close(gate)
	fc.next(t, "tool.result")
	fc.until(t, "executor.heartbeat", func(f *proto.Frame) bool {
		hb := decode[proto.HeartbeatParams](t, f.Params)
		return cmp.Equal(proto.HeartbeatParams{ActiveSessions: []string{"ses_1"}, Load: &proto.Load{RunningTools: 0}}, hb)
	})

	if e.Draining() {
		t.Fatal("draining before the harness asked")
	}
	h.set(func(h *fakeHarness) { h.drain = true })
	select {
	case <-h.drained:
	case <-time.After(patience):
		t.Fatal("no heartbeat was answered drain:true")
	}
	// Heartbeats are sequential and answered before they are queued here:
	// after a flush the next one may be the drain:true one, the one after
	// it was sent once the executor had read that answer.
	fc.flush()
	fc.next(t, "executor.heartbeat")
	fc.next(t, "executor.heartbeat")
	if !e.Draining() {
		t.Fatal("heartbeat drain:true did not drain")
	}
	rerr := fc.rpcError(t, "session.assign", map[string]any{"session_id": "ses_2", "epoch": 1, "metadata": map[string]any{"source": "harness"}})
	if rerr.Code != CodeOverCapacity || rerr.Reason() != "draining" {
		t.Errorf("assign while draining = %v, want -32009 draining", rerr)
	}
}

func TestTokenRefresh(t *testing.T) {
	h := newHarness(t)
	h.set(func(h *fakeHarness) { h.tokenTTL = 400 * time.Millisecond })
	_, fc, _ := h.start(t, h.config(t))

	// RefreshBefore (5m) exceeds the token's life, so the refresh comes at
	// half of it: well before expiry.
	f := fc.next(t, "executor.token.refresh")
	p := decode[map[string]string](t, f.Params)
	h.mu.Lock()
	issued := append([]string(nil), h.issued...)
	auth := append([]string(nil), h.tokenAuth...)
	h.mu.Unlock()
	if len(issued) < 2 || p["token"] != issued[1] {
		t.Fatalf("refresh sent %q, issued %v", p["token"], issued)
	}
	for _, a := range auth {
		if a != "Bearer "+testCred {
			t.Errorf("token exchange with %q, want the original credential", a)
		}
	}
	// The answer moved the deadline: the next refresh follows.
	f = fc.next(t, "executor.token.refresh")
	if p := decode[map[string]string](t, f.Params); p["token"] == issued[1] {
		t.Errorf("second refresh reused %q", p["token"])
	}
	if h.connections() != 1 {
		t.Errorf("refresh reconnected: %d connections", h.connections())
	}
}

func TestTokenRefreshUnsupported(t *testing.T) {
	h := newHarness(t)
	h.set(func(h *fakeHarness) { h.tokenTTL = 200 * time.Millisecond })
	h.answer("executor.token.refresh", func(json.RawMessage) (any, *RPCError) {
		return nil, rpcErr(CodeMethodNotFound, "method not found", nil)
	})
	_, fc, _ := h.start(t, h.config(t))
	fc.next(t, "executor.token.refresh")
	// The harness then closes with 4001 at expiry; the executor reconnects
	// with a fresh token.
	_ = fc.ws.Close(proto.CloseTokenExpired, "token expired")
	fc2 := h.conn(t)
	fc2.next(t, "executor.register")
}

func TestCloseCodes(t *testing.T) {
	for _, tc := range []struct {
		name      string
		close     func(fc *fakeConn, t *testing.T)
		reconnect bool
		code      int
		notified  bool
	}{
		{name: "drop", close: func(fc *fakeConn, _ *testing.T) { _ = fc.ws.CloseNow() }, reconnect: true},
		{name: "1001", close: func(fc *fakeConn, _ *testing.T) { _ = fc.ws.Close(proto.CloseGoingAway, "restart") }, reconnect: true},
		{name: "4001", close: func(fc *fakeConn, _ *testing.T) { _ = fc.ws.Close(proto.CloseTokenExpired, "expired") }, reconnect: true},
		{name: "4008", close: func(fc *fakeConn, _ *testing.T) { _ = fc.ws.Close(proto.CloseLeaseExpired, "lease") }, reconnect: true},
		{name: "4003", close: func(fc *fakeConn, _ *testing.T) { _ = fc.ws.Close(proto.CloseProtocolMismatch, "mismatch") }, code: 4003},
		{name: "executor.close", close: func(fc *fakeConn, t *testing.T) {
			fc.send(t, `{"jsonrpc":"2.0","method":"executor.close","params":{"reason":"retired"}}`)
			_ = fc.ws.Close(websocket.StatusGoingAway, "bye")
		}, code: 1001, notified: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t)
			e, fc, _ := h.start(t, h.config(t))
			tc.close(fc, t)
			if tc.reconnect {
				fc2 := h.conn(t)
				reg := decode[proto.RegisterParams](t, fc2.next(t, "executor.register").Params)
				if reg.Resume == nil || reg.Resume.ExecutorID != "exr_1" {
					t.Errorf("reconnect register resume = %+v", reg.Resume)
				}
				return
			}
			waitDone(t, e)
			var ce *CloseError
			if !errors.As(e.Err(), &ce) || ce.Code != tc.code || ce.Notified != tc.notified {
				t.Fatalf("Err = %v, want CloseError %d notified=%v", e.Err(), tc.code, tc.notified)
			}
			if n := h.connections(); n != 1 {
				t.Errorf("%d connections after a final close", n)
			}
		})
	}
}

func TestClose(t *testing.T) {
	h := newHarness(t)
	e, fc, _ := h.start(t, h.config(t))
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	f := fc.next(t, "executor.close")
	if f.ID != nil {
		t.Error("executor.close must be a notification")
	}
	if code := websocket.CloseStatus(fc.closed(t)); code != websocket.StatusNormalClosure {
		t.Errorf("close code %d, want 1000", code)
	}
	if e.Err() != nil {
		t.Errorf("Err after Close = %v", e.Err())
	}
	if n := h.connections(); n != 1 {
		t.Errorf("%d connections: reconnected after Close", n)
	}
}

func TestReconnectResendsInOrder(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	gate := make(chan struct{})
	cfg.Tools = []Tool{echoTool(), {Def: ToolDef{Name: "gated"}, Handle: func(ctx context.Context, c Call) (Result, error) {
		<-gate
		return TextResult("late"), nil
	}}}
	_, fc, _ := h.start(t, cfg)
	fc.result(t, "session.assign", map[string]any{"session_id": "ses_1", "epoch": 7, "metadata": map[string]any{"source": "harness"}}, nil)

	h.hold("tool.result", true)
	first := map[string]json.RawMessage{}
	for _, id := range []string{"call_a", "call_b"} {
		fc.result(t, "tool.call", map[string]any{"session_id": "ses_1", "tool_call_id": id, "name": "echo", "input": map[string]string{"id": id}}, nil)
		f := fc.next(t, "tool.result")
		first[decode[proto.ToolResultParams](t, f.Params).ToolCallID] = f.ID
	}
	fc.result(t, "tool.call", map[string]any{"session_id": "ses_1", "tool_call_id": "call_c", "name": "gated", "input": map[string]any{}}, nil)
	_ = fc.ws.CloseNow()
	close(gate) // call_c finishes while (or after) the connection is down

	h.hold("tool.result", false)
	fc2 := h.conn(t)
	reg := decode[proto.RegisterParams](t, fc2.next(t, "executor.register").Params)
	want := &proto.Resume{ExecutorID: "exr_1", ActiveSessions: []proto.SessionEpoch{{SessionID: "ses_1", Epoch: 7}}}
	if d := cmp.Diff(want, reg.Resume); d != "" {
		t.Errorf("resume (-want +got):\n%s", d)
	}
	var order []string
	for range 3 {
		f := fc2.next(t, "tool.result")
		id := decode[proto.ToolResultParams](t, f.Params).ToolCallID
		order = append(order, id)
		if old, ok := first[id]; ok && string(old) != string(f.ID) {
			t.Errorf("%s re-sent with id %s, first sent with %s", id, f.ID, old)
		}
	}
	// Something new after the resend comes after it.
	fc2.result(t, "tool.call", map[string]any{"session_id": "ses_1", "tool_call_id": "call_d", "name": "echo", "input": map[string]any{}}, nil)
	f := fc2.next(t, "tool.result")
	order = append(order, decode[proto.ToolResultParams](t, f.Params).ToolCallID)
	if d := cmp.Diff([]string{"call_a", "call_b", "call_c", "call_d"}, order); d != "" {
		t.Errorf("tool.result order (-want +got):\n%s", d)
	}
	fc2.barrier(t)
}

func TestBackoff(t *testing.T) {
	lo, hi := 100*time.Millisecond, time.Second
	for n, want := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		want *= time.Millisecond
		if want > hi {
			want = hi
		}
		for range 50 {
			d := backoff(n, lo, hi)
			if d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %s, want in [%s, %s]", n, d, want/2, want)
			}
		}
	}
}

func TestRefreshDelay(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, tc := range []struct {
		left, before, want time.Duration
	}{
		{time.Hour, 5 * time.Minute, 55 * time.Minute},
		{4 * time.Minute, 5 * time.Minute, 2 * time.Minute},
		{0, time.Minute, 0},
		{-time.Minute, time.Minute, 0},
	} {
		if got := refreshDelay(now, now.Add(tc.left), tc.before); got != tc.want {
			t.Errorf("refreshDelay(%s left, %s before) = %s, want %s", tc.left, tc.before, got, tc.want)
		}
	}
}

func TestMalformedFrames(t *testing.T) {
	h := newHarness(t)
	_, fc, _ := h.start(t, h.config(t))
	for _, tc := range []struct {
		msg  string
		code int
	}{
		{`not json`, CodeParseError},
		{`{"jsonrpc":"2.0","id":1}`, CodeInvalidRequest},
		{`{"jsonrpc":"2.0","method":5}`, CodeInvalidRequest},
	} {
		fc.send(t, tc.msg)
		f := await(t, fc.nulls, "the error answer to "+tc.msg)
		if f.Error == nil || f.Error.Code != tc.code {
			t.Errorf("answer to %s = %+v, want %d", tc.msg, f.Error, tc.code)
		}
	}
	// An unknown notification is ignored; the connection carries on.
	fc.send(t, `{"jsonrpc":"2.0","method":"something.new","params":{}}`)
	fc.barrier(t)
	// A malformed request that names its id gets the answer under it.
	if rerr := fc.rpcError(t, "tool.call", "a string"); rerr.Code != CodeInvalidRequest {
		t.Errorf("tool.call with string params = %v", rerr)
	}
	if rerr := fc.rpcError(t, "tool.call", []int{1}); rerr.Code != CodeInvalidParams {
		t.Errorf("tool.call with array params = %v", rerr)
	}
}

func TestRefusedHeldRequestDropped(t *testing.T) {
	h := newHarness(t)
	h.answer("tool.result", func(json.RawMessage) (any, *RPCError) {
		return nil, rpcErr(CodeConflict, "stale epoch", nil)
	})
	cfg := h.config(t)
	cfg.Tools = []Tool{echoTool()}
	e, fc, _ := h.start(t, cfg)
	fc.result(t, "tool.call", callParams("c1", "echo", nil), nil)
	fc.next(t, "tool.result")
	fc.barrier(t)
	if n := e.out.held(); n != 0 {
		t.Errorf("%d requests still held after the harness refused the result", n)
	}
}

func TestSessionStatus(t *testing.T) {
	h := newHarness(t)
	e, fc, _ := h.start(t, h.config(t))
	if err := e.SessionStatus("ses_1", StatusRunning, "tool_running"); err != nil {
		t.Fatal(err)
	}
	f := fc.next(t, "session.status")
	if d := cmp.Diff(map[string]string{"session_id": "ses_1", "status": "running", "detail": "tool_running"}, decode[map[string]string](t, f.Params)); d != "" || f.ID != nil {
		t.Errorf("session.status (-want +got):\n%s", d)
	}
}
