package executor

import (
	"context"
	"errors"
	"testing"

	"github.com/coder/websocket"

	"github.com/baton-engine/baton/executor/proto"
)

// gateTool is a tool whose calls wait until release is closed; started
// receives each call's id as it begins.
func gateTool(started chan<- string, release <-chan struct{}) Tool {
	return Tool{Def: ToolDef{Name: "gate"}, Handle: func(ctx context.Context, c Call) (Result, error) {
		started <- c.ID
		select {
		case <-release:
			return TextResult("released " + c.ID), nil
		case <-ctx.Done():
			return Result{}, ctx.Err()
		}
	}}
}

// canceled is a context that has already ended: Drain with it marks the
// executor draining and reports at once whether it is idle.
func canceled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func wantDraining(t *testing.T, what string, rerr *RPCError) {
	t.Helper()
	if rerr.Code != CodeOverCapacity || rerr.Reason() != "draining" {
		t.Errorf("%s while draining = %v, want -32009 draining", what, rerr)
	}
}

// TestDrainWaitsForTheResult: Drain refuses new calls, sessions and agent
// sessions with -32009 draining, and returns only once the running call
// has finished and its tool.result was acknowledged.
func TestDrainWaitsForTheResult(t *testing.T) {
	h := newHarness(t)
	started, release := make(chan string, 4), make(chan struct{})
	cfg := h.config(t)
	cfg.Scope = Machine("mch_1")
	cfg.Tools = []Tool{gateTool(started, release)}
	cfg.Capabilities.Process = &ProcessCapability{}
	cfg.Capabilities.Agent = &AgentCapability{}
	cfg.Agent = newScriptAgent(func(ctx context.Context, t *Turn) error { return nil })
	e, fc, _ := h.start(t, cfg)

	fc.result(t, "session.assign", assign("ses_1", 1, "harness"), nil)
	fc.result(t, "tool.call", callParams("call_1", "gate", nil), nil)
	await(t, started, "the call")
	if err := e.Drain(canceled()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Drain with a call running = %v, want context.Canceled", err)
	}
	if !e.Draining() {
		t.Error("Draining() is false after Drain")
	}
	wantDraining(t, "tool.call", fc.rpcError(t, "tool.call", callParams("call_2", "gate", nil)))
	wantDraining(t, "session.assign", fc.rpcError(t, "session.assign", assign("ses_2", 1, "harness")))
	wantDraining(t, "turn.start of a new session", fc.rpcError(t, "turn.start", turnStart("ses_3", "turn_1", 1)))
	// A repeated call is still acknowledged, and the held session is kept.
	var ack proto.Accepted
	fc.result(t, "tool.call", callParams("call_1", "gate", nil), &ack)
	if !ack.Accepted {
		t.Error("a repeated tool.call was not acknowledged")
	}
	fc.result(t, "session.assign", assign("ses_1", 2, "harness"), nil)

	h.hold("tool.result", true)
	close(release)
	f := fc.next(t, "tool.result")
	if r := decode[resultView](t, f.Params); r.ToolCallID != "call_1" || r.IsError {
		t.Fatalf("tool.result %+v", r)
	}
	// The call has ended but its result is not acknowledged yet.
	if err := e.Drain(canceled()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Drain with a result unacknowledged = %v, want context.Canceled", err)
	}
	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		drained <- e.Drain(ctx)
	}()
	fc.respond(f.ID, map[string]bool{"ok": true}, nil)
	if err := await(t, drained, "Drain"); err != nil {
		t.Fatalf("Drain after the acknowledgement = %v", err)
	}
	if err := e.Drain(canceled()); err != nil {
		t.Errorf("Drain of an idle executor = %v", err)
	}
}

// TestDrainWaitsForTheTurn: a running turn and its unacknowledged events
// keep Drain waiting; a turn.start of a session already held here is
// still taken.
func TestDrainWaitsForTheTurn(t *testing.T) {
	h := newHarness(t)
	finish := make(chan struct{}, 2)
	a := newScriptAgent(func(ctx context.Context, t *Turn) error {
		select {
		case <-finish:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	e, fc, _ := h.start(t, agentConfig(h, t, a, 0))
	fc.result(t, "turn.start", turnStart("ses_1", "turn_1", 1), nil)
	nextEvent(t, fc) // status_running
	if err := e.Drain(canceled()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Drain with a turn running = %v, want context.Canceled", err)
	}
	h.hold("session.event", true)
	finish <- struct{}{}
	ev, f := nextEvent(t, fc)
	if ev.typ(t) != EventStatusIdle {
		t.Fatalf("event %s, want status_idle", ev.Event)
	}
	if err := e.Drain(canceled()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Drain with status_idle unacknowledged = %v, want context.Canceled", err)
	}
	h.hold("session.event", false)
	fc.respond(f.ID, map[string]any{}, nil)
	// A later turn of the same session runs; Drain waits for it too.
	fc.result(t, "turn.start", turnStart("ses_1", "turn_2", 1), nil)
	drained := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		drained <- e.Drain(ctx)
	}()
	finish <- struct{}{}
	if ev, _ := nextEvent(t, fc); ev.TurnID != "turn_2" || ev.typ(t) != EventStatusRunning {
		t.Fatalf("event %+v", ev)
	}
	if ev, _ := nextEvent(t, fc); ev.TurnID != "turn_2" || ev.typ(t) != EventStatusIdle {
		t.Fatalf("event %+v", ev)
	}
	if err := await(t, drained, "Drain"); err != nil {
		t.Fatalf("Drain = %v", err)
	}
}

// TestDrainAfterClose reports ErrClosed: held results can no longer be
// delivered.
func TestDrainAfterClose(t *testing.T) {
	h := newHarness(t)
	e, _, _ := h.start(t, h.config(t))
	if err := e.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := e.Drain(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Drain after Close = %v, want ErrClosed", err)
	}
}

// TestAgentOpenRefusedWhileDraining: a new agent session whose Open fails
// once the harness asked the executor to drain is refused with -32009
// draining, not -32603.
func TestAgentOpenRefusedWhileDraining(t *testing.T) {
	h := newHarness(t)
	opening, fail := make(chan struct{}), make(chan struct{})
	a := &failingOpen{opening: opening, fail: fail}
	_, fc, _ := h.start(t, agentConfig(h, t, a, 0))
	done := make(chan *proto.Frame, 1)
	go func() { done <- fc.call(t, "turn.start", turnStart("ses_1", "turn_1", 1)) }()
	await(t, opening, "Open")
	fc.result(t, "executor.drain", map[string]string{"reason": "shutdown"}, nil)
	close(fail)
	f := await(t, done, "the turn.start answer")
	if f.Error == nil {
		t.Fatalf("turn.start accepted: %s", f.Result)
	}
	wantDraining(t, "a failed Open", (*RPCError)(f.Error))
}

// failingOpen is an Agent whose Open fails once fail is closed.
type failingOpen struct {
	opening chan struct{}
	fail    chan struct{}
}

func (a *failingOpen) Open(context.Context, string, string) (string, error) {
	close(a.opening)
	<-a.fail
	return "", errors.New("shutting down")
}

func (a *failingOpen) Run(context.Context, *Turn) error    { return nil }
func (a *failingOpen) Close(context.Context, string) error { return nil }

// closeWithCallRunning runs a gate call, lets Drain time out (or not
// drain at all), then closes the executor, and returns the first of
// tool.result and executor.close the harness sees, with the result held
// unanswered until the test responds.
func closeWithCallRunning(t *testing.T, drain bool) (*fakeHarness, *fakeConn, *proto.Frame, <-chan error) {
	t.Helper()
	h := newHarness(t)
	started, release := make(chan string, 1), make(chan struct{})
	t.Cleanup(func() { close(release) })
	cfg := h.config(t)
	cfg.Tools = []Tool{gateTool(started, release)}
	e, fc, _ := h.start(t, cfg)
	fc.result(t, "session.assign", assign("ses_1", 1, "harness"), nil)
	fc.result(t, "tool.call", callParams("call_1", "gate", nil), nil)
	await(t, started, "the call")
	if drain {
		if err := e.Drain(canceled()); !errors.Is(err, context.Canceled) {
			t.Fatalf("Drain = %v, want its context's error", err)
		}
	}
	h.hold("tool.result", true)
	closed := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		closed <- e.Close(ctx)
	}()
	return h, fc, fc.next(t, "tool.result", "executor.close"), closed
}

// TestDrainTimeoutAnswersRunningCalls: when a drain times out, Close
// cancels the running call and sends its error result, acknowledged,
// before executor.close — so the harness, which ends the executor's
// bindings on executor.close, tells the model why at once.
func TestDrainTimeoutAnswersRunningCalls(t *testing.T) {
	_, fc, f, closed := closeWithCallRunning(t, true)
	if f.Method != "tool.result" {
		t.Fatalf("got %s before the running call's result", f.Method)
	}
	r := decode[resultView](t, f.Params)
	if r.ToolCallID != "call_1" || !r.IsError || resultText(t, r) != "the executor stopped (drain timed out)" {
		t.Fatalf("tool.result %+v %s", r, r.Content)
	}
	fc.respond(f.ID, map[string]bool{"ok": true}, nil)
	fc.next(t, "executor.close")
	if err := await(t, closed, "Close"); err != nil {
		t.Fatalf("Close = %v", err)
	}
	if err := fc.closed(t); websocket.CloseStatus(err) != websocket.StatusNormalClosure {
		t.Errorf("connection closed with %v, want 1000", err)
	}
}

// TestCloseAnswersRunningCalls: Close without a drain answers the
// running call the same way.
func TestCloseAnswersRunningCalls(t *testing.T) {
	_, fc, f, closed := closeWithCallRunning(t, false)
	if f.Method != "tool.result" {
		t.Fatalf("got %s before the running call's result", f.Method)
	}
	if r := decode[resultView](t, f.Params); !r.IsError || resultText(t, r) != "the executor stopped" {
		t.Fatalf("tool.result %+v %s", r, r.Content)
	}
	fc.respond(f.ID, map[string]bool{"ok": true}, nil)
	fc.next(t, "executor.close")
	if err := await(t, closed, "Close"); err != nil {
		t.Fatalf("Close = %v", err)
	}
}
