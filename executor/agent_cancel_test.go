package executor

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
)

// heldMethods lists the methods held for an agent session.
func (e *env) heldMethods(sessionID string) []string {
	e.hub.mu.Lock()
	defer e.hub.mu.Unlock()
	var out []string
	if a := e.hub.ag.sessions[sessionID]; a != nil {
		for _, d := range a.out {
			out = append(out, d.method)
		}
	}
	return out
}

// TestAgentCancelWhileDetached: a turn.cancel while the executor is away
// is held, its turn's undelivered custom tool result is dropped, and on
// resume turn.cancel goes out before the next turn.start.
func TestAgentCancelWhileDetached(t *testing.T) {
	e, _ := brainEnv(t)
	x := e.agentExecutor(t, "exe_a", proto.AgentCapability{CustomTools: true}, nil)
	p := e.startOn(t, x, turnOf("ses_1", "trn_1"))
	ep := p.Metadata.Epoch
	x.acked(agentEvent("ses_1", ep, "trn_1", "toolu_1", 1, `{"type":"agent.custom_tool_use","name":"lookup","input":{}}`))
	x.kill()
	e.clock.WaitArmed(t, window)

	if err := e.hub.CustomToolResult("ses_1", "toolu_1", baton.ClientResult{Content: json.RawMessage(`"42"`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.hub.CancelTurn(context.Background(), "ses_1", "trn_1"); !errors.Is(err, ErrDetached) {
		t.Fatalf("cancel while detached: %v, want ErrDetached", err)
	}
	if got := e.heldMethods("ses_1"); len(got) != 1 || got[0] != proto.MethodTurnCancel {
		t.Fatalf("held %v, want only turn.cancel (the custom tool result dropped)", got)
	}
	if err := e.hub.CustomToolResult("ses_1", "toolu_1", baton.ClientResult{Content: json.RawMessage(`"43"`)}); err == nil {
		t.Fatal("a result for a cancelled turn was taken")
	}
	if _, err := e.hub.CancelTurn(context.Background(), "ses_1", "trn_1"); !errors.Is(err, ErrDetached) {
		t.Fatalf("second cancel while detached: %v", err)
	}
	if got := e.heldMethods("ses_1"); len(got) != 1 {
		t.Fatalf("held %v after a repeated cancel, want one turn.cancel", got)
	}

	y, res := e.agentRegister(t, "exe_a", proto.AgentCapability{CustomTools: true},
		&proto.Resume{ExecutorID: "exe_a", ActiveSessions: []proto.SessionEpoch{{SessionID: "ses_1", Epoch: ep, AckedSequence: ptr(int64(1))}}})
	ep = res.Sessions[0].Epoch
	done := e.startAsync(turnOf("ses_1", "trn_2"))
	var cp proto.TurnCancelParams
	f := y.expect(proto.MethodTurnCancel, &cp)
	if cp.SessionID != "ses_1" || cp.TurnID != "trn_1" {
		t.Fatalf("turn.cancel %+v", cp)
	}
	y.reply(f, proto.TurnCancelResult{Canceled: true})
	var sp proto.TurnStartParams
	y.reply(y.expect(proto.MethodTurnStart, &sp), proto.TurnStartResult{Accepted: true})
	if err := wait(t, done); err != nil || sp.TurnID != "trn_2" {
		t.Fatalf("turn.start %+v after the held cancel: %v", sp, err)
	}
	// The cancelled turn's end still comes, and is acknowledged.
	if got := y.acked(agentEvent("ses_1", ep, "trn_1", "evt_2", 2, `{"type":"session.status_idle","turn_outcome":"canceled"}`)); got != 2 {
		t.Fatalf("acked %d", got)
	}
}

// TestAgentCustomResultAfterTurnEnded: a result for a custom tool call
// whose turn is over is not sent.
func TestAgentCustomResultAfterTurnEnded(t *testing.T) {
	e, _ := brainEnv(t)
	x := e.agentExecutor(t, "exe_a", proto.AgentCapability{CustomTools: true}, nil)
	ep := e.startOn(t, x, turnOf("ses_1", "trn_1")).Metadata.Epoch
	x.acked(agentEvent("ses_1", ep, "trn_1", "toolu_1", 1, `{"type":"agent.custom_tool_use","name":"lookup","input":{}}`))
	x.acked(agentEvent("ses_1", ep, "trn_1", "evt_2", 2, `{"type":"session.status_idle","turn_outcome":"failed"}`))
	if err := e.hub.CustomToolResult("ses_1", "toolu_1", baton.ClientResult{Content: json.RawMessage(`"42"`)}); !errors.Is(err, ErrTurnOver) {
		t.Fatalf("result after the turn ended: %v, want ErrTurnOver", err)
	}
	if got := e.heldMethods("ses_1"); len(got) != 0 {
		t.Fatalf("held %v", got)
	}
}

// TestAgentCustomToolUseWithoutCapability: an executor that did not
// declare agent.custom_tools has its agent.custom_tool_use refused
// (-32012, the events after it still flow) and is never sent a result.
func TestAgentCustomToolUseWithoutCapability(t *testing.T) {
	e, sink := brainEnv(t)
	x := e.agentExecutor(t, "exe_a", proto.AgentCapability{MaxSessions: 4}, nil)
	ep := e.startOn(t, x, turnOf("ses_1", "trn_1")).Metadata.Epoch
	pe := x.fails(proto.MethodSessionEvent, agentEvent("ses_1", ep, "trn_1", "toolu_1", 1, `{"type":"agent.custom_tool_use","name":"lookup","input":{}}`))
	if pe.Code != proto.CodeCapabilityMissing || pe.Detail().Reason != proto.ReasonCapabilityMissing || pe.Detail().Capability != "agent.custom_tools" {
		t.Fatalf("custom tool use refused with %+v", pe)
	}
	if got := x.acked(agentEvent("ses_1", ep, "trn_1", "evt_2", 2, `{"type":"agent.message","content":[]}`)); got != 2 {
		t.Fatalf("next event acked %d", got)
	}
	if ev := wait(t, sink.events); ev.EventID != "evt_2" {
		t.Fatalf("sink heard %s first", ev.EventID)
	}
	if err := e.hub.CustomToolResult("ses_1", "toolu_1", baton.ClientResult{Content: json.RawMessage(`"42"`)}); !errors.Is(err, ErrNoCustomTools) {
		t.Fatalf("result for an executor without custom tools: %v", err)
	}
	if got := e.heldMethods("ses_1"); len(got) != 0 {
		t.Fatalf("held %v", got)
	}
}

// loadSink is a fakeSink that, as the engine does, restores a session's
// open interaction from its log on first use.
type loadSink struct {
	*fakeSink
	hub    *Hub
	loaded chan string
}

func (s loadSink) LoadAgent(_ context.Context, sessionID string) error {
	select {
	case s.loaded <- sessionID:
		s.hub.RestoreInteraction(sessionID, "int_1", "ixn_1", "question", "trn_9", "", nil)
	default: // loaded once
	}
	return nil
}

// TestAgentInteractionRepeatAfterRestart: after a harness restart a
// repeated interaction.request names the interaction restored from the
// log, never a second one; the first answer wins.
func TestAgentInteractionRepeatAfterRestart(t *testing.T) {
	e := newEnv(t, longLeases)
	s := loadSink{fakeSink: newSink(), hub: e.hub, loaded: make(chan string, 1)}
	e.hub.Attach(s)
	y := e.agentExecutor(t, "exe_a", proto.AgentCapability{},
		&proto.Resume{ExecutorID: "exe_a", ActiveSessions: []proto.SessionEpoch{{SessionID: "ses_9", Epoch: 3, AckedSequence: ptr(int64(2))}}})
	req := interactionReq("ixn_1", "question", "")
	req.SessionID, req.TurnID = "ses_9", "trn_9"
	if id := y.platformID(req); id != "int_1" {
		t.Fatalf("repeated interaction named %q, want the restored int_1", id)
	}
	none(t, "second interaction", s.ixs)
	if err := e.hub.RespondInteraction("ses_9", "int_1", baton.InteractionAnswer{Text: "blue"}); err != nil {
		t.Fatal(err)
	}
	if err := e.hub.RespondInteraction("ses_9", "int_1", baton.InteractionAnswer{Text: "red"}); !errors.Is(err, ErrAnswered) {
		t.Fatalf("second answer: %v", err)
	}
	var rp proto.InteractionResponseParams
	y.reply(y.expect(proto.MethodInteractionResponse, &rp), proto.Accepted{Accepted: true})
	if rp.InteractionID != "ixn_1" || rp.Answer == nil || rp.Answer.Text != "blue" {
		t.Fatalf("interaction.response %+v", rp)
	}
}
