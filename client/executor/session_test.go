package executor

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/executor/proto"
)

func assign(id string, epoch int, source string) map[string]any {
	return map[string]any{"session_id": id, "epoch": epoch, "metadata": map[string]any{"source": source, "profile_id": "prof_1"}}
}

func TestSessionAssignCapacity(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.Scope = Machine("mch_1")
	cfg.Capabilities.Process = &ProcessCapability{MaxSessions: 1}
	_, fc, _ := h.start(t, cfg)

	var got map[string]bool
	fc.result(t, "session.assign", assign("ses_1", 1, "harness"), &got)
	if !got["accepted"] {
		t.Fatalf("assign = %v", got)
	}
	ready := fc.next(t, "session.ready")
	if ready.ID == nil {
		t.Error("session.ready must be a request")
	}
	if d := cmp.Diff(proto.SessionEpoch{SessionID: "ses_1", Epoch: 1}, decode[proto.SessionEpoch](t, ready.Params)); d != "" {
		t.Errorf("session.ready (-want +got):\n%s", d)
	}

	rerr := fc.rpcError(t, "session.assign", assign("ses_2", 1, "harness"))
	if rerr.Code != CodeOverCapacity || rerr.Reason() != "max_sessions" {
		t.Errorf("assign over max_sessions = %v, want -32009", rerr)
	}
	// A repeat of the held session (a new epoch after a resume) is fine.
	fc.result(t, "session.assign", assign("ses_1", 2, "harness"), &got)
	if d := cmp.Diff(proto.SessionEpoch{SessionID: "ses_1", Epoch: 2}, decode[proto.SessionEpoch](t, fc.next(t, "session.ready").Params)); d != "" {
		t.Errorf("second session.ready (-want +got):\n%s", d)
	}
}

func TestSessionStop(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	started := make(chan struct{})
	cfg.Tools = []Tool{{Def: ToolDef{Name: "block"}, Handle: func(ctx context.Context, c Call) (Result, error) {
		close(started)
		<-ctx.Done()
		return Result{}, ctx.Err()
	}}}
	e, fc, _ := h.start(t, cfg)

	fc.result(t, "session.assign", assign("ses_1", 4, "harness"), nil)
	fc.result(t, "tool.call", callParams("c1", "block", nil), nil)
	await(t, started, "handler start")
	type stopped struct {
		Stopped bool `json:"stopped"`
	}
	var got stopped
	fc.result(t, "session.stop", map[string]string{"session_id": "ses_1", "reason": "user"}, &got)
	if !got.Stopped {
		t.Fatal("stop of a held session answered stopped:false")
	}
	f := fc.next(t, "tool.result", "session.ended")
	if f.Method != "tool.result" || !decode[resultView](t, f.Params).IsError {
		t.Fatalf("first after stop: %s %s, want the canceled tool.result", f.Method, f.Params)
	}
	f = fc.next(t, "tool.result", "session.ended")
	if f.Method != "session.ended" || f.ID == nil {
		t.Fatalf("then %s, want the session.ended request", f.Method)
	}
	if d := cmp.Diff(proto.SessionEndedParams{SessionID: "ses_1", Epoch: 4, Reason: "stopped"}, decode[proto.SessionEndedParams](t, f.Params)); d != "" {
		t.Errorf("session.ended (-want +got):\n%s", d)
	}
	fc.result(t, "session.stop", map[string]string{"session_id": "ses_9"}, &got)
	if got.Stopped {
		t.Error("stop of an unknown session answered stopped:true")
	}
	if ids := e.heartbeatParams().ActiveSessions; len(ids) != 0 {
		t.Errorf("sessions still held after session.ended: %v", ids)
	}
}

func TestSessionOneShot(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.Tools = []Tool{echoTool()}
	e, fc, _ := h.start(t, cfg)

	fc.result(t, "session.assign", assign("ses_1", 1, "tool"), nil)
	fc.result(t, "tool.call", callParams("c1", "echo", "x"), nil)
	if f := fc.next(t, "tool.result", "session.ended"); f.Method != "tool.result" {
		t.Fatalf("got %s before the result", f.Method)
	}
	f := fc.next(t, "tool.result", "session.ended")
	if f.Method != "session.ended" {
		t.Fatalf("a one-shot session did not end after its call: %s", f.Method)
	}
	if p := decode[proto.SessionEndedParams](t, f.Params); p.SessionID != "ses_1" || p.Reason != "completed" {
		t.Errorf("session.ended = %+v", p)
	}
	fc.barrier(t)
	if ids := e.heartbeatParams().ActiveSessions; len(ids) != 0 {
		t.Errorf("sessions still held: %v", ids)
	}
}

func TestDrain(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	e, fc, _ := h.start(t, cfg)

	fc.result(t, "session.assign", assign("ses_1", 1, "harness"), nil)
	var got struct {
		ActiveSessions []string `json:"active_sessions"`
	}
	fc.result(t, "executor.drain", map[string]string{"reason": "shutdown"}, &got)
	if d := cmp.Diff([]string{"ses_1"}, got.ActiveSessions); d != "" {
		t.Errorf("drain active_sessions (-want +got):\n%s", d)
	}
	if !e.Draining() {
		t.Error("not draining after executor.drain")
	}
	if rerr := fc.rpcError(t, "session.assign", assign("ses_2", 1, "harness")); rerr.Code != CodeOverCapacity {
		t.Errorf("assign while draining = %v, want -32009", rerr)
	}
	// Current work goes on: the held session still takes calls.
	fc.result(t, "session.assign", assign("ses_1", 1, "harness"), nil)

	// A new connection (another node) is not draining.
	_ = fc.ws.CloseNow()
	fc2 := h.conn(t)
	fc2.next(t, "executor.register")
	fc2.result(t, "session.assign", assign("ses_2", 1, "harness"), nil)
	if e.Draining() {
		t.Error("still draining on a new connection")
	}
}
