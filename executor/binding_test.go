package executor

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/executor/proto"
)

type assigned struct {
	b   *Binding
	err error
}

// assignAsync starts hub.Assign.
func (e *env) assignAsync(t Target, a Assignment) <-chan assigned {
	ch := make(chan assigned, 1)
	go func() {
		b, err := e.hub.Assign(context.Background(), t, a)
		ch <- assigned{b, err}
	}()
	return ch
}

func wait[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(guard):
		t.Fatal("nothing arrived")
	}
	var zero T
	return zero
}

// accept answers the next session.assign and reports ready.
func (x *texec) accept() proto.AssignParams {
	x.t.Helper()
	var p proto.AssignParams
	f := x.expect(proto.MethodSessionAssign, &p)
	x.reply(f, proto.Accepted{Accepted: true})
	x.ok(proto.MethodSessionReady, proto.SessionEpoch{SessionID: p.SessionID, Epoch: p.Epoch}, nil)
	return p
}

// bind assigns a session to x.
func (e *env) bind(t *testing.T, x *texec, target Target, a Assignment) (*Binding, proto.AssignParams) {
	t.Helper()
	ch := e.assignAsync(target, a)
	p := x.accept()
	got := wait(t, ch)
	if got.err != nil {
		t.Fatal(got.err)
	}
	return got.b, p
}

type called struct {
	res *proto.ToolResultParams
	err error
}

func callAsync(b *Binding, id, name string, timeout time.Duration) <-chan called {
	ch := make(chan called, 1)
	go func() {
		res, err := b.Call(context.Background(), id, name, json.RawMessage(`{"q":1}`), timeout)
		ch <- called{res, err}
	}()
	return ch
}

// toolExecutor registers an environment executor serving grep.
func (e *env) toolExecutor(t *testing.T, id string) *texec {
	t.Helper()
	x := e.dial(t, e.envToken("env_1", "cred_1"))
	x.register(proto.RegisterParams{ExecutorID: id, EnvironmentID: "env_1", Capabilities: tools("grep")})
	return x
}

func result(session, id, text string) proto.ToolResultParams {
	return proto.ToolResultParams{SessionID: session, ToolCallID: id, Content: json.RawMessage(`[{"type":"text","text":"` + text + `"}]`)}
}

func TestAssignAndToolCallRoundTrip(t *testing.T) {
	e := newEnv(t)
	x := e.toolExecutor(t, "exe_a")
	var progress []string
	var mu sync.Mutex
	hooks := Hooks{OnProgress: func(b *Binding, p *proto.ToolProgressParams) {
		mu.Lock()
		progress = append(progress, b.SessionID()+":"+p.Message)
		mu.Unlock()
	}}
	tool := []proto.ToolDef{{Name: "grep", InputSchema: json.RawMessage(`{}`)}}
	b, p := e.bind(t, x, Target{EnvironmentID: "env_1", Tool: "grep"}, Assignment{SessionID: "ses_1",
		Metadata: proto.AssignMetadata{Source: proto.SourceTool, ProfileID: "pro_1"}, Tools: tool, Hooks: hooks})
	if diff := cmp.Diff(proto.AssignParams{SessionID: "ses_1", Epoch: b.Epoch(), Metadata: proto.AssignMetadata{Source: "tool", ProfileID: "pro_1"}, Tools: tool}, p); diff != "" {
		t.Fatalf("session.assign (-want +got):\n%s", diff)
	}
	if b.ExecutorID() != "exe_a" || b.Epoch() < 1 {
		t.Fatalf("binding %s epoch %d", b.ExecutorID(), b.Epoch())
	}
	if info, _ := e.hub.Executor("exe_a"); !cmp.Equal(info.Sessions, []string{"ses_1"}) {
		t.Fatalf("registry sessions %v", info.Sessions)
	}

	done := callAsync(b, "toolu_1", "grep", 0)
	var tc proto.ToolCallParams
	f := x.expect(proto.MethodToolCall, &tc)
	if diff := cmp.Diff(proto.ToolCallParams{SessionID: "ses_1", ToolCallID: "toolu_1", Name: "grep", Input: json.RawMessage(`{"q":1}`)}, tc); diff != "" {
		t.Fatalf("tool.call (-want +got):\n%s", diff)
	}
	x.reply(f, proto.Accepted{Accepted: true})
	x.notify(proto.MethodToolProgress, proto.ToolProgressParams{SessionID: "ses_1", ToolCallID: "toolu_1", Message: "half"})
	x.ok(proto.MethodToolResult, result("ses_1", "toolu_1", "found"), nil)
	got := wait(t, done)
	if got.err != nil || string(got.res.Content) != `[{"type":"text","text":"found"}]` || got.res.IsError {
		t.Fatalf("call: %+v %v", got.res, got.err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !cmp.Equal(progress, []string{"ses_1:half"}) {
		t.Fatalf("progress %v", progress)
	}
}

func TestAssignOverCapacity(t *testing.T) {
	e := newEnv(t)
	x := e.toolExecutor(t, "exe_a")
	ch := e.assignAsync(Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1"})
	x.replyErr(x.expect(proto.MethodSessionAssign, nil), proto.Errorf(proto.CodeOverCapacity, "max_sessions reached"))
	if got := wait(t, ch); !errors.Is(got.err, ErrOverCapacity) {
		t.Fatalf("got %v, want ErrOverCapacity", got.err)
	}
	// With a second executor the full one is skipped.
	y := e.toolExecutor(t, "exe_b")
	ch = e.assignAsync(Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1"})
	x.replyErr(x.expect(proto.MethodSessionAssign, nil), proto.Errorf(proto.CodeOverCapacity, "max_sessions reached"))
	y.accept()
	if got := wait(t, ch); got.err != nil || got.b.ExecutorID() != "exe_b" {
		t.Fatalf("got %+v", got)
	}
	if _, err := e.hub.Assign(context.Background(), Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1"}); !errors.Is(err, ErrBound) {
		t.Fatalf("second assign of a bound session: %v", err)
	}
}

func TestAssignNoExecutor(t *testing.T) {
	e := newEnv(t)
	m := e.dial(t, e.machineToken("mch_1", "cred_m"))
	m.register(proto.RegisterParams{Capabilities: proto.Capabilities{Process: &proto.ProcessCapability{MaxSessions: 1}}})
	target := Target{MachineID: "mch_1", Capability: CapabilityProcess}
	e.bind(t, m, target, Assignment{SessionID: "ses_1"})
	for _, tg := range []Target{target, {EnvironmentID: "env_1"}, {MachineID: "mch_1", Capability: CapabilityAgent}} {
		if _, err := e.hub.Assign(context.Background(), tg, Assignment{SessionID: "ses_2"}); !errors.Is(err, ErrNoExecutor) {
			t.Errorf("%+v: got %v, want ErrNoExecutor", tg, err)
		}
	}
}

func TestDuplicateToolResult(t *testing.T) {
	e := newEnv(t)
	x := e.toolExecutor(t, "exe_a")
	b, _ := e.bind(t, x, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1"})
	done := callAsync(b, "toolu_1", "grep", 0)
	x.reply(x.expect(proto.MethodToolCall, nil), proto.Accepted{Accepted: true})
	x.ok(proto.MethodToolResult, result("ses_1", "toolu_1", "first"), nil)
	x.ok(proto.MethodToolResult, result("ses_1", "toolu_1", "second"), nil) // acknowledged
	if got := wait(t, done); got.err != nil || string(got.res.Content) != `[{"type":"text","text":"first"}]` {
		t.Fatalf("call: %+v %v", got.res, got.err)
	}
	if err := x.fails(proto.MethodToolResult, result("ses_1", "toolu_9", "x")); err.Code != proto.CodeInvalidParams {
		t.Fatalf("unknown call: %v", err)
	}
	if err := x.fails(proto.MethodToolResult, result("ses_9", "toolu_1", "x")); err.Code != proto.CodeForbidden {
		t.Fatalf("unknown session: %v", err)
	}
	if _, err := b.Call(context.Background(), "toolu_1", "grep", nil, 0); !errors.Is(err, ErrDuplicate) {
		t.Fatalf("reused tool_call_id: %v", err)
	}
}

// TestToolResultInvalidUTF8: a tool.result whose content is not valid
// UTF-8 is a parse error (-32700, id null, as for any message that is not
// JSON) and reaches nobody; the connection stays up and a valid result for
// the same call is the one the caller gets.
func TestToolResultInvalidUTF8(t *testing.T) {
	e := newEnv(t)
	x := e.toolExecutor(t, "exe_a")
	b, _ := e.bind(t, x, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1"})
	done := callAsync(b, "toolu_1", "grep", 0)
	x.reply(x.expect(proto.MethodToolCall, nil), proto.Accepted{Accepted: true})
	bad := "{\"jsonrpc\":\"2.0\",\"id\":99,\"method\":\"tool.result\",\"params\":{\"session_id\":\"ses_1\"," +
		"\"tool_call_id\":\"toolu_1\",\"content\":[{\"type\":\"text\",\"text\":\"hi \xff\xfe\"}]}}"
	if err := x.ws.Write(context.Background(), websocket.MessageText, []byte(bad)); err != nil {
		t.Fatal(err)
	}
	if f := x.next(); f.Error == nil || f.Error.Code != proto.CodeParseError || string(f.ID) != "null" {
		t.Fatalf("answer to invalid UTF-8: id %s result %s error %+v, want -32700 with id null", f.ID, f.Result, f.Error)
	}
	x.ok(proto.MethodToolResult, result("ses_1", "toolu_1", "found"), nil)
	if got := wait(t, done); got.err != nil || string(got.res.Content) != `[{"type":"text","text":"found"}]` {
		t.Fatalf("call: %+v %v", got.res, got.err)
	}
}

func TestToolCallRefused(t *testing.T) {
	e := newEnv(t)
	x := e.toolExecutor(t, "exe_a")
	b, _ := e.bind(t, x, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1"})
	done := callAsync(b, "toolu_1", "sed", 0)
	x.replyErr(x.expect(proto.MethodToolCall, nil), proto.CapabilityMissing("tool:sed", "tool sed is not served"))
	got := wait(t, done)
	var pe *proto.Error
	if !errors.As(got.err, &pe) || pe.Detail().Capability != "tool:sed" {
		t.Fatalf("got %v", got.err)
	}
}

func TestToolCallTimeoutAndCancel(t *testing.T) {
	e := newEnv(t, longLeases)
	x := e.toolExecutor(t, "exe_a")
	b, _ := e.bind(t, x, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1"})
	done := callAsync(b, "toolu_1", "grep", 30*time.Second)
	var tc proto.ToolCallParams
	x.reply(x.expect(proto.MethodToolCall, &tc), proto.Accepted{Accepted: true})
	if tc.TimeoutMS != 30000 {
		t.Fatalf("timeout_ms %d", tc.TimeoutMS)
	}
	e.clock.WaitArmed(t, 30*time.Second)
	e.clock.Advance(30 * time.Second)
	if got := wait(t, done); !errors.Is(got.err, ErrToolTimeout) {
		t.Fatalf("got %v, want ErrToolTimeout", got.err)
	}
	var cp proto.ToolCancelParams
	x.reply(x.expect(proto.MethodToolCancel, &cp), proto.ToolCancelResult{Canceled: true})
	if cp.ToolCallID != "toolu_1" {
		t.Fatalf("tool.cancel %+v", cp)
	}
	x.ok(proto.MethodToolResult, result("ses_1", "toolu_1", "late"), nil) // a late result is acknowledged

	// Cancel explicitly.
	done = callAsync(b, "toolu_2", "grep", 0)
	x.reply(x.expect(proto.MethodToolCall, nil), proto.Accepted{Accepted: true})
	cch := make(chan bool, 1)
	go func() {
		ok, _ := b.Cancel(context.Background(), "toolu_2")
		cch <- ok
	}()
	x.reply(x.expect(proto.MethodToolCancel, nil), proto.ToolCancelResult{Canceled: true})
	if !wait(t, cch) {
		t.Fatal("Cancel did not report canceled")
	}
	x.ok(proto.MethodToolResult, proto.ToolResultParams{SessionID: "ses_1", ToolCallID: "toolu_2", Content: json.RawMessage(`[]`), IsError: true}, nil)
	if got := wait(t, done); got.err != nil || !got.res.IsError {
		t.Fatalf("canceled call: %+v %v", got.res, got.err)
	}
}

func TestCallContextCanceled(t *testing.T) {
	e := newEnv(t)
	x := e.toolExecutor(t, "exe_a")
	b, _ := e.bind(t, x, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1"})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := b.Call(ctx, "toolu_1", "grep", nil, 0)
		errc <- err
	}()
	x.reply(x.expect(proto.MethodToolCall, nil), proto.Accepted{Accepted: true})
	cancel()
	if err := wait(t, errc); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v", err)
	}
	x.reply(x.expect(proto.MethodToolCancel, nil), proto.ToolCancelResult{Canceled: true})
}

func TestSessionEvents(t *testing.T) {
	e := newEnv(t)
	x := e.toolExecutor(t, "exe_a")
	var mu sync.Mutex
	var events, statuses []string
	fail := true
	hooks := Hooks{
		OnEvent: func(b *Binding, p *proto.SessionEventParams) error {
			mu.Lock()
			defer mu.Unlock()
			var ev proto.ToolEvent
			_ = json.Unmarshal(p.Event, &ev)
			if ev.Type == "flaky" && fail {
				fail = false
				return errors.New("store down")
			}
			events = append(events, ev.Type)
			return nil
		},
		OnStatus: func(b *Binding, p *proto.SessionStatusParams) {
			mu.Lock()
			statuses = append(statuses, p.Status+":"+p.Detail)
			mu.Unlock()
		},
	}
	b, p := e.bind(t, x, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1", Hooks: hooks})
	ev := func(typ string) proto.SessionEventParams {
		return proto.SessionEventParams{SessionID: "ses_1", Epoch: p.Epoch, Event: json.RawMessage(`{"type":"` + typ + `","data":{}}`)}
	}
	x.callID(`"ev-1"`, proto.MethodSessionEvent, ev("log"))
	if f := x.callID(`"ev-1"`, proto.MethodSessionEvent, ev("log")); f.Error != nil { // a resend
		t.Fatalf("duplicate: %v", f.Error)
	}
	if f := x.callID(`"ev-2"`, proto.MethodSessionEvent, ev("flaky")); f.Error == nil || f.Error.Code != proto.CodeInternal {
		t.Fatalf("failing hook: %+v", f)
	}
	if f := x.callID(`"ev-2"`, proto.MethodSessionEvent, ev("flaky")); f.Error != nil {
		t.Fatalf("retry: %v", f.Error)
	}
	x.notify(proto.MethodSessionStatus, proto.SessionStatusParams{SessionID: "ses_1", Status: proto.StatusRunning, Detail: "tool_running"})
	agent := ev("agent.message")
	agent.EventID, agent.TurnID = "evt_1", "turn_1"
	if f := x.call(proto.MethodSessionEvent, agent); f.Error == nil || f.Error.Code != proto.CodeInvalidParams { // no sequence
		t.Fatalf("agent event: %+v", f)
	}
	mu.Lock()
	if !cmp.Equal(events, []string{"log", "flaky"}) || !cmp.Equal(statuses, []string{"running:tool_running"}) {
		t.Fatalf("events %v statuses %v", events, statuses)
	}
	mu.Unlock()

	// session.ended ends the binding; pending calls fail; a retry is acked.
	done := callAsync(b, "toolu_1", "grep", 0)
	x.reply(x.expect(proto.MethodToolCall, nil), proto.Accepted{Accepted: true})
	x.ok(proto.MethodSessionEnded, proto.SessionEndedParams{SessionID: "ses_1", Epoch: p.Epoch, Reason: "stopped"}, nil)
	wait(t, b.Done())
	if !errors.Is(b.Err(), ErrSessionEnded) {
		t.Fatalf("binding ended with %v", b.Err())
	}
	if got := wait(t, done); !errors.Is(got.err, ErrSessionEnded) {
		t.Fatalf("pending call: %v", got.err)
	}
	x.ok(proto.MethodSessionEnded, proto.SessionEndedParams{SessionID: "ses_1", Epoch: p.Epoch, Reason: "stopped"}, nil)
	if info, _ := e.hub.Executor("exe_a"); len(info.Sessions) != 0 {
		t.Fatalf("sessions after end: %v", info.Sessions)
	}
}

func TestSessionStop(t *testing.T) {
	e := newEnv(t)
	x := e.toolExecutor(t, "exe_a")
	b, p := e.bind(t, x, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1"})
	ch := make(chan bool, 1)
	go func() {
		ok, _ := b.Stop(context.Background(), "user")
		ch <- ok
	}()
	var sp proto.SessionStopParams
	x.reply(x.expect(proto.MethodSessionStop, &sp), proto.SessionStopResult{Stopped: true})
	if !wait(t, ch) || sp.Reason != "user" {
		t.Fatalf("stop %+v", sp)
	}
	x.ok(proto.MethodSessionEnded, proto.SessionEndedParams{SessionID: "ses_1", Epoch: p.Epoch}, nil)
	wait(t, b.Done())
}

func TestMount(t *testing.T) {
	e := newEnv(t)
	m := e.dial(t, e.machineToken("mch_1", "cred_m"))
	m.register(proto.RegisterParams{Capabilities: proto.Capabilities{Process: &proto.ProcessCapability{}, FS: &proto.FSCapability{Fuse: true}}})
	b, p := e.bind(t, m, Target{MachineID: "mch_1", Capability: CapabilityProcess}, Assignment{SessionID: "ses_1"})
	ch := make(chan []string, 1)
	go func() {
		got, _ := b.Mount(context.Background(), []proto.FsView{{View: "work", Path: "/work", ServiceURL: "http://x/v1/fs/ses_1/work", Token: "t"}})
		ch <- got
	}()
	var mp proto.FsMountParams
	m.reply(m.expect(proto.MethodFsMount, &mp), proto.FsMountResult{Mounted: []string{"work"}})
	if got := wait(t, ch); !cmp.Equal(got, []string{"work"}) || mp.Epoch != p.Epoch {
		t.Fatalf("mounted %v epoch %d want %d", got, mp.Epoch, p.Epoch)
	}
	errc := make(chan error, 1)
	go func() { errc <- b.Unmount(context.Background(), true) }()
	var up proto.FsUnmountParams
	m.reply(m.expect(proto.MethodFsUnmount, &up), proto.FsUnmountResult{Status: "unmounted"})
	if err := wait(t, errc); err != nil || !up.Flush {
		t.Fatalf("unmount %v %+v", err, up)
	}
}
