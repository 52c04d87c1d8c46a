package executor

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
)

// envExecutor registers an executor of envID with the given tools.
func (e *env) envExecutor(t *testing.T, envID, id string, defs ...proto.ToolDef) *texec {
	t.Helper()
	x := e.dial(t, e.envToken(envID, "cred_"+envID))
	x.register(proto.RegisterParams{ExecutorID: id, EnvironmentID: envID, Capabilities: proto.Capabilities{Tools: defs}})
	return x
}

func def(name, desc string) proto.ToolDef {
	return proto.ToolDef{Name: name, Description: &desc, InputSchema: json.RawMessage(`{"type":"object"}`)}
}

func TestHandsTools(t *testing.T) {
	e := newEnv(t, longLeases)
	x := NewHands(e.hub)
	defer x.Close()
	e.envExecutor(t, "env_a", "exe_b", def("x", "b"), def("y", "b"))
	e.envExecutor(t, "env_a", "exe_a", def("y", "a"), def("z", "a"))
	e.envExecutor(t, "env_b", "exe_c", def("x", "c"), def("w", "c"))
	gone := e.envExecutor(t, "env_b", "exe_d", def("v", "d"))
	m := e.dial(t, e.machineToken("mch_1", "cred_m"))
	m.register(proto.RegisterParams{ExecutorID: "exe_m", Capabilities: proto.Capabilities{Process: &proto.ProcessCapability{}, Tools: []proto.ToolDef{def("u", "m")}}})
	gone.notify(proto.MethodClose, proto.Reason{})
	gone.closed()

	type got struct{ Env, Name, Desc string }
	var list []got
	for _, tl := range x.Tools([]string{"env_a", "env_b", "env_none"}) {
		list = append(list, got{tl.EnvironmentID, tl.Name, *tl.Description})
	}
	// env_a first (exe_a before exe_b), then env_b; every name once; no
	// detached or machine-scoped executor.
	want := []got{{"env_a", "y", "a"}, {"env_a", "z", "a"}, {"env_a", "x", "b"}, {"env_b", "w", "c"}}
	if diff := cmp.Diff(want, list); diff != "" {
		t.Fatalf("Tools (-want +got):\n%s", diff)
	}
	if n := len(x.Tools([]string{"env_b", "env_a"})); n != 4 {
		t.Errorf("reversed order: %d tools, want 4 (x, w from env_b, then y, z from env_a)", n)
	}
	if tl := x.Tools([]string{"env_b", "env_a"}); tl[0].Name != "x" || tl[0].EnvironmentID != "env_b" {
		t.Errorf("env_b first: %+v", tl[0])
	}
}

type handsCalled struct {
	res baton.ExecutorResult
	err error
}

func (x *Hands) callAsync(c baton.ExecutorCall) <-chan handsCalled {
	ch := make(chan handsCalled, 1)
	go func() {
		res, err := x.Call(context.Background(), c)
		ch <- handsCalled{res, err}
	}()
	return ch
}

// serveCall answers the next tool.call with a text result and returns it.
func (x *texec) serveCall(text string) proto.ToolCallParams {
	x.t.Helper()
	var p proto.ToolCallParams
	f := x.expect(proto.MethodToolCall, &p)
	x.reply(f, proto.Accepted{Accepted: true})
	x.ok(proto.MethodToolResult, result(p.SessionID, p.ToolCallID, text), nil)
	return p
}

func hcall(session, env, id, name string) baton.ExecutorCall {
	return baton.ExecutorCall{SessionID: session, ProfileID: "pro_1", EnvironmentID: env, ToolCallID: id, Name: name, Input: json.RawMessage(`{}`)}
}

func TestHandsBindOnceAndReuse(t *testing.T) {
	e := newEnv(t, longLeases)
	x := NewHands(e.hub)
	defer x.Close()
	ex := e.envExecutor(t, "env_a", "exe_a", def("grep", "g"))

	// Two first calls at once bind the session once.
	c1 := x.callAsync(hcall("ses_1", "env_a", "call_1", "grep"))
	c2 := x.callAsync(hcall("ses_1", "env_a", "call_2", "grep"))
	p := ex.accept()
	if diff := cmp.Diff(proto.AssignMetadata{Source: "harness", ProfileID: "pro_1"}, p.Metadata); diff != "" || p.SessionID != "ses_1" {
		t.Fatalf("session.assign %s %+v", p.SessionID, p.Metadata)
	}
	ids := map[string]bool{}
	for range 2 {
		ids[ex.serveCall("r").ToolCallID] = true
	}
	for _, ch := range []<-chan handsCalled{c1, c2} {
		got := wait(t, ch)
		if got.err != nil || got.res.ExecutorID != "exe_a" || string(got.res.Content) != `[{"type":"text","text":"r"}]` {
			t.Fatalf("call: %+v %v", got.res, got.err)
		}
	}
	if !ids["call_1"] || !ids["call_2"] {
		t.Fatalf("tool calls %v", ids)
	}

	// The executor ends the session: the next call binds again.
	ex.ok(proto.MethodSessionEnded, proto.SessionEndedParams{SessionID: "ses_1", Epoch: p.Epoch, Reason: "idle"}, nil)
	c3 := x.callAsync(hcall("ses_1", "env_a", "call_3", "grep"))
	p2 := ex.accept()
	if p2.SessionID != "ses_1" || p2.Epoch <= p.Epoch {
		t.Fatalf("rebind %+v after epoch %d", p2, p.Epoch)
	}
	ex.serveCall("again")
	if got := wait(t, c3); got.err != nil {
		t.Fatal(got.err)
	}

	// Release stops the session on the executor.
	x.Release("ses_1")
	var sp proto.SessionStopParams
	f := ex.expect(proto.MethodSessionStop, &sp)
	ex.reply(f, proto.SessionStopResult{Stopped: true})
	if sp.SessionID != "ses_1" {
		t.Fatalf("session.stop %+v", sp)
	}
}

func TestHandsSecondEnvironment(t *testing.T) {
	e := newEnv(t, longLeases)
	x := NewHands(e.hub)
	defer x.Close()
	a := e.envExecutor(t, "env_a", "exe_a", def("grep", "g"))
	b := e.envExecutor(t, "env_b", "exe_b", def("fetch", "f"))
	c := x.callAsync(hcall("ses_1", "env_a", "call_1", "grep"))
	if p := a.accept(); p.SessionID != "ses_1" {
		t.Fatalf("first binding named %s", p.SessionID)
	}
	a.serveCall("a")
	wait(t, c)
	c = x.callAsync(hcall("ses_1", "env_b", "call_2", "fetch"))
	if p := b.accept(); p.SessionID != "ses_1@env_b" {
		t.Fatalf("second environment's binding named %s, want ses_1@env_b", p.SessionID)
	}
	b.serveCall("b")
	if got := wait(t, c); got.err != nil || got.res.ExecutorID != "exe_b" {
		t.Fatalf("%+v %v", got.res, got.err)
	}
}

func TestHandsProgress(t *testing.T) {
	e := newEnv(t, longLeases)
	x := NewHands(e.hub)
	defer x.Close()
	ex := e.envExecutor(t, "env_a", "exe_a", def("grep", "g"))
	var mu sync.Mutex
	var got []string
	c := hcall("ses_1", "env_a", "call_1", "grep")
	c.OnProgress = func(p baton.ExecutorProgress) {
		mu.Lock()
		got = append(got, p.Message)
		mu.Unlock()
	}
	done := x.callAsync(c)
	ex.accept()
	var p proto.ToolCallParams
	f := ex.expect(proto.MethodToolCall, &p)
	ex.reply(f, proto.Accepted{Accepted: true})
	half := 0.5
	ex.notify(proto.MethodToolProgress, proto.ToolProgressParams{SessionID: "ses_1", ToolCallID: "call_1", Message: "halfway", Progress: &half})
	ex.ok(proto.MethodToolResult, result("ses_1", "call_1", "done"), nil)
	wait(t, done)
	mu.Lock()
	defer mu.Unlock()
	if !cmp.Equal(got, []string{"halfway"}) {
		t.Fatalf("progress %v", got)
	}
}

func TestHandsErrors(t *testing.T) {
	msg := func(err error) string { return baton.ErrorMessage(err) }
	t.Run("no executor", func(t *testing.T) {
		e := newEnv(t, longLeases)
		x := NewHands(e.hub)
		defer x.Close()
		_, err := x.Call(context.Background(), hcall("ses_1", "env_a", "call_1", "grep"))
		if baton.ErrorCode(err) != baton.ECodeUnavailable || !strings.Contains(msg(err), "no executor of environment env_a serving tool 'grep' is connected") {
			t.Fatalf("%v", err)
		}
	})
	t.Run("over capacity", func(t *testing.T) {
		e := newEnv(t, longLeases)
		x := NewHands(e.hub)
		defer x.Close()
		ex := e.envExecutor(t, "env_a", "exe_a", def("grep", "g"))
		done := x.callAsync(hcall("ses_1", "env_a", "call_1", "grep"))
		f := ex.expect(proto.MethodSessionAssign, nil)
		ex.replyErr(f, proto.Errorf(proto.CodeOverCapacity, "full"))
		if got := wait(t, done); !strings.Contains(msg(got.err), "at capacity") {
			t.Fatalf("%v", got.err)
		}
	})
	t.Run("refused", func(t *testing.T) {
		e := newEnv(t, longLeases)
		x := NewHands(e.hub)
		defer x.Close()
		ex := e.envExecutor(t, "env_a", "exe_a", def("grep", "g"))
		done := x.callAsync(hcall("ses_1", "env_a", "call_1", "grep"))
		ex.accept()
		f := ex.expect(proto.MethodToolCall, nil)
		ex.replyErr(f, proto.CapabilityMissing("tool:grep", "not served here"))
		if got := wait(t, done); !strings.Contains(msg(got.err), "the executor refused tool 'grep': not served here") {
			t.Fatalf("%v", got.err)
		}
	})
	t.Run("resume window", func(t *testing.T) {
		e := newEnv(t, longLeases)
		x := NewHands(e.hub)
		defer x.Close()
		ex := e.envExecutor(t, "env_a", "exe_a", def("grep", "g"))
		done := x.callAsync(hcall("ses_1", "env_a", "call_1", "grep"))
		ex.accept()
		f := ex.expect(proto.MethodToolCall, nil)
		ex.reply(f, proto.Accepted{Accepted: true})
		_ = ex.ws.CloseNow()
		e.clock.WaitArmed(t, window)
		e.clock.Advance(window)
		got := wait(t, done)
		if got.res.ExecutorID != "exe_a" || !strings.Contains(msg(got.err), "the executor running tool 'grep' disconnected and did not come back within 1m0s") {
			t.Fatalf("%+v %v", got.res, got.err)
		}
	})
	t.Run("timeout", func(t *testing.T) {
		e := newEnv(t, longLeases)
		x := NewHands(e.hub)
		defer x.Close()
		ex := e.envExecutor(t, "env_a", "exe_a", def("grep", "g"))
		c := hcall("ses_1", "env_a", "call_1", "grep")
		c.Timeout = 5 * time.Second
		done := x.callAsync(c)
		ex.accept()
		var p proto.ToolCallParams
		f := ex.expect(proto.MethodToolCall, &p)
		ex.reply(f, proto.Accepted{Accepted: true})
		if p.TimeoutMS != 5000 {
			t.Errorf("timeout_ms %d", p.TimeoutMS)
		}
		e.clock.WaitArmed(t, 5*time.Second)
		e.clock.Advance(5 * time.Second)
		if got := wait(t, done); !strings.Contains(msg(got.err), "tool 'grep' did not finish within 5s") {
			t.Fatalf("%v", got.err)
		}
		ex.expect(proto.MethodToolCancel, nil) // the executor is told
	})
	t.Run("cancelled", func(t *testing.T) {
		e := newEnv(t, longLeases)
		x := NewHands(e.hub)
		defer x.Close()
		ex := e.envExecutor(t, "env_a", "exe_a", def("grep", "g"))
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := x.Call(ctx, hcall("ses_1", "env_a", "call_1", "grep"))
			done <- err
		}()
		ex.accept()
		f := ex.expect(proto.MethodToolCall, nil)
		ex.reply(f, proto.Accepted{Accepted: true})
		cancel()
		var cp proto.ToolCancelParams
		ex.expect(proto.MethodToolCancel, &cp)
		if cp.ToolCallID != "call_1" {
			t.Errorf("tool.cancel %+v", cp)
		}
		if err := wait(t, done); !strings.Contains(msg(err), "the call to tool 'grep' was cancelled") {
			t.Fatalf("%v", err)
		}
	})
}

// A session released while its executor is away is stopped when the
// executor resumes it.
func TestHandsReleaseWhileDetached(t *testing.T) {
	e := newEnv(t, longLeases)
	x := NewHands(e.hub)
	defer x.Close()
	tok := e.envToken("env_a", "cred_a")
	ex := e.dial(t, tok)
	ex.register(proto.RegisterParams{ExecutorID: "exe_a", EnvironmentID: "env_a", Capabilities: tools("grep")})
	done := x.callAsync(hcall("ses_1", "env_a", "call_1", "grep"))
	p := ex.accept()
	ex.serveCall("ok")
	wait(t, done)
	_ = ex.ws.CloseNow()
	<-ex.done
	e.clock.WaitArmed(t, window) // detached
	x.Release("ses_1")

	back := e.dial(t, tok)
	back.register(proto.RegisterParams{ExecutorID: "exe_a", EnvironmentID: "env_a", Capabilities: tools("grep"),
		Resume: &proto.Resume{ExecutorID: "exe_a", ActiveSessions: []proto.SessionEpoch{{SessionID: "ses_1", Epoch: p.Epoch}}}})
	back.accept() // the new epoch
	var sp proto.SessionStopParams
	f := back.expect(proto.MethodSessionStop, &sp)
	back.reply(f, proto.SessionStopResult{Stopped: true})
	if sp.SessionID != "ses_1" {
		t.Fatalf("session.stop %+v", sp)
	}
}

// A session released while its first call is binding is stopped as soon
// as the binding is made, and the call fails.
func TestHandsReleaseWhileBinding(t *testing.T) {
	e := newEnv(t, longLeases)
	x := NewHands(e.hub)
	defer x.Close()
	ex := e.envExecutor(t, "env_a", "exe_a", def("grep", "g"))
	done := x.callAsync(hcall("ses_1", "env_a", "call_1", "grep"))
	var p proto.AssignParams
	f := ex.expect(proto.MethodSessionAssign, &p)
	x.Release("ses_1")
	ex.reply(f, proto.Accepted{Accepted: true})
	ex.ok(proto.MethodSessionReady, proto.SessionEpoch{SessionID: p.SessionID, Epoch: p.Epoch}, nil)
	var sp proto.SessionStopParams
	stop := ex.expect(proto.MethodSessionStop, &sp)
	ex.reply(stop, proto.SessionStopResult{Stopped: true})
	if got := wait(t, done); got.err == nil || !strings.Contains(baton.ErrorMessage(got.err), "ended this session") {
		t.Fatalf("call after release: %v", got.err)
	}
}
