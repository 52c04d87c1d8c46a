package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/executor/proto"
)

// scriptAgent is a hand-written Agent whose Run is set per test.
type scriptAgent struct {
	run    func(ctx context.Context, t *Turn) error
	runs   atomic.Int32
	opened chan string // "session|ref" per Open
	closed chan string
}

func newScriptAgent(run func(ctx context.Context, t *Turn) error) *scriptAgent {
	return &scriptAgent{run: run, opened: make(chan string, 8), closed: make(chan string, 8)}
}

func (a *scriptAgent) Open(_ context.Context, id, ref string) (string, error) {
	a.opened <- id + "|" + ref
	return "ref-" + id, nil
}

func (a *scriptAgent) Run(ctx context.Context, t *Turn) error {
	a.runs.Add(1)
	return a.run(ctx, t)
}

func (a *scriptAgent) Close(_ context.Context, id string) error {
	a.closed <- id
	return nil
}

func agentConfig(h *fakeHarness, t *testing.T, a Agent, max int) Config {
	cfg := h.config(t)
	cfg.Scope = Machine("mch_1")
	cfg.Capabilities.Agent = &AgentCapability{MaxSessions: max, CustomTools: true}
	cfg.Agent = a
	return cfg
}

func turnStart(session, turn string, epoch int) map[string]any {
	return map[string]any{"session_id": session, "turn_id": turn, "input": []map[string]string{{"type": "text", "text": "hi"}},
		"metadata": map[string]any{"model_base_url": "http://h/v1/model", "model_token": "mt_1", "epoch": epoch}}
}

// eventView is an agent session.event as the harness sees it.
type eventView struct {
	SessionID string          `json:"session_id"`
	Epoch     int64           `json:"epoch"`
	TurnID    string          `json:"turn_id"`
	EventID   string          `json:"event_id"`
	Sequence  int64           `json:"sequence"`
	Event     json.RawMessage `json:"event"`
}

func (v eventView) typ(t *testing.T) string {
	return decode[map[string]any](t, v.Event)["type"].(string)
}

func nextEvent(t *testing.T, fc *fakeConn) (eventView, *proto.Frame) {
	t.Helper()
	f := fc.next(t, "session.event")
	return decode[eventView](t, f.Params), f
}

// messageText is the text of an agent.message event with one block.
func messageText(t *testing.T, v eventView) string {
	t.Helper()
	var ev struct {
		Type    string
		Content []struct{ Text string }
	}
	if err := json.Unmarshal(v.Event, &ev); err != nil || ev.Type != EventMessage || len(ev.Content) != 1 {
		t.Fatalf("event %s is not a one-block agent.message", v.Event)
	}
	return ev.Content[0].Text
}

func TestAgentTurn(t *testing.T) {
	h := newHarness(t)
	a := newScriptAgent(func(ctx context.Context, t *Turn) error {
		if _, err := t.Emit(ThinkingEvent("hmm")); err != nil {
			return err
		}
		for {
			select {
			case <-t.InputReady():
				for _, in := range t.Inputs() {
					var blocks []struct{ Text string }
					_ = json.Unmarshal(in.Content, &blocks)
					id := newID("evt_")
					_ = t.Delta(id, map[string]string{"text": "got"})
					ev := TextMessageEvent("got " + blocks[0].Text)
					ev.ID = id
					if _, err := t.Emit(ev); err != nil {
						return err
					}
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	})
	_, fc, _ := h.start(t, agentConfig(h, t, a, 0))

	var started proto.TurnStartResult
	fc.result(t, "turn.start", turnStart("ses_1", "turn_1", 5), &started)
	if d := cmp.Diff(proto.TurnStartResult{Accepted: true, ExecutorSessionRef: "ref-ses_1"}, started); d != "" {
		t.Errorf("turn.start result (-want +got):\n%s", d)
	}
	if got := await(t, a.opened, "Open"); got != "ses_1|" {
		t.Errorf("Open(%s), want a new conversation", got)
	}
	ev, f := nextEvent(t, fc)
	if f.ID == nil || ev.Sequence != 1 || ev.typ(t) != EventStatusRunning || ev.Epoch != 5 || ev.TurnID != "turn_1" || ev.EventID == "" {
		t.Errorf("first event = %+v", ev)
	}
	if ev, _ = nextEvent(t, fc); ev.Sequence != 2 || string(ev.Event) != `{"type":"agent.thinking","text":"hmm"}` {
		t.Errorf("second event = %+v %s", ev, ev.Event)
	}

	fc.result(t, "turn.start", turnStart("ses_1", "turn_1", 5), &started) // idempotent by turn_id
	if !started.Accepted || started.ExecutorSessionRef != "ref-ses_1" {
		t.Errorf("repeated turn.start = %+v", started)
	}
	rerr := fc.rpcError(t, "turn.start", turnStart("ses_1", "turn_2", 5))
	if rerr.Code != CodeConflict || rerr.Reason() != "turn_running" {
		t.Errorf("turn.start while running = %v, want -32013", rerr)
	}

	input := func(id, turn, text string) map[string]any {
		return map[string]any{"session_id": "ses_1", "turn_id": turn, "input_id": id, "input": []map[string]string{{"type": "text", "text": text}}}
	}
	fc.result(t, "turn.input", input("in_1", "turn_1", "hello"), nil)
	fc.result(t, "turn.input", input("in_1", "turn_1", "hello"), nil) // idempotent by input_id
	fc.result(t, "turn.input", input("in_2", "turn_1", "again"), nil)
	if rerr := fc.rpcError(t, "turn.input", input("in_3", "turn_9", "x")); rerr.Code != CodeConflict {
		t.Errorf("turn.input to another turn = %v, want -32013", rerr)
	}
	delta := fc.next(t, "session.event_delta")
	ev, _ = nextEvent(t, fc)
	if delta.ID != nil || decode[proto.EventDeltaParams](t, delta.Params).EventID != ev.EventID {
		t.Errorf("delta %s does not preview event %s", delta.Params, ev.EventID)
	}
	if ev.Sequence != 3 || messageText(t, ev) != "got hello" {
		t.Errorf("third event = %d %s", ev.Sequence, ev.Event)
	}
	if ev, _ = nextEvent(t, fc); ev.Sequence != 4 || messageText(t, ev) != "got again" {
		t.Errorf("fourth event = %d %s (a repeated input_id was delivered twice?)", ev.Sequence, ev.Event)
	}

	var canceled struct {
		Canceled bool `json:"canceled"`
	}
	fc.result(t, "turn.cancel", proto.TurnCancelParams{SessionID: "ses_1", TurnID: "turn_1"}, &canceled)
	if !canceled.Canceled {
		t.Error("turn.cancel of the running turn answered canceled:false")
	}
	if ev, _ = nextEvent(t, fc); ev.Sequence != 5 || string(ev.Event) != `{"type":"session.status_idle","turn_outcome":"canceled"}` {
		t.Errorf("event after cancel = %d %s", ev.Sequence, ev.Event)
	}
	fc.result(t, "turn.cancel", proto.TurnCancelParams{SessionID: "ses_1", TurnID: "turn_1"}, &canceled)
	if canceled.Canceled {
		t.Error("second turn.cancel answered canceled:true")
	}
	if rerr := fc.rpcError(t, "turn.input", input("in_4", "turn_1", "late")); rerr.Code != CodeConflict {
		t.Errorf("turn.input after the turn ended = %v, want -32013", rerr)
	}

	// The session stays open for the next turn, with no second Open.
	fc.result(t, "turn.start", turnStart("ses_1", "turn_2", 5), &started)
	if ev, _ = nextEvent(t, fc); ev.Sequence != 6 || ev.TurnID != "turn_2" {
		t.Errorf("next turn's first event = %+v", ev)
	}
	if ev, _ = nextEvent(t, fc); ev.Sequence != 7 || ev.typ(t) != EventThinking { // emitted by Run
		t.Errorf("next turn's second event = %+v", ev)
	}
	if n := a.runs.Load(); n != 2 {
		t.Errorf("Run called %d times, want 2", n)
	}
	select {
	case got := <-a.opened:
		t.Errorf("second Open(%s) for an open session", got)
	default:
	}
}

func TestAgentFailedTurn(t *testing.T) {
	h := newHarness(t)
	a := newScriptAgent(func(ctx context.Context, t *Turn) error { return errors.New("model unreachable") })
	_, fc, _ := h.start(t, agentConfig(h, t, a, 0))
	fc.result(t, "turn.start", turnStart("ses_1", "turn_1", 1), nil)
	var got []string
	for range 3 {
		ev, _ := nextEvent(t, fc)
		got = append(got, string(ev.Event))
	}
	want := []string{
		`{"type":"session.status_running"}`,
		`{"type":"agent.error","message":"model unreachable"}`,
		`{"type":"session.status_idle","turn_outcome":"failed"}`,
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("failed turn events (-want +got):\n%s", d)
	}
}

func TestAgentEventsResentAfterReconnect(t *testing.T) {
	h := newHarness(t)
	h.answer("session.event", func(p json.RawMessage) (any, *RPCError) {
		var v eventView
		_ = json.Unmarshal(p, &v)
		if v.Sequence > 2 {
			return noAnswer{}, nil
		}
		return map[string]int64{"acked_sequence": v.Sequence}, nil
	})
	a := newScriptAgent(func(ctx context.Context, t *Turn) error {
		for i := range 4 {
			if _, err := t.Emit(TextMessageEvent(fmt.Sprint("m", i+1))); err != nil {
				return err
			}
		}
		<-ctx.Done()
		return ctx.Err()
	})
	_, fc, _ := h.start(t, agentConfig(h, t, a, 0))
	fc.result(t, "turn.start", turnStart("ses_1", "turn_1", 3), nil)
	sent := map[int64]*proto.Frame{}
	for range 5 {
		ev, f := nextEvent(t, fc)
		sent[ev.Sequence] = f
	}
	fc.barrier(t) // the acks of 1 and 2 are read
	_ = fc.ws.CloseNow()

	h.answer("session.event", nil)
	fc2 := h.conn(t)
	reg := decode[proto.RegisterParams](t, fc2.next(t, "executor.register").Params)
	two := int64(2)
	want := &proto.Resume{ExecutorID: "exr_1", ActiveSessions: []proto.SessionEpoch{{SessionID: "ses_1", Epoch: 3, AckedSequence: &two}}}
	if d := cmp.Diff(want, reg.Resume); d != "" {
		t.Errorf("resume (-want +got):\n%s", d)
	}
	for seq := int64(3); seq <= 5; seq++ {
		ev, f := nextEvent(t, fc2)
		if ev.Sequence != seq || string(f.ID) != string(sent[seq].ID) || string(f.Params) != string(sent[seq].Params) {
			t.Fatalf("resent %d (id %s), want %d re-sent unchanged (id %s)", ev.Sequence, f.ID, seq, sent[seq].ID)
		}
	}
	fc2.result(t, "turn.cancel", proto.TurnCancelParams{SessionID: "ses_1", TurnID: "turn_1"}, nil)
	if ev, _ := nextEvent(t, fc2); ev.Sequence != 6 || ev.typ(t) != EventStatusIdle {
		t.Errorf("new event after the resend = %d %s", ev.Sequence, ev.Event)
	}
}

func TestAgentInteractionCustomToolTokens(t *testing.T) {
	h := newHarness(t)
	h.answer("model_token.refresh", func(json.RawMessage) (any, *RPCError) {
		return map[string]any{"model_token": "mt_2", "expires_at": time.Now().Add(time.Hour).UTC()}, nil
	})
	h.answer("tools_token.refresh", func(json.RawMessage) (any, *RPCError) {
		return nil, rpcErr(CodeTurnInactive, "turn inactive", map[string]string{"reason": "turn_inactive"})
	})
	const apprID = "appr_0123456789abcdef01234567"
	a := newScriptAgent(func(ctx context.Context, t *Turn) error {
		ans, err := t.RequestInteraction(ctx, Interaction{ID: apprID, Kind: KindPermission, ToolUseID: "toolu_1", Prompt: "rm -rf build?"})
		if err != nil {
			return err
		}
		t.Emit(TextMessageEvent(ans.Status + "/" + ans.Decision + "/" + ans.PlatformID))
		res, err := t.CustomTool(ctx, "pick_color", json.RawMessage(`{"q":1}`))
		if err != nil {
			return err
		}
		t.Emit(MessageEvent(res.Content))
		tok, err := t.RefreshModelToken(ctx)
		if err != nil {
			return err
		}
		t.Emit(TextMessageEvent(tok.Token))
		var rerr *RPCError
		if _, err := t.RefreshToolsToken(ctx); !errors.As(err, &rerr) || rerr.Code != CodeTurnInactive {
			return fmt.Errorf("tools token: %v", err)
		}
		return nil
	})
	_, fc, _ := h.start(t, agentConfig(h, t, a, 0))
	fc.result(t, "turn.start", turnStart("ses_1", "turn_1", 2), nil)

	f := fc.next(t, "interaction.request")
	wantReq := map[string]any{"session_id": "ses_1", "turn_id": "turn_1", "interaction_id": apprID, "kind": "permission",
		"tool_use_id": "toolu_1", "prompt": "rm -rf build?"}
	if d := cmp.Diff(wantReq, decode[map[string]any](t, f.Params)); d != "" {
		t.Errorf("interaction.request (-want +got):\n%s", d)
	}
	resp := map[string]any{"interaction_id": apprID, "status": "resolved", "answer": map[string]string{"decision": "allow"}}
	var acc proto.Accepted
	fc.result(t, "interaction.response", resp, &acc)
	if !acc.Accepted {
		t.Error("first interaction.response not accepted")
	}
	fc.result(t, "interaction.response", resp, &acc)
	if acc.Accepted {
		t.Error("repeated interaction.response accepted")
	}

	var custom eventView
	for custom.EventID == "" {
		ev, _ := nextEvent(t, fc)
		switch ev.typ(t) {
		case EventMessage:
			if got := messageText(t, ev); got != "resolved/allow/int_1" {
				t.Errorf("answer seen by the agent: %q", got)
			}
		case EventCustomToolUse:
			custom = ev
		}
	}
	if d := cmp.Diff(map[string]any{"type": EventCustomToolUse, "name": "pick_color", "input": map[string]any{"q": float64(1)}},
		decode[map[string]any](t, custom.Event)); d != "" {
		t.Errorf("custom tool use event (-want +got):\n%s", d)
	}
	result := map[string]any{"session_id": "ses_1", "tool_use_id": custom.EventID, "content": []map[string]string{{"type": "text", "text": "blue"}}, "is_error": false}
	fc.result(t, "agent.custom_tool_result", result, &acc)
	if !acc.Accepted {
		t.Error("custom tool result not accepted")
	}
	fc.result(t, "agent.custom_tool_result", result, &acc)
	if acc.Accepted {
		t.Error("repeated custom tool result accepted")
	}
	result["tool_use_id"] = "toolu_unknown"
	fc.result(t, "agent.custom_tool_result", result, &acc)
	if acc.Accepted {
		t.Error("custom tool result for an unknown call accepted")
	}
	if ev, _ := nextEvent(t, fc); messageText(t, ev) != "blue" {
		t.Errorf("agent saw custom result %s", ev.Event)
	}
	mt := fc.next(t, "model_token.refresh")
	if d := cmp.Diff(map[string]any{"session_id": "ses_1", "turn_id": "turn_1"}, decode[map[string]any](t, mt.Params)); d != "" {
		t.Errorf("model_token.refresh params (-want +got):\n%s", d)
	}
	if ev, _ := nextEvent(t, fc); messageText(t, ev) != "mt_2" {
		t.Errorf("agent saw model token %s", ev.Event)
	}
	tt := fc.next(t, "tools_token.refresh")
	if d := cmp.Diff(map[string]any{"session_id": "ses_1", "turn_id": "turn_1", "epoch": float64(2)}, decode[map[string]any](t, tt.Params)); d != "" {
		t.Errorf("tools_token.refresh params (-want +got):\n%s", d)
	}
	if ev, _ := nextEvent(t, fc); string(ev.Event) != `{"type":"session.status_idle","turn_outcome":"completed"}` {
		t.Errorf("last event %s", ev.Event)
	}
}

func TestAgentCancelWithdrawsInteraction(t *testing.T) {
	h := newHarness(t)
	a := newScriptAgent(func(ctx context.Context, t *Turn) error {
		_, err := t.RequestInteraction(ctx, Interaction{ID: "q1", Kind: KindQuestion, Prompt: "which?"})
		return err
	})
	_, fc, _ := h.start(t, agentConfig(h, t, a, 0))
	fc.result(t, "turn.start", turnStart("ses_1", "turn_1", 1), nil)
	fc.next(t, "interaction.request")
	fc.result(t, "turn.cancel", proto.TurnCancelParams{SessionID: "ses_1", TurnID: "turn_1"}, nil)
	f := fc.next(t, "interaction.cancel")
	if d := cmp.Diff(proto.InteractionCancelParams{InteractionID: "q1", Reason: "turn_canceled"}, decode[proto.InteractionCancelParams](t, f.Params)); d != "" {
		t.Errorf("interaction.cancel (-want +got):\n%s", d)
	}
	if ev := fc.until(t, "session.event", func(f *proto.Frame) bool {
		return decode[eventView](t, f.Params).typ(t) == EventStatusIdle
	}); decode[map[string]string](t, decode[eventView](t, ev.Params).Event)["turn_outcome"] != OutcomeCanceled {
		t.Errorf("outcome of a canceled turn: %s", ev.Params)
	}
	var acc proto.Accepted
	fc.result(t, "interaction.response", map[string]any{"interaction_id": "q1", "status": "canceled"}, &acc)
	if acc.Accepted {
		t.Error("response to a withdrawn interaction accepted")
	}
}

func TestAgentCustomToolTimeout(t *testing.T) {
	h := newHarness(t)
	a := newScriptAgent(func(ctx context.Context, t *Turn) error {
		wctx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
		defer cancel()
		if _, err := t.CustomTool(wctx, "slow", nil); !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("CustomTool = %v", err)
		}
		return nil
	})
	_, fc, _ := h.start(t, agentConfig(h, t, a, 0))
	fc.result(t, "turn.start", turnStart("ses_1", "turn_1", 1), nil)
	use := fc.until(t, "session.event", func(f *proto.Frame) bool {
		return decode[eventView](t, f.Params).typ(t) == EventCustomToolUse
	})
	id := decode[eventView](t, use.Params).EventID
	ev, _ := nextEvent(t, fc)
	var res struct {
		ToolUseID string `json:"tool_use_id"`
		IsError   bool   `json:"is_error"`
	}
	_ = json.Unmarshal(ev.Event, &res)
	if ev.typ(t) != EventToolResult || res.ToolUseID != id || !res.IsError {
		t.Errorf("after the custom tool timed out: %s", ev.Event)
	}
	if ev, _ = nextEvent(t, fc); ev.typ(t) != EventStatusIdle {
		t.Errorf("turn did not continue: %s", ev.Event)
	}
	var acc proto.Accepted
	fc.result(t, "agent.custom_tool_result", map[string]any{"session_id": "ses_1", "tool_use_id": id, "content": "late"}, &acc)
	if acc.Accepted {
		t.Error("a result after the timeout was accepted")
	}
}

func TestAgentSessionClose(t *testing.T) {
	h := newHarness(t)
	a := newScriptAgent(func(ctx context.Context, t *Turn) error {
		<-ctx.Done()
		return ctx.Err()
	})
	_, fc, _ := h.start(t, agentConfig(h, t, a, 1))
	fc.result(t, "turn.start", turnStart("ses_1", "turn_1", 1), nil)
	await(t, a.opened, "Open")
	nextEvent(t, fc) // running, acked

	if rerr := fc.rpcError(t, "turn.start", turnStart("ses_2", "turn_9", 1)); rerr.Code != CodeOverCapacity {
		t.Errorf("turn.start beyond max_sessions = %v, want -32009", rerr)
	}

	h.hold("session.event", true)
	var closed struct {
		Closed bool `json:"closed"`
	}
	fc.result(t, "session.close", proto.SessionCloseParams{SessionID: "ses_1"}, &closed)
	if !closed.Closed {
		t.Fatal("session.close of an open session answered closed:false")
	}
	idle, _ := nextEvent(t, fc)
	if idle.typ(t) != EventStatusIdle {
		t.Fatalf("after session.close: %s", idle.Event)
	}
	fc.barrier(t)
	select {
	case <-a.closed:
		t.Fatal("Agent.Close ran before the session's events were acknowledged")
	default:
	}
	if rerr := fc.rpcError(t, "turn.start", turnStart("ses_1", "turn_2", 1)); rerr.Code != CodeConflict {
		t.Errorf("turn.start on a closing session = %v, want -32013", rerr)
	}

	h.hold("session.event", false)
	_ = fc.ws.CloseNow()
	fc2 := h.conn(t)
	if f := fc2.next(t, "session.event", "session.ended"); f.Method != "session.event" {
		t.Fatalf("%s before the held event", f.Method)
	}
	ended := fc2.next(t, "session.ended")
	if d := cmp.Diff(proto.SessionEndedParams{SessionID: "ses_1", Epoch: 1, Reason: "closed"}, decode[proto.SessionEndedParams](t, ended.Params)); d != "" {
		t.Errorf("session.ended (-want +got):\n%s", d)
	}
	if got := await(t, a.closed, "Agent.Close"); got != "ses_1" {
		t.Errorf("Close(%s)", got)
	}
	fc2.result(t, "session.close", proto.SessionCloseParams{SessionID: "ses_1"}, &closed)
	if closed.Closed {
		t.Error("session.close of a closed session answered closed:true")
	}
	// A later turn.start opens a new conversation.
	fc2.result(t, "turn.start", turnStart("ses_1", "turn_3", 2), nil)
	if got := await(t, a.opened, "second Open"); got != "ses_1|" {
		t.Errorf("reopen = %s", got)
	}
}

func TestAgentMissing(t *testing.T) {
	h := newHarness(t)
	_, fc, _ := h.start(t, h.config(t))
	for _, m := range []string{"turn.start", "turn.input", "turn.cancel", "session.close", "agent.custom_tool_result"} {
		rerr := fc.rpcError(t, m, turnStart("ses_1", "turn_1", 1))
		if rerr.Code != CodeCapabilityMissing || !json.Valid(rerr.Data) || decode[map[string]string](t, rerr.Data)["capability"] != "agent" {
			t.Errorf("%s without an agent = %v", m, rerr)
		}
	}
}

func TestAgentEventJSON(t *testing.T) {
	for _, tc := range []struct {
		ev   AgentEvent
		want string
	}{
		{mustEvent(EventStatusRunning, nil), `{"type":"session.status_running"}`},
		{ThinkingEvent("x"), `{"type":"agent.thinking","text":"x"}`},
		{ToolUseEvent("tu_1", "ls", nil, PermissionAsk), `{"type":"agent.tool_use","tool_use_id":"tu_1","name":"ls","input":{},"evaluated_permission":"ask"}`},
		{ToolResultEvent("tu_1", nil, true), `{"type":"agent.tool_result","tool_use_id":"tu_1","content":[],"is_error":true}`},
		{ErrorEvent("bad"), `{"type":"agent.error","message":"bad"}`},
		{AgentEvent{Type: "x", Fields: json.RawMessage(" { } ")}, `{"type":"x"}`},
	} {
		b, err := json.Marshal(tc.ev)
		if err != nil || string(b) != tc.want {
			t.Errorf("marshal %s = %s, %v; want %s", tc.ev.Type, b, err, tc.want)
			continue
		}
		var back AgentEvent
		if err := json.Unmarshal(b, &back); err != nil || back.Type != tc.ev.Type {
			t.Errorf("round trip of %s: %+v, %v", b, back, err)
		}
	}
	if _, err := NewEvent("x", []int{1}); err == nil {
		t.Error("NewEvent accepted non-object fields")
	}
	if _, err := json.Marshal(AgentEvent{Type: "x", Fields: json.RawMessage(`[1]`)}); err == nil {
		t.Error("marshal accepted non-object fields")
	}
	if _, err := json.Marshal(AgentEvent{}); err == nil {
		t.Error("marshal accepted an event without a type")
	}
}

func TestAgentCallRetriedAfterReconnect(t *testing.T) {
	h := newHarness(t)
	h.hold("model_token.refresh", true)
	a := newScriptAgent(func(ctx context.Context, t *Turn) error {
		tok, err := t.RefreshModelToken(ctx)
		if err != nil {
			return err
		}
		_, err = t.Emit(TextMessageEvent(tok.Token))
		return err
	})
	_, fc, _ := h.start(t, agentConfig(h, t, a, 0))
	fc.result(t, "turn.start", turnStart("ses_1", "turn_1", 1), nil)
	fc.next(t, "model_token.refresh")
	_ = fc.ws.CloseNow()
	h.answer("model_token.refresh", func(json.RawMessage) (any, *RPCError) {
		return map[string]any{"model_token": "mt_new", "expires_at": time.Now().Add(time.Hour).UTC()}, nil
	})
	h.hold("model_token.refresh", false)
	fc2 := h.conn(t)
	fc2.next(t, "model_token.refresh")
	ev := fc2.until(t, "session.event", func(f *proto.Frame) bool {
		return decode[eventView](t, f.Params).typ(t) == EventMessage
	})
	if got := messageText(t, decode[eventView](t, ev.Params)); got != "mt_new" {
		t.Errorf("token after the retry = %q", got)
	}
}

func TestAgentInteractionExpires(t *testing.T) {
	h := newHarness(t)
	a := newScriptAgent(func(ctx context.Context, t *Turn) error {
		ans, err := t.RequestInteraction(ctx, Interaction{Kind: KindQuestion, Prompt: "?", ExpiresAt: time.Now().Add(20 * time.Millisecond)})
		if err != nil {
			return err
		}
		_, err = t.Emit(TextMessageEvent(ans.Status))
		return err
	})
	_, fc, _ := h.start(t, agentConfig(h, t, a, 0))
	fc.result(t, "turn.start", turnStart("ses_1", "turn_1", 1), nil)
	req := decode[map[string]any](t, fc.next(t, "interaction.request").Params)
	if req["expires_at"] == nil || req["interaction_id"] == "" {
		t.Errorf("interaction.request = %v", req)
	}
	ev := fc.until(t, "session.event", func(f *proto.Frame) bool {
		return decode[eventView](t, f.Params).typ(t) == EventMessage
	})
	if got := messageText(t, decode[eventView](t, ev.Params)); got != "expired" {
		t.Errorf("expired interaction answered %q", got)
	}
}

// TestAgentTurnRightAfterIdle: once the harness has seen a turn's
// session.status_idle, the session takes the next turn.start at once.
func TestAgentTurnRightAfterIdle(t *testing.T) {
	h := newHarness(t)
	a := newScriptAgent(func(context.Context, *Turn) error { return nil })
	_, fc, _ := h.start(t, agentConfig(h, t, a, 0))
	var seq int64
	for i := range 100 {
		turn := fmt.Sprint("turn_", i)
		f := fc.call(t, "turn.start", turnStart("ses_1", turn, 1))
		if f.Error != nil {
			t.Fatalf("turn.start %s right after the previous status_idle: %v", turn, f.Error)
		}
		for _, want := range []string{EventStatusRunning, EventStatusIdle} {
			ev, _ := nextEvent(t, fc)
			seq++
			if ev.TurnID != turn || ev.typ(t) != want || ev.Sequence != seq {
				t.Fatalf("event %d %s of %s, want %d %s of %s", ev.Sequence, ev.Event, ev.TurnID, seq, want, turn)
			}
		}
	}
}

// TestAgentTurnWorkspacePath: turn.start's workspace_path becomes the
// local directory of the session's workspace view, below Files.Root; an
// executor without Files passes none on.
func TestAgentTurnWorkspacePath(t *testing.T) {
	for _, files := range []bool{true, false} {
		h := newHarness(t)
		got := make(chan string, 1)
		a := newScriptAgent(func(_ context.Context, t *Turn) error {
			got <- t.Metadata.WorkspacePath
			return nil
		})
		cfg := agentConfig(h, t, a, 0)
		root := t.TempDir()
		want := ""
		if files {
			cfg.Files = &FileMounts{Root: root, Mode: MountSync}
			want = filepath.Join(root, "sessions", "ses_1", "workspace")
		}
		_, fc, _ := h.start(t, cfg)
		p := turnStart("ses_1", "turn_1", 1)
		p["metadata"].(map[string]any)["workspace_path"] = "/sessions/ses_1/workspace"
		fc.result(t, "turn.start", p, nil)
		if g := <-got; g != want {
			t.Errorf("files %v: Turn.Metadata.WorkspacePath %q, want %q", files, g, want)
		}
	}
}

// TestAgentAdoptsResumedEpoch: the harness resumes an agent session in a
// new epoch and says so in the register result. The executor re-sends
// its unacknowledged event with the same id under the new epoch, stamps
// new events with it, and a tools_token.refresh interrupted by the
// reconnect (its epoch now refused) is sent again for the new epoch.
func TestAgentAdoptsResumedEpoch(t *testing.T) {
	h := newHarness(t)
	h.answer("session.event", func(p json.RawMessage) (any, *RPCError) {
		if v := decode[eventView](t, p); v.Sequence > 2 {
			return noAnswer{}, nil
		}
		return map[string]any{}, nil
	})
	h.hold("tools_token.refresh", true)
	a := newScriptAgent(func(ctx context.Context, t *Turn) error {
		for _, text := range []string{"m1", "m2"} {
			if _, err := t.Emit(TextMessageEvent(text)); err != nil {
				return err
			}
		}
		tok, err := t.RefreshToolsToken(ctx)
		if err != nil {
			return err
		}
		if _, err := t.Emit(TextMessageEvent(fmt.Sprint(tok.Token, " ", t.Epoch(), " ", t.Metadata.Epoch))); err != nil {
			return err
		}
		<-ctx.Done()
		return ctx.Err()
	})
	_, fc, _ := h.start(t, agentConfig(h, t, a, 0))
	fc.result(t, "turn.start", turnStart("ses_1", "turn_1", 3), nil)
	var held *proto.Frame
	for range 3 {
		if ev, f := nextEvent(t, fc); ev.Sequence == 3 {
			held = f
		}
	}
	if p := decode[proto.ToolsTokenRefreshParams](t, fc.next(t, "tools_token.refresh").Params); p.Epoch != 3 {
		t.Fatalf("tools_token.refresh for epoch %d, want 3", p.Epoch)
	}
	fc.barrier(t) // the acks of 1 and 2 are read
	h.answer("executor.register", func(json.RawMessage) (any, *RPCError) {
		return map[string]any{"executor_id": "exr_1", "connection_id": "conn_2", "heartbeat_interval_ms": 3_600_000,
			"lease_expires_at": time.Now().Add(time.Minute).UTC(), "token_expires_at": time.Now().Add(time.Hour).UTC(),
			"sessions": []map[string]any{{"session_id": "ses_1", "epoch": 7, "acked_sequence": 2}}}, nil
	})
	h.answer("session.event", nil)
	var asked []int64
	h.answer("tools_token.refresh", func(p json.RawMessage) (any, *RPCError) {
		ep := decode[proto.ToolsTokenRefreshParams](t, p).Epoch
		asked = append(asked, ep) // answers run on the connection's reader, one at a time
		if ep != 7 {
			return nil, rpcErr(CodeTurnInactive, "superseded epoch", map[string]string{"reason": "turn_inactive"})
		}
		return map[string]any{"tools_mcp_token": "tt_7", "expires_at": time.Now().Add(time.Hour).UTC()}, nil
	})
	h.hold("tools_token.refresh", false)
	_ = fc.ws.CloseNow()

	fc2 := h.conn(t)
	fc2.next(t, "executor.register")
	ev, f := nextEvent(t, fc2)
	want := decode[eventView](t, held.Params)
	want.Epoch = 7
	if ev.Sequence != 3 || string(f.ID) != string(held.ID) || !cmp.Equal(want, ev) {
		t.Fatalf("resent %+v (id %s), want %+v under the new epoch (id %s)", ev, f.ID, want, held.ID)
	}
	ev, _ = nextEvent(t, fc2)
	if ev.Sequence != 4 || ev.Epoch != 7 || messageText(t, ev) != "tt_7 7 3" {
		t.Fatalf("event after the resume: %+v %s", ev, ev.Event)
	}
	fc2.barrier(t)
	if !cmp.Equal(asked, []int64{3, 7}) {
		t.Errorf("tools_token.refresh asked for epochs %v, want [3 7]", asked)
	}
}
