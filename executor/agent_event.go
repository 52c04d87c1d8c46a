package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
)

// agentLocked finds the agent session a message from c is about: it must
// be one of c's executor's, and epoch (when positive) its current one —
// an older epoch is a stale owner's (bma.executor.v1.1 "Leases"), -32013;
// the register that resumed the session told the executor the new one.
func (c *conn) agentLocked(sessionID string, epoch int64) (*agentSession, *proto.Error) {
	h := c.hub
	a := h.ag.sessions[sessionID]
	switch {
	case a == nil || c.exec == nil || a.execID != c.exec.id:
		return nil, proto.Errorf(proto.CodeForbidden, "session %s is not an agent session of this executor", sessionID).
			WithData(proto.ErrorData{Reason: proto.ReasonForbidden})
	case epoch > a.epoch():
		return nil, proto.Conflict(proto.ReasonStaleEpoch, fmt.Sprintf("session %s has no epoch %d", sessionID, epoch), nil)
	case epoch > 0 && epoch < a.epoch():
		return nil, proto.Conflict(proto.ReasonStaleEpoch, fmt.Sprintf("epoch %d of session %s is stale: the session is at epoch %d", epoch, sessionID, a.epoch()), nil)
	}
	return a, nil
}

// agentEvent serves an agent executor's session.event: deduplicated by
// (session_id, event_id), a sequence at or below the acknowledged one is
// a duplicate, a gap is -32013 with data.expected_sequence. The sink
// records the event before it is acknowledged.
func (c *conn) agentEvent(ctx context.Context, p *proto.SessionEventParams) (any, error) {
	switch {
	case p.EventID == "" || p.Sequence == nil:
		return nil, proto.Errorf(proto.CodeInvalidParams, `Invalid params: an agent event needs "event_id" and "sequence"`)
	case *p.Sequence < 1:
		return nil, proto.Errorf(proto.CodeInvalidParams, `Invalid params: "sequence" starts at 1`)
	}
	var ev struct {
		Type string `json:"type"`
	}
	if json.Unmarshal(p.Event, &ev) != nil || ev.Type == "" {
		return nil, proto.Errorf(proto.CodeInvalidParams, `Invalid params: "event" must be an AgentEvent object with a type`)
	}
	h := c.hub
	h.mu.Lock()
	h.ag.init()
	a, e := c.agentLocked(p.SessionID, p.Epoch)
	sink := h.ag.sink
	h.mu.Unlock()
	if e != nil {
		return nil, e
	}
	if sink == nil {
		return nil, proto.Errorf(proto.CodeMethodNotFound, "Method not found: agent session.event is not served by this harness")
	}
	a.deliver.Lock()
	defer a.deliver.Unlock()
	seq := *p.Sequence
	h.mu.Lock()
	acked, dup := a.acked, a.seen.has(p.EventID)
	switch {
	case seq <= acked:
		h.mu.Unlock()
		return proto.SessionEventResult{AckedSequence: &acked}, nil
	case seq > acked+1:
		h.mu.Unlock()
		want := acked + 1
		return nil, proto.Conflict("sequence_gap", fmt.Sprintf("sequence %d of session %s: expected %d", seq, p.SessionID, want), &want)
	case dup: // the same event again under the next sequence number
		a.acked = seq
		h.mu.Unlock()
		return proto.SessionEventResult{AckedSequence: &seq}, nil
	case ev.Type == baton.AgentCustomToolUse && !customTools(c.exec):
		// No agent.custom_tool_result may go to this executor: the call is
		// refused, and its sequence taken so that the events after it flow.
		a.acked = seq
		a.seen.add(p.EventID)
		h.mu.Unlock()
		return nil, proto.CapabilityMissing("agent.custom_tools",
			"agent.custom_tool_use needs the agent.custom_tools capability, which this executor did not declare")
	}
	machine, execID := a.machineID, a.execID
	h.mu.Unlock()
	err := sink.AgentEvent(ctx, &baton.AgentEvent{
		SessionID: p.SessionID, MachineID: machine, ExecutorID: execID, TurnID: p.TurnID,
		EventID: p.EventID, Sequence: seq, Type: ev.Type, Event: p.Event,
	})
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	a.acked = seq
	a.seen.add(p.EventID)
	switch ev.Type {
	case baton.AgentCustomToolUse:
		if a.useTurn == nil {
			a.useTurn = map[string]string{}
		}
		if _, ok := a.useTurn[p.EventID]; !ok {
			a.useTurn[p.EventID] = p.TurnID
		}
	case baton.AgentStatusIdle:
		a.lastIdle = p.TurnID
		if a.running == p.TurnID {
			a.running = ""
		}
		h.turnOverLocked(a, p.TurnID)
	}
	return proto.SessionEventResult{AckedSequence: &seq}, nil
}

// eventDelta serves session.event_delta: a lossy preview, relayed live.
func (c *conn) eventDelta(_ context.Context, f *proto.Frame) (any, error) {
	var p proto.EventDeltaParams
	if e := f.Bind(&p); e != nil {
		return nil, e
	}
	h := c.hub
	h.mu.Lock()
	h.ag.init()
	_, e := c.agentLocked(p.SessionID, 0)
	sink := h.ag.sink
	h.mu.Unlock()
	if e != nil {
		return nil, e
	}
	if sink != nil {
		sink.AgentDelta(&baton.AgentDelta{SessionID: p.SessionID, TurnID: p.TurnID, EventID: p.EventID, Delta: p.Delta})
	}
	return nil, nil
}

// agentEnded takes a session.ended that is about one of c's executor's
// agent sessions (not a hand session of the same executor, told apart by
// the epoch) and reports whether it did.
func (c *conn) agentEnded(p *proto.SessionEndedParams) bool {
	h := c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ag.init()
	a := h.ag.sessions[p.SessionID]
	if a == nil || c.exec == nil || a.execID != c.exec.id {
		return false
	}
	if b := h.bindings[p.SessionID]; b != nil && b.rec == c.exec && !slices.Contains(a.epochs, p.Epoch) {
		return false
	}
	err := fmt.Errorf("%w (executor %s)", ErrSessionEnded, a.execID)
	if p.Reason != "" {
		err = fmt.Errorf("%w (executor %s: %s)", ErrSessionEnded, a.execID, p.Reason)
	}
	h.lostLocked(a, err)
	return true
}

// customTools reports whether rec declared agent.custom_tools; Hub.mu
// is held.
func customTools(rec *execRec) bool {
	return rec != nil && rec.caps.Agent != nil && rec.caps.Agent.CustomTools
}

// has reports whether id is remembered.
func (s *seen) has(id string) bool {
	_, ok := s.ids[id]
	return ok
}
