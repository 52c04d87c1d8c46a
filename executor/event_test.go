package executor

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
)

func handEventParams(session string, epoch int64, ev string) proto.SessionEventParams {
	return proto.SessionEventParams{SessionID: session, Epoch: epoch, Event: json.RawMessage(ev)}
}

// TestHandEvents: a tool executor's session.event is recorded in the
// Baton session's log — through the sink's HandSink, with who sent it —
// before it is acknowledged; a repeat of its JSON-RPC id is acknowledged
// without being recorded again, a failed record is answered and taken on
// the resend, and malformed, foreign or stale events get their errors.
func TestHandEvents(t *testing.T) {
	e, sink := brainEnv(t)
	hands := NewHands(e.hub)
	defer hands.Close()
	x := e.envExecutor(t, "env_1", "exe_a", def("grep", "g"))
	// The session is bound in another environment already, so Hands binds
	// it here as <session>@<environment>.
	e.bind(t, e.envExecutor(t, "env_0", "exe_z", def("grep", "g")), Target{EnvironmentID: "env_0"}, Assignment{SessionID: "ses_1"})
	done := hands.callAsync(baton.ExecutorCall{SessionID: "ses_1", EnvironmentID: "env_1", ToolCallID: "call_1", Name: "grep"})
	ap := x.accept()
	if ap.SessionID != "ses_1@env_1" {
		t.Fatalf("assigned %s", ap.SessionID)
	}
	x.reply(x.expect(proto.MethodToolCall, nil), proto.Accepted{Accepted: true})

	// Recorded before the acknowledgement.
	gate := make(chan struct{})
	var release sync.Once
	defer release.Do(func() { close(gate) }) // a failing test does not leave the reader stuck
	sink.mu.Lock()
	sink.gate = gate
	sink.mu.Unlock()
	answer := x.send(`"ev-1"`, proto.MethodSessionEvent, handEventParams(ap.SessionID, ap.Epoch, `{"type":"build.log","data":{"line":"ok"}}`))
	got := wait(t, sink.hands)
	select {
	case f := <-answer:
		t.Fatalf("acknowledged before it was recorded: %+v", f)
	default:
	}
	sink.mu.Lock()
	sink.gate = nil
	sink.mu.Unlock()
	release.Do(func() { close(gate) })
	if f := wait(t, answer); f.Error != nil || string(f.Result) != "{}" {
		t.Fatalf("answer %s %v", f.Result, f.Error)
	}
	want := handReport{"ses_1", map[string]any{"type": "build.log", "data": map[string]any{"line": "ok"},
		"executor_id": "exe_a", "environment_id": "env_1", "executor_session_id": "ses_1@env_1"}}
	if d := cmp.Diff(want, got, cmp.AllowUnexported(handReport{})); d != "" {
		t.Errorf("recorded (-want +got):\n%s", d)
	}

	// A resend of the same JSON-RPC id is acknowledged, not recorded again.
	if f := x.callID(`"ev-1"`, proto.MethodSessionEvent, handEventParams(ap.SessionID, ap.Epoch, `{"type":"build.log","data":{"line":"ok"}}`)); f.Error != nil {
		t.Fatalf("resend: %v", f.Error)
	}
	// A failed record is answered, and the resend is recorded.
	sink.mu.Lock()
	sink.fail = baton.Errorf(baton.ECodeUnavailable, "store down")
	sink.mu.Unlock()
	if f := x.callID(`"ev-2"`, proto.MethodSessionEvent, handEventParams(ap.SessionID, ap.Epoch, `{"type":"build.done"}`)); f.Error == nil || f.Error.Code != proto.CodeInternal {
		t.Fatalf("failed record answered %+v", f)
	}
	if f := x.callID(`"ev-2"`, proto.MethodSessionEvent, handEventParams(ap.SessionID, ap.Epoch, `{"type":"build.done"}`)); f.Error != nil {
		t.Fatalf("resend after a failure: %v", f.Error)
	}
	if r := wait(t, sink.hands); r.payload["type"] != "build.done" || r.payload["data"] != nil {
		t.Fatalf("recorded %+v", r)
	}

	// Bad input.
	for _, ev := range []string{`{"data":1}`, `{"type":""}`, `"text"`, `[1]`} {
		if pe := x.fails(proto.MethodSessionEvent, handEventParams(ap.SessionID, ap.Epoch, ev)); pe.Code != proto.CodeInvalidParams {
			t.Errorf("event %s: %+v", ev, pe)
		}
	}
	if pe := x.fails(proto.MethodSessionEvent, handEventParams("ses_other", ap.Epoch+100, `{"type":"x"}`)); pe.Code != proto.CodeForbidden {
		t.Errorf("a session not bound to the executor: %+v", pe)
	}
	if pe := x.fails(proto.MethodSessionEvent, handEventParams(ap.SessionID, ap.Epoch-1, `{"type":"x"}`)); pe.Code != proto.CodeConflict ||
		pe.Detail().Reason != proto.ReasonStaleEpoch {
		t.Errorf("an epoch before the assignment: %+v", pe)
	}
	if pe := x.fails(proto.MethodSessionEvent, handEventParams(ap.SessionID, ap.Epoch+1, `{"type":"x"}`)); pe.Code != proto.CodeConflict {
		t.Errorf("an epoch not given: %+v", pe)
	}
	none(t, "recorded event", sink.hands)

	x.ok(proto.MethodToolResult, result(ap.SessionID, "call_1", "done"), nil)
	if r := wait(t, done); r.err != nil {
		t.Fatal(r.err)
	}
}

// TestHandEventsNotKept: a binding that names no Baton session (a bare
// remote sandbox), or a hub whose sink keeps no hand events, refuses
// session.event with -32601 rather than acknowledging what it drops; a
// sandbox started for a session records them with its machine.
func TestHandEventsNotKept(t *testing.T) {
	e, sink := brainEnv(t)
	s := NewShell(e.hub, nil)
	defer s.Close()
	x := e.shellExecutor(t, "exe_m", 0)
	start := func(session string) proto.AssignParams {
		started := make(chan error, 1)
		go func() {
			_, err := s.StartFor(context.Background(), session, "executor:mch_1")
			started <- err
		}()
		ap := x.accept()
		if err := wait(t, started); err != nil {
			t.Fatal(err)
		}
		return ap
	}
	bare := start("")
	if pe := x.fails(proto.MethodSessionEvent, handEventParams(bare.SessionID, bare.Epoch, `{"type":"x"}`)); pe.Code != proto.CodeMethodNotFound {
		t.Errorf("a sandbox of no session: %+v", pe)
	}
	sbx := start("ses_1")
	x.ok(proto.MethodSessionEvent, handEventParams(sbx.SessionID, sbx.Epoch, `{"type":"shell.note","data":"hi"}`), nil)
	want := handReport{"ses_1", map[string]any{"type": "shell.note", "data": "hi", "executor_id": "exe_m", "machine_id": "mch_1",
		"executor_session_id": sbx.SessionID}}
	if d := cmp.Diff(want, wait(t, sink.hands), cmp.AllowUnexported(handReport{})); d != "" || !strings.HasPrefix(sbx.SessionID, "sbx_") {
		t.Errorf("recorded (-want +got):\n%s", d)
	}

	// A sink without HandSink.
	f := newEnv(t, longLeases)
	f.hub.Attach(struct{ baton.AgentSink }{newSink()})
	y := f.toolExecutor(t, "exe_b")
	_, ap := f.bind(t, y, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_2", Events: "ses_2"})
	if pe := y.fails(proto.MethodSessionEvent, handEventParams(ap.SessionID, ap.Epoch, `{"type":"x"}`)); pe.Code != proto.CodeMethodNotFound {
		t.Errorf("no HandSink: %+v", pe)
	}
	// Hooks.OnEvent takes them instead.
	hooked := make(chan string, 1)
	_, hp := f.bind(t, y, Target{EnvironmentID: "env_1"}, Assignment{SessionID: "ses_3", Hooks: Hooks{OnEvent: func(_ *Binding, p *proto.SessionEventParams) error {
		hooked <- string(p.Event)
		return nil
	}}})
	y.ok(proto.MethodSessionEvent, handEventParams(hp.SessionID, hp.Epoch, `{"type":"x"}`), nil)
	if got := wait(t, hooked); got != `{"type":"x"}` {
		t.Errorf("hook got %s", got)
	}
}
