package executor

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/executor/peer"
	"github.com/baton-engine/baton/executor/proto"
)

// resumeAs registers a new connection of executor id that holds the given
// sessions.
func (e *env) resumeAs(t *testing.T, id string, held ...proto.SessionEpoch) (*texec, proto.RegisterResult) {
	t.Helper()
	x := e.dial(t, e.envToken("env_1", "cred_1"))
	if held == nil {
		held = []proto.SessionEpoch{}
	}
	res := x.register(proto.RegisterParams{EnvironmentID: "env_1", Capabilities: tools("grep"),
		Resume: &proto.Resume{ExecutorID: id, ActiveSessions: held}})
	return x, res
}

// kill drops the executor's connection without a close handshake.
// takeEvent is a Hooks.OnEvent taking every event.
func takeEvent(*Binding, *proto.SessionEventParams) error { return nil }

func (x *texec) kill() {
	_ = x.ws.CloseNow()
	<-x.done
}

func TestKilledMidCallThenResumed(t *testing.T) {
	e := newEnv(t)
	a := e.toolExecutor(t, "exe_a")
	resumed := make(chan int64, 4)
	b, p := e.bind(t, a, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1",
		Hooks: Hooks{OnResume: func(b *Binding) { resumed <- b.Epoch() }, OnEvent: takeEvent}})
	done := callAsync(b, "toolu_1", "grep", 0)
	a.reply(a.expect(proto.MethodToolCall, nil), proto.Accepted{Accepted: true})
	a.kill() // mid-call

	x, res := e.resumeAs(t, "exe_a", proto.SessionEpoch{SessionID: "ses_1", Epoch: p.Epoch})
	if res.ExecutorID != "exe_a" || len(res.Sessions) != 1 || res.Sessions[0].SessionID != "ses_1" || res.Sessions[0].Epoch <= p.Epoch {
		t.Fatalf("register result %+v (old epoch %d)", res, p.Epoch)
	}
	newEpoch := res.Sessions[0].Epoch
	// The executor learns the new epoch through a repeated session.assign…
	var ap proto.AssignParams
	x.reply(x.expect(proto.MethodSessionAssign, &ap), proto.Accepted{Accepted: true})
	if ap.SessionID != "ses_1" || ap.Epoch != newEpoch {
		t.Fatalf("re-assign %+v, want epoch %d", ap, newEpoch)
	}
	x.ok(proto.MethodSessionReady, proto.SessionEpoch{SessionID: "ses_1", Epoch: newEpoch}, nil)
	// …then gets the unanswered call again, with the same id.
	var tc proto.ToolCallParams
	x.reply(x.expect(proto.MethodToolCall, &tc), proto.Accepted{Accepted: true})
	if tc.ToolCallID != "toolu_1" {
		t.Fatalf("re-sent call %+v", tc)
	}
	if got := wait(t, resumed); got != newEpoch {
		t.Fatalf("OnResume saw epoch %d, want %d", got, newEpoch)
	}
	x.ok(proto.MethodToolResult, result("ses_1", "toolu_1", "once"), nil)
	x.ok(proto.MethodToolResult, result("ses_1", "toolu_1", "twice"), nil) // a retry: acked, not delivered
	got := wait(t, done)
	if got.err != nil || string(got.res.Content) != `[{"type":"text","text":"once"}]` {
		t.Fatalf("call: %+v %v", got.res, got.err)
	}
	select {
	case r := <-done:
		t.Fatalf("a second outcome: %+v", r)
	default:
	}
	if b.Epoch() != newEpoch {
		t.Fatalf("binding epoch %d, want %d", b.Epoch(), newEpoch)
	}
	// Held messages of the same binding stamped with the old epoch are
	// still taken (they are idempotent resends).
	x.ok(proto.MethodSessionEvent, proto.SessionEventParams{SessionID: "ses_1", Epoch: p.Epoch, Event: json.RawMessage(`{"type":"log"}`)}, nil)
}

func TestResultResentBeforeCall(t *testing.T) {
	e := newEnv(t)
	a := e.toolExecutor(t, "exe_a")
	resumed := make(chan struct{}, 1)
	b, p := e.bind(t, a, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1",
		Hooks: Hooks{OnResume: func(*Binding) { resumed <- struct{}{} }}})
	done := callAsync(b, "toolu_1", "grep", 0)
	a.reply(a.expect(proto.MethodToolCall, nil), proto.Accepted{Accepted: true})
	a.kill()
	x, _ := e.resumeAs(t, "exe_a", proto.SessionEpoch{SessionID: "ses_1", Epoch: p.Epoch})
	// The executor's held result goes first: the call completes and is
	// not dispatched again.
	x.ok(proto.MethodToolResult, result("ses_1", "toolu_1", "held"), nil)
	if got := wait(t, done); got.err != nil || string(got.res.Content) != `[{"type":"text","text":"held"}]` {
		t.Fatalf("call: %+v %v", got.res, got.err)
	}
	x.reply(x.expect(proto.MethodSessionAssign, nil), proto.Accepted{Accepted: true})
	wait(t, resumed)
	select {
	case f := <-x.inbox:
		t.Fatalf("unexpected %s after resume", f.Method)
	default:
	}
}

func TestResumeWindowExpires(t *testing.T) {
	e := newEnv(t, longLeases)
	a := e.toolExecutor(t, "exe_a")
	b, p := e.bind(t, a, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1"})
	done := callAsync(b, "toolu_1", "grep", 0)
	a.reply(a.expect(proto.MethodToolCall, nil), proto.Accepted{Accepted: true})
	a.kill()
	e.clock.WaitArmed(t, window) // detached
	if info, ok := e.hub.Executor("exe_a"); !ok || info.Connected || len(info.Sessions) != 1 {
		t.Fatalf("detached executor: %+v %v", info, ok)
	}
	// A call made while detached waits for the resume, and fails with it.
	late := callAsync(b, "toolu_2", "grep", 0)
	e.clock.Advance(window)
	for _, ch := range []<-chan called{done, late} {
		if got := wait(t, ch); !errors.Is(got.err, ErrResumeWindow) {
			t.Fatalf("pending call: %v, want ErrResumeWindow", got.err)
		}
	}
	wait(t, b.Done())
	if _, ok := e.hub.Executor("exe_a"); ok {
		t.Fatal("expired executor still in the registry")
	}
	// Too late: the session is not given back, and its old epoch is stale.
	x, res := e.resumeAs(t, "exe_a", proto.SessionEpoch{SessionID: "ses_1", Epoch: p.Epoch})
	if len(res.Sessions) != 0 {
		t.Fatalf("resumed after the window: %+v", res.Sessions)
	}
	stale := proto.SessionEventParams{SessionID: "ses_1", Epoch: p.Epoch, Event: json.RawMessage(`{"type":"log"}`)}
	if err := x.fails(proto.MethodSessionEvent, stale); err.Code != proto.CodeConflict || err.Detail().Reason != proto.ReasonStaleEpoch {
		t.Fatalf("stale event: %v", err)
	}
}

func TestStaleEpochAfterRebinding(t *testing.T) {
	e := newEnv(t, longLeases)
	a := e.toolExecutor(t, "exe_a")
	_, p := e.bind(t, a, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1", Hooks: Hooks{OnEvent: takeEvent}})
	a.kill()
	e.clock.WaitArmed(t, window)
	e.clock.Advance(window)
	// The session moves to another executor…
	c := e.toolExecutor(t, "exe_c")
	nb, np := e.bind(t, c, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1", Hooks: Hooks{OnEvent: takeEvent}})
	if np.Epoch <= p.Epoch {
		t.Fatalf("new binding epoch %d not after %d", np.Epoch, p.Epoch)
	}
	// …and the old owner comes back with its old epoch.
	x, _ := e.resumeAs(t, "exe_a", proto.SessionEpoch{SessionID: "ses_1", Epoch: p.Epoch})
	tests := []struct {
		name   string
		from   *texec
		method string
		params any
		code   int
	}{
		{"old owner event", x, proto.MethodSessionEvent, proto.SessionEventParams{SessionID: "ses_1", Epoch: p.Epoch, Event: json.RawMessage(`{"type":"log"}`)}, proto.CodeConflict},
		{"old owner ended", x, proto.MethodSessionEnded, proto.SessionEndedParams{SessionID: "ses_1", Epoch: p.Epoch}, proto.CodeConflict},
		{"old owner ready", x, proto.MethodSessionReady, proto.SessionEpoch{SessionID: "ses_1", Epoch: p.Epoch}, proto.CodeConflict},
		{"old owner, current epoch", x, proto.MethodSessionEvent, proto.SessionEventParams{SessionID: "ses_1", Epoch: np.Epoch, Event: json.RawMessage(`{}`)}, proto.CodeForbidden},
		{"old owner result", x, proto.MethodToolResult, result("ses_1", "toolu_1", "x"), proto.CodeForbidden},
		{"new owner, old epoch", c, proto.MethodSessionEvent, proto.SessionEventParams{SessionID: "ses_1", Epoch: p.Epoch, Event: json.RawMessage(`{}`)}, proto.CodeConflict},
		{"new owner, future epoch", c, proto.MethodSessionEvent, proto.SessionEventParams{SessionID: "ses_1", Epoch: np.Epoch + 100, Event: json.RawMessage(`{}`)}, proto.CodeConflict},
	}
	for _, tc := range tests {
		if err := tc.from.fails(tc.method, tc.params); err.Code != tc.code {
			t.Errorf("%s: %v, want %d", tc.name, err, tc.code)
		}
	}
	select {
	case <-nb.Done():
		t.Fatalf("the new binding ended: %v", nb.Err())
	default:
	}
	c.ok(proto.MethodSessionEvent, proto.SessionEventParams{SessionID: "ses_1", Epoch: np.Epoch, Event: json.RawMessage(`{"type":"log"}`)}, nil)
}

func TestLeaseExpiryDetachesUntilResume(t *testing.T) {
	e := newEnv(t)
	a := e.toolExecutor(t, "exe_a")
	b, p := e.bind(t, a, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1"})
	e.clock.Advance(2 * interval)
	if code := a.closed(); code != proto.CloseLeaseExpired {
		t.Fatalf("close %d, want 4008", code)
	}
	if _, _, err := b.current(); !errors.Is(err, ErrDetached) {
		t.Fatalf("binding after lease expiry: %v", err)
	}
	if _, err := b.Stop(context.Background(), "x"); !errors.Is(err, ErrDetached) {
		t.Fatalf("stop while detached: %v", err)
	}
	done := callAsync(b, "toolu_1", "grep", 0) // queued until the resume
	x, res := e.resumeAs(t, "exe_a", proto.SessionEpoch{SessionID: "ses_1", Epoch: p.Epoch})
	x.reply(x.expect(proto.MethodSessionAssign, nil), proto.Accepted{Accepted: true})
	x.reply(x.expect(proto.MethodToolCall, nil), proto.Accepted{Accepted: true})
	x.ok(proto.MethodToolResult, result("ses_1", "toolu_1", "ok"), nil)
	if got := wait(t, done); got.err != nil {
		t.Fatal(got.err)
	}
	if b.Epoch() != res.Sessions[0].Epoch {
		t.Fatalf("epoch %d, want %d", b.Epoch(), res.Sessions[0].Epoch)
	}
}

func TestResumeWithoutTheSession(t *testing.T) {
	e := newEnv(t)
	a := e.toolExecutor(t, "exe_a")
	b, _ := e.bind(t, a, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1"})
	done := callAsync(b, "toolu_1", "grep", 0)
	a.reply(a.expect(proto.MethodToolCall, nil), proto.Accepted{Accepted: true})
	a.kill()
	e.resumeAs(t, "exe_a") // restarted with nothing
	if got := wait(t, done); !errors.Is(got.err, ErrSessionLost) {
		t.Fatalf("pending call: %v, want ErrSessionLost", got.err)
	}
	wait(t, b.Done())
}

func TestAssignFailsWhenConnectionDrops(t *testing.T) {
	e := newEnv(t)
	a := e.toolExecutor(t, "exe_a")
	ch := e.assignAsync(Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1"})
	a.expect(proto.MethodSessionAssign, nil)
	a.kill()
	if got := wait(t, ch); !errors.Is(got.err, peer.ErrClosed) {
		t.Fatalf("assign: %v", got.err)
	}
}

func TestCloseFailsPendingCalls(t *testing.T) {
	e := newEnv(t)
	a := e.toolExecutor(t, "exe_a")
	b, _ := e.bind(t, a, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1"})
	done := callAsync(b, "toolu_1", "grep", 0)
	a.reply(a.expect(proto.MethodToolCall, nil), proto.Accepted{Accepted: true})
	errc := make(chan error, 1)
	go func() { errc <- e.hub.Close(context.Background()) }()
	a.reply(a.expect(proto.MethodDrain, nil), proto.DrainResult{ActiveSessions: []string{"ses_1"}})
	a.expect(proto.MethodClose, nil)
	if code := a.closed(); code != proto.CloseGoingAway {
		t.Fatalf("close %d", code)
	}
	if err := wait(t, errc); err != nil {
		t.Fatal(err)
	}
	if got := wait(t, done); !errors.Is(got.err, ErrClosed) {
		t.Fatalf("pending call: %v", got.err)
	}
}

// TestResumeStopsUnknownSessions: sessions a resume names that the hub
// cannot bind again (a restarted hub never saw them, or their binding
// ended) are stopped with reason unknown_session, so that they stop
// counting against the executor's max_sessions; a session bound again is
// not, and neither is an agent session, which the brain code takes back.
func TestResumeStopsUnknownSessions(t *testing.T) {
	e := newEnv(t, longLeases)
	e.hub.Attach(newSink())
	a := e.shellExecutor(t, "exe_a", 4)
	_, p := e.bind(t, a, Target{MachineID: "mch_1"}, Assignment{SessionID: "ses_1"})
	a.kill()
	e.clock.WaitArmed(t, window)

	x := e.dial(t, e.machineToken("mch_1", "cred_m"))
	caps := proto.Capabilities{Process: &proto.ProcessCapability{MaxSessions: 4}, Agent: &proto.AgentCapability{}}
	res := x.register(proto.RegisterParams{ExecutorID: "exe_a", Capabilities: caps, Resume: &proto.Resume{ExecutorID: "exe_a",
		ActiveSessions: []proto.SessionEpoch{
			{SessionID: "ses_0", Epoch: 3, AckedSequence: ptr(int64(2))}, // an agent session: adopted
			{SessionID: "ses_1", Epoch: p.Epoch},                         // bound again
			{SessionID: "ses_2", Epoch: 2},                               // unknown
			{SessionID: "ses_3", Epoch: 9},                               // unknown
		}}})
	if len(res.Sessions) != 2 || res.Sessions[0].SessionID != "ses_0" || res.Sessions[0].Epoch <= 3 ||
		res.Sessions[1].SessionID != "ses_1" || res.Sessions[1].Epoch <= p.Epoch || res.Sessions[1].AckedSequence != nil {
		t.Fatalf("resumed %+v", res.Sessions)
	}
	var stopped []proto.SessionStopParams
	for len(stopped) < 2 {
		f := x.next()
		switch f.Method {
		case proto.MethodSessionAssign:
			x.reply(f, proto.Accepted{Accepted: true})
		case proto.MethodSessionStop:
			var sp proto.SessionStopParams
			if e := f.Bind(&sp); e != nil {
				t.Fatal(e)
			}
			stopped = append(stopped, sp)
			x.reply(f, proto.SessionStopResult{Stopped: true})
		default:
			t.Fatalf("unexpected %s %s", f.Method, f.Params)
		}
	}
	// Stops go out one at a time in session order: had ses_0 been
	// stopped, it would have come first.
	want := []proto.SessionStopParams{{SessionID: "ses_2", Reason: "unknown_session"}, {SessionID: "ses_3", Reason: "unknown_session"}}
	if d := cmp.Diff(want, stopped); d != "" {
		t.Fatalf("session.stop (-want +got):\n%s", d)
	}
	// The executor's session.ended of a stopped session is taken as over.
	x.ok(proto.MethodSessionEnded, proto.SessionEndedParams{SessionID: "ses_3", Epoch: 9, Reason: "stopped"}, nil)
}

// TestResumeStopsSessionsAfterWindow: a session whose binding ended with
// the resume window is stopped when the executor comes back with it.
func TestResumeStopsSessionsAfterWindow(t *testing.T) {
	e := newEnv(t, longLeases)
	a := e.toolExecutor(t, "exe_a")
	b, p := e.bind(t, a, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_1"})
	a.kill()
	e.clock.WaitArmed(t, window)
	e.clock.Advance(window)
	wait(t, b.Done())
	x, res := e.resumeAs(t, "exe_a", proto.SessionEpoch{SessionID: "ses_1", Epoch: p.Epoch})
	if len(res.Sessions) != 0 {
		t.Fatalf("resumed after the window: %+v", res.Sessions)
	}
	var sp proto.SessionStopParams
	x.reply(x.expect(proto.MethodSessionStop, &sp), proto.SessionStopResult{Stopped: true})
	if sp != (proto.SessionStopParams{SessionID: "ses_1", Reason: "unknown_session"}) {
		t.Fatalf("session.stop %+v", sp)
	}
}
