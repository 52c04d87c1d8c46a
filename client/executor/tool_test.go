package executor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func callParams(id, name string, input any) map[string]any {
	return map[string]any{"session_id": "ses_1", "tool_call_id": id, "name": name, "input": input}
}

type resultView struct {
	SessionID  string          `json:"session_id"`
	ToolCallID string          `json:"tool_call_id"`
	Content    json.RawMessage `json:"content"`
	IsError    bool            `json:"is_error"`
}

func nextResult(t testing.TB, fc *fakeConn) resultView {
	t.Helper()
	return decode[resultView](t, fc.next(t, "tool.result").Params)
}

// resultText is the text of a one-text-block content.
func resultText(t *testing.T, r resultView) string {
	t.Helper()
	var blocks []struct{ Type, Text string }
	if err := json.Unmarshal(r.Content, &blocks); err != nil || len(blocks) != 1 || blocks[0].Type != "text" {
		t.Fatalf("content %s is not one text block", r.Content)
	}
	return blocks[0].Text
}

func TestToolRoundTrip(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.Tools = []Tool{echoTool()}
	_, fc, _ := h.start(t, cfg)

	var ack map[string]bool
	fc.result(t, "tool.call", callParams("call_1", "echo", map[string]int{"n": 1}), &ack)
	if !ack["accepted"] {
		t.Fatalf("tool.call ack = %v", ack)
	}
	f := fc.next(t, "tool.result")
	if f.ID == nil {
		t.Fatal("tool.result must be a request")
	}
	got := decode[resultView](t, f.Params)
	want := resultView{SessionID: "ses_1", ToolCallID: "call_1", Content: json.RawMessage(`{"n":1}`)}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("tool.result (-want +got):\n%s", d)
	}
}

func TestToolErrors(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.Tools = []Tool{
		{Def: ToolDef{Name: "fail"}, Handle: func(context.Context, Call) (Result, error) { return Result{}, errors.New("disk full") }},
		{Def: ToolDef{Name: "panic"}, Handle: func(context.Context, Call) (Result, error) { panic("boom") }},
		{Def: ToolDef{Name: "slow"}, Handle: func(ctx context.Context, c Call) (Result, error) {
			<-ctx.Done()
			return Result{}, ctx.Err()
		}},
	}
	_, fc, _ := h.start(t, cfg)

	fc.result(t, "tool.call", callParams("c1", "fail", nil), nil)
	if r := nextResult(t, fc); !r.IsError || resultText(t, r) != "disk full" {
		t.Errorf("failing handler result = %+v", r)
	}
	fc.result(t, "tool.call", callParams("c2", "panic", nil), nil)
	if r := nextResult(t, fc); !r.IsError || !strings.Contains(resultText(t, r), "boom") {
		t.Errorf("panicking handler result = %+v", r)
	}
	p := callParams("c3", "slow", nil)
	p["timeout_ms"] = 20
	fc.result(t, "tool.call", p, nil)
	if r := nextResult(t, fc); !r.IsError || !strings.Contains(resultText(t, r), "timed out") {
		t.Errorf("timed out handler result = %+v", r)
	}

	rerr := fc.rpcError(t, "tool.call", callParams("c4", "nope", nil))
	if rerr.Code != CodeCapabilityMissing {
		t.Fatalf("unknown tool code %d, want -32012", rerr.Code)
	}
	if d := cmp.Diff(map[string]string{"reason": "capability_missing", "capability": "tool:nope"}, decode[map[string]string](t, rerr.Data)); d != "" {
		t.Errorf("unknown tool data (-want +got):\n%s", d)
	}
	// process.exec without a Process handler is just another unknown tool.
	if rerr := fc.rpcError(t, "tool.call", callParams("c5", ProcessExec, nil)); rerr.Reason() != "capability_missing" {
		t.Errorf("process.exec without a handler = %v", rerr)
	}
	if rerr := fc.rpcError(t, "tool.call", map[string]any{"name": "fail"}); rerr.Code != CodeInvalidParams {
		t.Errorf("tool.call without tool_call_id = %v, want -32602", rerr)
	}
}

func TestToolDuplicateNotRerun(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	var runs atomic.Int32
	gate := make(chan struct{})
	cfg.Tools = []Tool{{Def: ToolDef{Name: "count"}, Handle: func(ctx context.Context, c Call) (Result, error) {
		runs.Add(1)
		<-gate
		return TextResult("once"), nil
	}}}
	_, fc, _ := h.start(t, cfg)

	var ack map[string]bool
	fc.result(t, "tool.call", callParams("dup", "count", nil), &ack)
	fc.result(t, "tool.call", callParams("dup", "count", nil), &ack) // while running
	if !ack["accepted"] {
		t.Errorf("duplicate while running acked %v", ack)
	}
	close(gate)
	nextResult(t, fc)
	fc.result(t, "tool.call", callParams("dup", "count", nil), &ack) // after it finished
	if !ack["accepted"] {
		t.Errorf("duplicate after finishing acked %v", ack)
	}
	fc.barrier(t)
	if n := runs.Load(); n != 1 {
		t.Errorf("handler ran %d times, want 1", n)
	}
}

func TestToolCancel(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	started := make(chan struct{})
	cfg.Tools = []Tool{echoTool(), {Def: ToolDef{Name: "block"}, Handle: func(ctx context.Context, c Call) (Result, error) {
		close(started)
		<-ctx.Done()
		return TextResult("stopped anyway"), nil
	}}}
	_, fc, _ := h.start(t, cfg)

	fc.result(t, "tool.call", callParams("c1", "block", nil), nil)
	await(t, started, "handler start")
	type canceled struct {
		Canceled bool `json:"canceled"`
	}
	var got canceled
	fc.result(t, "tool.cancel", map[string]string{"session_id": "ses_1", "tool_call_id": "c1"}, &got)
	if !got.Canceled {
		t.Error("cancel of a running call answered canceled:false")
	}
	if r := nextResult(t, fc); !r.IsError || resultText(t, r) != "tool call canceled" {
		t.Errorf("canceled call result = %+v", r)
	}
	fc.result(t, "tool.cancel", map[string]string{"session_id": "ses_1", "tool_call_id": "c1"}, &got)
	if got.Canceled {
		t.Error("cancel of a finished call answered canceled:true")
	}
	fc.result(t, "tool.cancel", map[string]string{"session_id": "ses_1", "tool_call_id": "never"}, &got)
	if got.Canceled {
		t.Error("cancel of an unknown call answered canceled:true")
	}
}

func TestToolProgress(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.Tools = []Tool{{Def: ToolDef{Name: "work"}, Handle: func(ctx context.Context, c Call) (Result, error) {
		if err := c.Progress("half", 1, 2); err != nil {
			return Result{}, err
		}
		if err := c.Progress("more", 3, 0); err != nil {
			return Result{}, err
		}
		return TextResult("done"), nil
	}}}
	_, fc, _ := h.start(t, cfg)

	fc.result(t, "tool.call", callParams("c1", "work", nil), nil)
	var got []map[string]any
	for range 2 {
		f := fc.next(t, "tool.progress")
		if f.ID != nil {
			t.Error("tool.progress must be a notification")
		}
		got = append(got, decode[map[string]any](t, f.Params))
	}
	want := []map[string]any{
		{"session_id": "ses_1", "tool_call_id": "c1", "message": "half", "progress": float64(1), "total": float64(2)},
		{"session_id": "ses_1", "tool_call_id": "c1", "message": "more", "progress": float64(3)},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("progress (-want +got):\n%s", d)
	}
	if r := nextResult(t, fc); r.IsError {
		t.Errorf("result after progress = %+v", r)
	}
}

// TestToolEvent: a tool's Call.Event goes out as a held session.event
// {session_id, epoch, event:{type, data}} of the assigned session, before
// the call's tool.result; an event without a type is refused at once.
func TestToolEvent(t *testing.T) {
	h := newHarness(t)
	cfg := h.config(t)
	cfg.Tools = []Tool{{Def: ToolDef{Name: "work"}, Handle: func(ctx context.Context, c Call) (Result, error) {
		if err := c.Event("", nil); err == nil {
			return Result{}, errors.New("an event without a type was taken")
		}
		if err := c.Event("build.log", map[string]string{"line": "compiling"}); err != nil {
			return Result{}, err
		}
		return TextResult("done"), nil
	}}}
	_, fc, _ := h.start(t, cfg)
	fc.result(t, "session.assign", map[string]any{"session_id": "ses_1", "epoch": 4, "metadata": map[string]string{"source": "harness"}}, nil)
	fc.result(t, "tool.call", callParams("c1", "work", nil), nil)
	f := fc.next(t, "session.event", "tool.result")
	if f.Method != "session.event" || f.ID == nil {
		t.Fatalf("first %s (id %s), want the session.event request", f.Method, f.ID)
	}
	want := map[string]any{"session_id": "ses_1", "epoch": float64(4), "event": map[string]any{"type": "build.log", "data": map[string]any{"line": "compiling"}}}
	if d := cmp.Diff(want, decode[map[string]any](t, f.Params)); d != "" {
		t.Errorf("session.event (-want +got):\n%s", d)
	}
	if r := nextResult(t, fc); r.IsError {
		t.Errorf("result after the event = %+v", r)
	}
}

func TestResultHelpers(t *testing.T) {
	if got := string(TextResult("hi").Content); got != `[{"text":"hi","type":"text"}]` {
		t.Errorf("TextResult = %s", got)
	}
	if r := ErrorResult("no"); !r.IsError {
		t.Error("ErrorResult is not an error")
	}
	r, err := JSONResult(map[string]int{"a": 1})
	if err != nil || string(r.Content) != `{"a":1}` {
		t.Errorf("JSONResult = %s, %v", r.Content, err)
	}
	if _, err := JSONResult(func() {}); err == nil {
		t.Error("JSONResult of a func succeeded")
	}
}
