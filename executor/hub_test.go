package executor

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
)

func TestConnectRejectedBeforeUpgrade(t *testing.T) {
	e := newEnv(t)
	good := e.envToken("env_1", "cred_1")
	expired := e.tokens.add("bae_ext_old", baton.ExecutorGrant{Scope: baton.ExecutorScopeEnvironment, EnvironmentID: "env_1", CredentialID: "cred_1", ExpiresAt: t0.Add(-time.Second)})
	httpURL := "http" + strings.TrimPrefix(e.url, "ws")
	tests := []struct {
		name     string
		auth     string
		protocol string
		status   int
		code     string
	}{
		{"no authorization", "", proto.SubprotocolV11, http.StatusUnauthorized, "unauthorized"},
		{"not bearer", "Basic abc", proto.SubprotocolV11, http.StatusUnauthorized, "unauthorized"},
		{"unknown token", "Bearer bae_ext_nope", proto.SubprotocolV11, http.StatusUnauthorized, "unauthorized"},
		{"expired token", "Bearer " + expired, proto.SubprotocolV11, http.StatusUnauthorized, "unauthorized"},
		{"no subprotocol", "Bearer " + good, "", http.StatusBadRequest, "invalid_request"},
		{"foreign subprotocol", "Bearer " + good, "graphql-ws, bma.executor.v2", http.StatusBadRequest, "invalid_request"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, httpURL, nil)
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "websocket")
			req.Header.Set("Sec-WebSocket-Version", "13")
			req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			if tc.protocol != "" {
				req.Header.Set("Sec-WebSocket-Protocol", tc.protocol)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var body struct {
				Error struct{ Code, Message string } `json:"error"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
				t.Fatalf("status %d, body not the /v1 envelope: %v", resp.StatusCode, err)
			}
			if resp.StatusCode != tc.status || body.Error.Code != tc.code || body.Error.Message == "" {
				t.Fatalf("got %d %+v, want %d %s", resp.StatusCode, body.Error, tc.status, tc.code)
			}
		})
	}
}

func TestSubprotocolNegotiation(t *testing.T) {
	e := newEnv(t)
	tok := e.envToken("env_1", "cred_1")
	// Both offered: v1.1 wins.
	x := e.dial(t, tok, proto.SubprotocolV1, proto.SubprotocolV11)
	if got := x.ws.Subprotocol(); got != proto.SubprotocolV11 {
		t.Fatalf("negotiated %q", got)
	}
	// Only v1: the register must say v1.
	y := e.dial(t, tok, proto.SubprotocolV1)
	if got := y.ws.Subprotocol(); got != proto.SubprotocolV1 {
		t.Fatalf("negotiated %q", got)
	}
	y.register(proto.RegisterParams{Protocol: proto.SubprotocolV1, EnvironmentID: "env_1", Capabilities: tools("grep")})
}

func TestProtocolMismatch(t *testing.T) {
	e := newEnv(t)
	x := e.dial(t, e.envToken("env_1", "cred_1"), proto.SubprotocolV1)
	err := x.fails(proto.MethodRegister, proto.RegisterParams{Protocol: proto.SubprotocolV11, EnvironmentID: "env_1"})
	if err.Code != proto.CodeProtocolMismatch {
		t.Fatalf("got %v, want -32010", err)
	}
	if code := x.closed(); code != proto.CloseProtocolMismatch {
		t.Fatalf("close %d, want 4003", code)
	}
}

func TestFirstFrameMustBeRegister(t *testing.T) {
	e := newEnv(t)
	tok := e.envToken("env_1", "cred_1")
	x := e.dial(t, tok)
	if err := x.fails(proto.MethodHeartbeat, proto.HeartbeatParams{}); err.Code != proto.CodeInvalidRequest ||
		err.Message != "Invalid Request: the first frame must be executor.register" {
		t.Fatalf("got %v, want -32600", err)
	}
	if code := x.closed(); code != proto.CloseProtocolError {
		t.Fatalf("close %d, want 4002", code)
	}
	// A notification first is just as wrong: its error has id null.
	y := e.dial(t, tok)
	y.notify(proto.MethodCapabilitiesUpdate, proto.CapabilitiesUpdateParams{})
	if f := y.next(); f.Error == nil || f.Error.Code != proto.CodeInvalidRequest || string(f.ID) != "null" {
		t.Fatalf("answer to a notification first: %+v", f)
	}
	if code := y.closed(); code != proto.CloseProtocolError {
		t.Fatalf("close %d, want 4002", code)
	}
}

// TestBadFirstFrame: whatever the first message is, unless it is a
// well-formed executor.register, it is answered with an error and the
// connection is closed with 4002 (bma.executor.v1.1 "First frame") — also
// when the peer's decoder, not the connection, is the one to refuse it.
func TestBadFirstFrame(t *testing.T) {
	e := newEnv(t)
	tok := e.envToken("env_1", "cred_1")
	tests := []struct {
		name   string
		binary bool
		msg    string
		code   int
		id     string
	}{
		{"not JSON", false, `{nope`, proto.CodeParseError, "null"},
		{"wrong jsonrpc version", false, `{"jsonrpc":"1.0","id":7,"method":"executor.register","params":{}}`, proto.CodeInvalidRequest, "7"},
		{"not an object", false, `[1,2]`, proto.CodeInvalidRequest, "null"},
		{"a response", false, `{"jsonrpc":"2.0","id":1,"result":{}}`, proto.CodeInvalidRequest, "null"},
		{"an error response", false, `{"jsonrpc":"2.0","id":null,"error":{"code":-32600,"message":"x"}}`, proto.CodeInvalidRequest, "null"},
		{"a malformed response", false, `{"jsonrpc":"2.0","id":1,"result":{},"error":{}}`, proto.CodeInvalidRequest, "null"},
		{"binary", true, `{"jsonrpc":"2.0","id":1,"method":"executor.register","params":{}}`, proto.CodeInvalidRequest, "null"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			x := e.dial(t, tok)
			typ := websocket.MessageText
			if tc.binary {
				typ = websocket.MessageBinary
			}
			ch := make(chan *proto.Frame, 1)
			if tc.id != "null" { // waited for before the answer can come
				x.mu.Lock()
				x.waiting[tc.id] = ch
				x.mu.Unlock()
			}
			if err := x.ws.Write(context.Background(), typ, []byte(tc.msg)); err != nil {
				t.Fatal(err)
			}
			var f *proto.Frame
			if tc.id == "null" {
				f = x.next() // answers with id null come as surprises
			} else {
				select {
				case f = <-ch:
				case <-x.done:
					select {
					case f = <-ch:
					default:
						t.Fatalf("closed without an answer: %v", x.err)
					}
				case <-time.After(guard):
					t.Fatal("no answer")
				}
			}
			if f.Error == nil || f.Error.Code != tc.code || string(f.ID) != tc.id {
				t.Fatalf("answer id %s error %+v, want %d with id %s", f.ID, f.Error, tc.code, tc.id)
			}
			if code := x.closed(); code != proto.CloseProtocolError {
				t.Fatalf("close %d, want 4002", code)
			}
		})
	}
}

func TestMachineWithoutProcessOrAgent(t *testing.T) {
	e := newEnv(t)
	x := e.dial(t, e.machineToken("mch_1", "cred_m"))
	err := x.fails(proto.MethodRegister, proto.RegisterParams{Protocol: proto.SubprotocolV11, Capabilities: tools("grep")})
	d := err.Detail()
	if err.Code != proto.CodeCapabilityMissing || d.Reason != "capability_missing" || d.Capability != "process" {
		t.Fatalf("got %v %+v", err, d)
	}
	if got := e.hub.Executors(Target{}); len(got) != 0 {
		t.Fatalf("registry after a refused register: %+v", got)
	}
	// Still unregistered: anything but register closes it, saying so; a
	// corrected register succeeds.
	y := e.dial(t, e.machineToken("mch_1", "cred_m"))
	y.fails(proto.MethodRegister, proto.RegisterParams{Protocol: proto.SubprotocolV11, Capabilities: tools("grep")})
	if err := y.fails(proto.MethodHeartbeat, proto.HeartbeatParams{}); err.Code != proto.CodeInvalidRequest ||
		err.Message != "Invalid Request: the connection is not registered; executor.register must succeed first" {
		t.Fatalf("heartbeat after a refused register: %v", err)
	}
	if code := y.closed(); code != proto.CloseProtocolError {
		t.Fatalf("close %d, want 4002", code)
	}
	res := x.register(proto.RegisterParams{Capabilities: proto.Capabilities{Process: &proto.ProcessCapability{MaxSessions: 2}}})
	info, ok := e.hub.Executor(res.ExecutorID)
	if !ok || info.Scope != baton.ExecutorScopeMachine || info.MachineID != "mch_1" || info.Capabilities.Process.MaxSessions != 2 {
		t.Fatalf("registry: %+v %v", info, ok)
	}
}

func TestRegisterScope(t *testing.T) {
	e := newEnv(t)
	x := e.dial(t, e.envToken("env_1", "cred_1"))
	if err := x.fails(proto.MethodRegister, proto.RegisterParams{Protocol: proto.SubprotocolV11, EnvironmentID: "env_2"}); err.Code != proto.CodeForbidden {
		t.Fatalf("foreign environment: %v", err)
	}
	y := e.dial(t, e.machineToken("mch_1", "cred_m"))
	if err := y.fails(proto.MethodRegister, proto.RegisterParams{Protocol: proto.SubprotocolV11, EnvironmentID: "env_1",
		Capabilities: proto.Capabilities{Process: &proto.ProcessCapability{}}}); err.Code != proto.CodeForbidden {
		t.Fatalf("machine naming an environment: %v", err)
	}
	// An executor id is the scope's: another environment cannot take it.
	x.register(proto.RegisterParams{ExecutorID: "exe_a", EnvironmentID: "env_1"})
	z := e.dial(t, e.envToken("env_2", "cred_2"))
	if err := z.fails(proto.MethodRegister, proto.RegisterParams{Protocol: proto.SubprotocolV11, ExecutorID: "exe_a", EnvironmentID: "env_2"}); err.Code != proto.CodeForbidden {
		t.Fatalf("foreign executor id: %v", err)
	}
	if err := x.fails(proto.MethodRegister, proto.RegisterParams{Protocol: proto.SubprotocolV11, EnvironmentID: "env_1"}); err.Code != proto.CodeInvalidRequest {
		t.Fatalf("second register: %v", err)
	}
}

func TestRegisterResultAndRegistry(t *testing.T) {
	e := newEnv(t)
	x := e.dial(t, e.envToken("env_1", "cred_1"))
	caps := proto.Capabilities{Tools: []proto.ToolDef{{Name: "grep", InputSchema: json.RawMessage(`{"type":"object"}`)}}}
	res := x.register(proto.RegisterParams{EnvironmentID: "env_1", Capabilities: caps})
	if !strings.HasPrefix(res.ExecutorID, "exe_") || !strings.HasPrefix(res.ConnectionID, "con_") {
		t.Fatalf("ids: %+v", res)
	}
	want := proto.RegisterResult{ExecutorID: res.ExecutorID, ConnectionID: res.ConnectionID, HeartbeatIntervalMS: 10000,
		LeaseExpiresAt: t0.Add(2 * interval), TokenExpiresAt: t0.Add(time.Hour)}
	if diff := cmp.Diff(want, res); diff != "" {
		t.Fatalf("register result (-want +got):\n%s", diff)
	}
	// The tool was declared with "parameters" by another executor.
	y := e.dial(t, e.machineToken("mch_1", "cred_m"))
	y.ok(proto.MethodRegister, json.RawMessage(`{"protocol":"bma.executor.v1.1","executor_id":"exe_m","environment_id":"","capabilities":{"process":{"max_sessions":1},"tools":[{"name":"sh","parameters":{"type":"object"}}]}}`), nil)

	ids := func(infos []Info) []string {
		var out []string
		for _, in := range infos {
			out = append(out, in.ID)
		}
		return out
	}
	tests := []struct {
		target Target
		want   []string
	}{
		{Target{}, []string{res.ExecutorID, "exe_m"}},
		{Target{EnvironmentID: "env_1"}, []string{res.ExecutorID}},
		{Target{EnvironmentID: "env_1", Tool: "grep"}, []string{res.ExecutorID}},
		{Target{EnvironmentID: "env_1", Tool: "sed"}, nil},
		{Target{MachineID: "mch_1", Capability: CapabilityProcess}, []string{"exe_m"}},
		{Target{MachineID: "mch_1", Capability: CapabilityAgent}, nil},
		{Target{Tool: "sh"}, []string{"exe_m"}},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, ids(e.hub.Executors(tc.target))); diff != "" {
			t.Errorf("Executors(%+v) (-want +got):\n%s", tc.target, diff)
		}
	}
	m, _ := e.hub.Executor("exe_m")
	if !m.Connected || m.Protocol != proto.SubprotocolV11 || string(m.Capabilities.Tools[0].InputSchema) != `{"type":"object"}` || m.TokenExpiresAt != t0.Add(time.Hour) {
		t.Fatalf("info: %+v", m)
	}
}

func TestHeartbeatAndLeaseExpiry(t *testing.T) {
	e := newEnv(t)
	x := e.dial(t, e.envToken("env_1", "cred_1"))
	res := x.register(proto.RegisterParams{EnvironmentID: "env_1"})
	e.clock.Advance(15 * time.Second)
	var hb proto.HeartbeatResult
	x.ok(proto.MethodHeartbeat, proto.HeartbeatParams{ActiveSessions: []string{}, Load: &proto.Load{RunningTools: 3}}, &hb)
	if want := t0.Add(15*time.Second + 2*interval); !hb.LeaseExpiresAt.Equal(want) || hb.Drain {
		t.Fatalf("heartbeat %+v, want lease %v", hb, want)
	}
	// The first lease would have ended at 20s; the renewed one ends at 35s.
	e.clock.Advance(19 * time.Second)
	if info, _ := e.hub.Executor(res.ExecutorID); !info.Connected || info.RunningTools != 3 {
		t.Fatalf("expired early: %+v", info)
	}
	e.clock.Advance(time.Second)
	if code := x.closed(); code != proto.CloseLeaseExpired {
		t.Fatalf("close %d, want 4008", code)
	}
	if _, ok := e.hub.Executor(res.ExecutorID); ok {
		t.Fatal("an executor without sessions stays in the registry after its lease")
	}
}

func TestRegisterWithinOneLease(t *testing.T) {
	e := newEnv(t)
	x := e.dial(t, e.envToken("env_1", "cred_1"))
	e.clock.WaitArmed(t, 2*interval)
	e.clock.Advance(2 * interval)
	if code := x.closed(); code != proto.CloseLeaseExpired {
		t.Fatalf("close %d, want 4008", code)
	}
}

func TestTokenDeadline(t *testing.T) {
	e := newEnv(t, longLeases)
	x := e.dial(t, e.envToken("env_1", "cred_1"))
	x.register(proto.RegisterParams{EnvironmentID: "env_1"})
	e.clock.Advance(time.Hour - time.Millisecond)
	x.ok(proto.MethodHeartbeat, proto.HeartbeatParams{}, nil)
	e.clock.Advance(time.Millisecond)
	if code := x.closed(); code != proto.CloseTokenExpired {
		t.Fatalf("close %d, want 4001", code)
	}
}

func TestTokenRefresh(t *testing.T) {
	e := newEnv(t, longLeases)
	x := e.dial(t, e.envToken("env_1", "cred_1"))
	x.register(proto.RegisterParams{EnvironmentID: "env_1"})
	fresh := e.tokens.add("bae_ext_fresh", baton.ExecutorGrant{Scope: baton.ExecutorScopeEnvironment, EnvironmentID: "env_1", CredentialID: "cred_1", ExpiresAt: t0.Add(3 * time.Hour)})
	var res proto.TokenRefreshResult
	x.ok(proto.MethodTokenRefresh, proto.TokenRefreshParams{Token: fresh}, &res)
	if !res.ExpiresAt.Equal(t0.Add(3 * time.Hour)) {
		t.Fatalf("expires_at %v", res.ExpiresAt)
	}
	e.clock.Advance(2 * time.Hour) // past the first token
	x.ok(proto.MethodHeartbeat, proto.HeartbeatParams{}, nil)
	e.clock.Advance(time.Hour)
	if code := x.closed(); code != proto.CloseTokenExpired {
		t.Fatalf("close %d, want 4001", code)
	}
}

func TestTokenRefreshRejected(t *testing.T) {
	e := newEnv(t, longLeases)
	x := e.dial(t, e.envToken("env_1", "cred_1"))
	x.register(proto.RegisterParams{EnvironmentID: "env_1"})
	late := t0.Add(5 * time.Hour)
	foreign := []string{
		e.tokens.add("bae_ext_othercred", baton.ExecutorGrant{Scope: baton.ExecutorScopeEnvironment, EnvironmentID: "env_1", CredentialID: "cred_2", ExpiresAt: late}),
		e.tokens.add("bae_ext_otherenv", baton.ExecutorGrant{Scope: baton.ExecutorScopeEnvironment, EnvironmentID: "env_2", CredentialID: "cred_1", ExpiresAt: late}),
		e.tokens.add("bae_ext_machine", baton.ExecutorGrant{Scope: baton.ExecutorScopeMachine, MachineID: "mch_1", CredentialID: "cred_1", ExpiresAt: late}),
		"bae_ext_unknown",
	}
	for _, tok := range foreign {
		if err := x.fails(proto.MethodTokenRefresh, proto.TokenRefreshParams{Token: tok}); err.Code != proto.CodeForbidden {
			t.Fatalf("%s: %v, want -32001", tok, err)
		}
	}
	if err := x.fails(proto.MethodTokenRefresh, proto.TokenRefreshParams{}); err.Code != proto.CodeInvalidParams {
		t.Fatalf("empty token: %v", err)
	}
	e.clock.Advance(time.Hour) // the old deadline still holds
	if code := x.closed(); code != proto.CloseTokenExpired {
		t.Fatalf("close %d, want 4001", code)
	}
}

func TestRevokeCredential(t *testing.T) {
	e := newEnv(t)
	a1 := e.dial(t, e.envToken("env_1", "cred_a"))
	a1.register(proto.RegisterParams{EnvironmentID: "env_1"})
	a2 := e.dial(t, e.envToken("env_1", "cred_a")) // not registered yet: closed too
	b := e.dial(t, e.envToken("env_1", "cred_b"))
	b.register(proto.RegisterParams{EnvironmentID: "env_1"})
	var revoker baton.ExecutorRevoker = e.hub
	revoker.RevokeCredential("cred_a")
	for _, x := range []*texec{a1, a2} {
		if code := x.closed(); code != proto.CloseTokenExpired {
			t.Fatalf("close %d, want 4001", code)
		}
	}
	b.ok(proto.MethodHeartbeat, proto.HeartbeatParams{}, nil)
}

func TestDrain(t *testing.T) {
	e := newEnv(t)
	x := e.dial(t, e.envToken("env_1", "cred_1"))
	x.register(proto.RegisterParams{EnvironmentID: "env_1", Capabilities: tools("grep")})
	errc := make(chan error, 1)
	go func() { errc <- e.hub.Drain(context.Background(), "maintenance") }()
	var p proto.Reason
	f := x.expect(proto.MethodDrain, &p)
	if p.Reason != "maintenance" {
		t.Fatalf("drain reason %q", p.Reason)
	}
	x.reply(f, proto.DrainResult{ActiveSessions: []string{}})
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	var hb proto.HeartbeatResult
	x.ok(proto.MethodHeartbeat, proto.HeartbeatParams{}, &hb)
	if !hb.Drain {
		t.Fatal("heartbeat does not say drain:true while draining")
	}
	if _, err := e.hub.Assign(context.Background(), Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1"}); !errors.Is(err, ErrDraining) {
		t.Fatalf("assign while draining: %v", err)
	}
}

func TestCloseDrainsThenGoesAway(t *testing.T) {
	e := newEnv(t)
	x := e.dial(t, e.envToken("env_1", "cred_1"))
	x.register(proto.RegisterParams{EnvironmentID: "env_1"})
	errc := make(chan error, 1)
	go func() { errc <- e.hub.Close(context.Background()) }()
	x.reply(x.expect(proto.MethodDrain, nil), proto.DrainResult{ActiveSessions: []string{}})
	var p proto.Reason
	x.expect(proto.MethodClose, &p)
	if p.Reason != "shutdown" {
		t.Fatalf("executor.close reason %q", p.Reason)
	}
	if code := x.closed(); code != proto.CloseGoingAway {
		t.Fatalf("close %d, want 1001", code)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if _, err := e.hub.Assign(context.Background(), Target{}, Assignment{SessionID: "s"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("assign after close: %v", err)
	}
	// New connections are refused before the upgrade: 503 with
	// Retry-After, in the /v1 envelope, whose closed code set has no
	// "unavailable": the code is internal and the status says why.
	_, resp, err := websocket.Dial(context.Background(), e.url, &websocket.DialOptions{
		HTTPHeader: http.Header{"Authorization": {"Bearer " + e.envToken("env_1", "cred_1")}}, Subprotocols: []string{proto.SubprotocolV11}})
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("dial after close: %v %v", resp, err)
	}
	var body struct {
		Error struct{ Code, Message string }
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		t.Fatal(err)
	}
	if body.Error.Code != "internal" || body.Error.Message != "server is shutting down" || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("refusal %+v, Retry-After %q", body, resp.Header.Get("Retry-After"))
	}
}

func TestCloseCutsUnansweredDrain(t *testing.T) {
	e := newEnv(t)
	x := e.dial(t, e.envToken("env_1", "cred_1"))
	x.register(proto.RegisterParams{EnvironmentID: "env_1"})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- e.hub.Close(ctx) }()
	x.expect(proto.MethodDrain, nil) // never answered
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("close: %v", err)
	}
	<-x.done
}

func TestExecutorCloses(t *testing.T) {
	e := newEnv(t)
	x := e.dial(t, e.envToken("env_1", "cred_1"))
	res := x.register(proto.RegisterParams{EnvironmentID: "env_1"})
	x.notify(proto.MethodClose, proto.Reason{Reason: "stopping"})
	if code := x.closed(); code != proto.CloseNormal {
		t.Fatalf("close %d, want 1000", code)
	}
	if _, ok := e.hub.Executor(res.ExecutorID); ok {
		t.Fatal("closed executor still registered")
	}
}

func TestCapabilitiesUpdate(t *testing.T) {
	e := newEnv(t)
	x := e.dial(t, e.envToken("env_1", "cred_1"))
	res := x.register(proto.RegisterParams{EnvironmentID: "env_1", Capabilities: tools("grep")})
	x.notify(proto.MethodCapabilitiesUpdate, proto.CapabilitiesUpdateParams{Capabilities: tools("grep", "sed")})
	x.ok(proto.MethodHeartbeat, proto.HeartbeatParams{}, nil) // frames are handled in order
	if got := e.hub.Executors(Target{Tool: "sed"}); len(got) != 1 || got[0].ID != res.ExecutorID {
		t.Fatalf("after update: %+v", got)
	}
}

func TestAgentMethodsNotServed(t *testing.T) {
	e := newEnv(t)
	x := e.dial(t, e.machineToken("mch_1", "cred_m"))
	x.register(proto.RegisterParams{Capabilities: proto.Capabilities{Agent: &proto.AgentCapability{MaxSessions: 1}}})
	for _, m := range []string{"no.such"} { // the token refreshes are served: token_test.go
		if err := x.fails(m, map[string]string{"session_id": "s"}); err.Code != proto.CodeMethodNotFound {
			t.Errorf("%s: %v, want -32601", m, err)
		}
	}
}

func TestNewConnectionSupersedes(t *testing.T) {
	e := newEnv(t)
	tok := e.envToken("env_1", "cred_1")
	x := e.dial(t, tok)
	x.register(proto.RegisterParams{ExecutorID: "exe_a", EnvironmentID: "env_1"})
	y := e.dial(t, tok)
	res := y.register(proto.RegisterParams{ExecutorID: "exe_a", EnvironmentID: "env_1"})
	if code := x.closed(); code != proto.CloseNormal {
		t.Fatalf("old connection closed with %d, want 1000", code)
	}
	if info, _ := e.hub.Executor("exe_a"); info.ConnectionID != res.ConnectionID {
		t.Fatalf("registry points at %s, want %s", info.ConnectionID, res.ConnectionID)
	}
}
