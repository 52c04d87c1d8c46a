package executor

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
)

// hugeWindow makes the resume window long enough that only an immediate
// end of the bindings can pass a test (the fake clock never reaches it
// anyway unless advanced).
func hugeWindow(o *Options) { o.ResumeWindow = 24 * time.Hour }

// An executor that says executor.close is gone for good: its pending call
// fails at once saying so, and the session's next call binds to another
// executor of the environment.
func TestHandsExecutorLeaves(t *testing.T) {
	e := newEnv(t, longLeases, hugeWindow)
	x := NewHands(e.hub)
	defer x.Close()
	old := e.envExecutor(t, "env_a", "exe_a", def("grep", "g"))

	c1 := x.callAsync(hcall("ses_1", "env_a", "call_1", "grep"))
	if p := old.accept(); p.SessionID != "ses_1" {
		t.Fatalf("session.assign %+v", p)
	}
	old.serveCall("r")
	if got := wait(t, c1); got.err != nil {
		t.Fatal(got.err)
	}
	fresh := e.envExecutor(t, "env_a", "exe_b", def("grep", "g"))

	// A call is running on the old executor when it leaves.
	c2 := x.callAsync(hcall("ses_1", "env_a", "call_2", "grep"))
	f := old.expect(proto.MethodToolCall, nil)
	old.reply(f, proto.Accepted{Accepted: true})
	old.notify(proto.MethodClose, proto.Reason{Reason: "shutdown"})
	if code := old.closed(); code != proto.CloseNormal {
		t.Fatalf("close %d, want 1000", code)
	}
	got := wait(t, c2)
	if got.err == nil || !strings.Contains(got.err.Error(), "was stopped") || strings.Contains(got.err.Error(), "did not come back") {
		t.Fatalf("pending call: %v, want the executor stopped", got.err)
	}
	if baton.ErrorCode(got.err) != baton.ECodeUnavailable {
		t.Errorf("code %s", baton.ErrorCode(got.err))
	}

	// The next call of the session goes to the executor still connected.
	c3 := x.callAsync(hcall("ses_1", "env_a", "call_3", "grep"))
	if p := fresh.accept(); p.SessionID != "ses_1" {
		t.Fatalf("rebind %+v", p)
	}
	if p := fresh.serveCall("again"); p.ToolCallID != "call_3" {
		t.Fatalf("tool.call %+v", p)
	}
	if got := wait(t, c3); got.err != nil || got.res.ExecutorID != "exe_b" {
		t.Fatalf("call after leave: %+v %v", got.res, got.err)
	}
	if _, ok := e.hub.Executor("exe_a"); ok {
		t.Error("the executor that left is still registered")
	}
}

// A binding whose executor said executor.close ends at once with
// ErrExecutorClosed; a dropped connection still waits the resume window.
func TestBindingEndsWhenExecutorLeaves(t *testing.T) {
	e := newEnv(t, longLeases, hugeWindow)
	ex := e.dial(t, e.envToken("env_1", "cred_1"))
	ex.register(proto.RegisterParams{ExecutorID: "exe_a", EnvironmentID: "env_1", Capabilities: tools("grep")})
	b, _ := e.bind(t, ex, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1"})
	ex.notify(proto.MethodClose, proto.Reason{})
	wait(t, b.Done())
	if err := b.Err(); !errors.Is(err, ErrExecutorClosed) {
		t.Fatalf("binding ended with %v, want ErrExecutorClosed", err)
	}
	if _, err := b.Call(context.Background(), "call_1", "grep", nil, 0); !errors.Is(err, ErrExecutorClosed) {
		t.Fatalf("call after the end: %v", err)
	}
}

// A machine shell whose executor leaves fails its running command at
// once, and later commands too.
func TestShellExecutorLeaves(t *testing.T) {
	e := newEnv(t, longLeases, hugeWindow)
	s := NewShell(e.hub, nil)
	defer s.Close()
	ex := e.shellExecutor(t, "exe_m", 1)
	id, _ := startSandbox(t, s, ex, "")

	done := s.execAsync(id, "sleep 100", baton.ExecOptions{})
	f := ex.expect(proto.MethodToolCall, nil)
	ex.reply(f, proto.Accepted{Accepted: true})
	ex.notify(proto.MethodClose, proto.Reason{Reason: "shutdown"})
	got := wait(t, done)
	if !errors.Is(got.err, ErrExecutorClosed) || !strings.Contains(got.err.Error(), "was stopped") {
		t.Fatalf("running exec: %v, want the executor stopped", got.err)
	}
	got = wait(t, s.execAsync(id, "true", baton.ExecOptions{}))
	if !errors.Is(got.err, ErrExecutorClosed) {
		t.Fatalf("exec after the leave: %v", got.err)
	}
}
