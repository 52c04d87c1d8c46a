package engine

import (
	"context"
	"encoding/json"
	"time"

	"github.com/baton-engine/baton"
)

// After a restart a brain session's runtime is rebuilt from its log when
// it is first used (a sendMessage, an answer, an executor's report): the
// event ids already stored, a turn paused on custom tool calls of its
// acting client, and the interactions still open. The agent executor
// resumes its agent session on its own; the hub holds what is sent to it
// until then.

// interactionRestorer is the optional side of baton.Brains that takes
// back an interaction still open in the log (the executor hub).
type interactionRestorer interface {
	RestoreInteraction(sessionID, id, key, kind, turnID, toolUseID string, expiresAt *time.Time)
}

// recoverTypes are the event types a brain session is rebuilt from.
var recoverTypes = append(append([]string{}, agentTypes...), baton.EventAgentEvent, baton.EventClientMessage, baton.EventSessionError,
	baton.EventInteractionRequest, baton.EventInteractionResponse, baton.EventInteractionCancel)

// openInteraction is an interaction.request not yet answered in the log.
type openInteraction struct {
	id, key, kind, turn, toolUse string
	expires                      *time.Time
}

// pendingUse is an agent.custom_tool_use not yet answered in the log.
type pendingUse struct {
	turn, actor string
	since       time.Time
	use         toolUse
}

// loadLocked rebuilds bs from its log, once. bs.mu is held.
func (e *Engine) loadLocked(ctx context.Context, bs *brainSession) error {
	if bs.loaded {
		return nil
	}
	evs, err := e.store.EventsOfType(ctx, bs.id, recoverTypes)
	if err != nil {
		return err
	}
	var tools map[string][]baton.ToolDef
	if s, err := e.sessionRow(ctx, bs.id); err == nil {
		tools = s.ClientTools
	}
	bs.seen = map[string]bool{}
	var uses []pendingUse
	var open []openInteraction
	for _, ev := range evs {
		var p struct {
			EventID string          `json:"event_id"`
			TurnID  string          `json:"turn_id"`
			Name    string          `json:"name"`
			Input   json.RawMessage `json:"input"`
			Reason  string          `json:"reason"`
			ID      string          `json:"interaction_id"`
			Key     string          `json:"executor_interaction_id"`
			Kind    string          `json:"kind"`
			ToolUse string          `json:"tool_use_id"`
			Expires *time.Time      `json:"expires_at"`
		}
		if json.Unmarshal(ev.Payload, &p) != nil {
			continue
		}
		switch ev.Type {
		case baton.EventClientMessage: // the owner answers or gives up
			uses = dropUses(uses, func(u pendingUse) bool { return u.actor == ev.ClientKeyID })
		case baton.EventSessionError:
			if p.Reason == "driver_turn_abandoned" {
				uses = nil
			}
		case baton.AgentCustomToolUse:
			if declares(tools[ev.ClientKeyID], p.Name) { // an undeclared one was refused at once
				input := p.Input
				if len(input) == 0 || string(input) == "null" {
					input = json.RawMessage(`{}`)
				}
				uses = append(uses, pendingUse{turn: p.TurnID, actor: ev.ClientKeyID, since: ev.CreatedAt,
					use: toolUse{ID: p.EventID, Name: p.Name, Input: input}})
			}
		case baton.AgentStatusIdle:
			uses = dropUses(uses, func(u pendingUse) bool { return u.turn == p.TurnID })
			open = dropOpen(open, func(x openInteraction) bool { return x.turn == p.TurnID })
		case baton.EventInteractionRequest:
			key := p.Key
			if key == "" {
				key = p.ID
			}
			open = append(open, openInteraction{id: p.ID, key: key, kind: p.Kind, turn: p.TurnID, toolUse: p.ToolUse, expires: p.Expires})
		case baton.EventInteractionResponse, baton.EventInteractionCancel:
			open = dropOpen(open, func(x openInteraction) bool { return x.id == p.ID })
		}
		if p.EventID != "" && ev.Type != baton.EventClientMessage && ev.Type != baton.EventSessionError {
			bs.seen[p.EventID] = true
		}
	}
	bs.loaded = true
	if n := len(uses); n > 0 && bs.turn == nil {
		last := uses[n-1]
		t := &brainTurn{id: last.turn, actor: last.actor, accepted: make(chan struct{}), paused: true,
			deadline: last.since.Add(e.turnTimeout)}
		t.accept(true)
		for _, u := range uses {
			if u.turn == last.turn {
				t.uses = append(t.uses, customUse{toolUse: u.use, shown: true})
			}
		}
		bs.turn, bs.actor = t, t.actor
		bs.timer = e.clk.AfterFunc(max(0, t.deadline.Sub(e.now())), func() { e.abandonPause(bs, t) })
		e.log.Info("brain turn paused before a restart taken back", "session_id", bs.id, "turn_id", t.id, "uses", len(t.uses))
	}
	if r, ok := e.brains.b.(interactionRestorer); ok {
		for _, x := range open {
			r.RestoreInteraction(bs.id, x.id, x.key, x.kind, x.turn, x.toolUse, x.expires)
		}
	}
	return nil
}

// loadBrain returns the brain session of s rebuilt from its log, or nil
// for a session without an executor brain.
func (e *Engine) loadBrain(ctx context.Context, s *baton.Session) (*brainSession, error) {
	machine, err := e.brainOf(ctx, s)
	if err != nil || machine == "" || e.brains.b == nil {
		return nil, err
	}
	bs := e.brains.session(s.ID, machine)
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return bs, e.loadLocked(ctx, bs)
}

func dropUses(uses []pendingUse, drop func(pendingUse) bool) []pendingUse {
	out := uses[:0]
	for _, u := range uses {
		if !drop(u) {
			out = append(out, u)
		}
	}
	return out
}

func dropOpen(open []openInteraction, drop func(openInteraction) bool) []openInteraction {
	out := open[:0]
	for _, x := range open {
		if !drop(x) {
			out = append(out, x)
		}
	}
	return out
}
