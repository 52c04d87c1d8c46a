package executor

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
)

// Executor → harness session messages. Each names a session; the session
// must be bound to the sending connection's executor. Messages carrying
// an epoch are fenced: an epoch older than the binding's assignment (a
// previous owner's) is -32013; so is one the hub never gave this binding.
// Epochs of the same binding from before a resume are accepted, because
// the executor resends what it held across the reconnect and each of
// these messages is idempotent.

// boundLocked finds the binding a message from c is about.
func (c *conn) boundLocked(sessionID string, epoch int64, hasEpoch bool) (*Binding, *proto.Error) {
	h := c.hub
	b := h.bindings[sessionID]
	switch {
	case b == nil && hasEpoch && epoch > 0 && epoch <= h.epoch:
		return nil, proto.Conflict(proto.ReasonStaleEpoch, fmt.Sprintf("epoch %d of session %s is over", epoch, sessionID), nil)
	case b == nil:
		return nil, proto.Errorf(proto.CodeForbidden, "session %s is not bound to this executor", sessionID).WithData(proto.ErrorData{Reason: proto.ReasonForbidden})
	case hasEpoch && epoch < b.first:
		return nil, proto.Conflict(proto.ReasonStaleEpoch, fmt.Sprintf("epoch %d of session %s is stale", epoch, sessionID), nil)
	case b.rec != c.exec:
		return nil, proto.Errorf(proto.CodeForbidden, "session %s is not bound to this executor", sessionID).WithData(proto.ErrorData{Reason: proto.ReasonForbidden})
	case b.conn != c || hasEpoch && epoch > b.epoch:
		return nil, proto.Conflict(proto.ReasonStaleEpoch, fmt.Sprintf("session %s is not bound at epoch %d on this connection", sessionID, epoch), nil)
	}
	return b, nil
}

func (c *conn) sessionReady(_ context.Context, f *proto.Frame) (any, error) {
	var p proto.SessionEpoch
	if e := f.Bind(&p); e != nil {
		return nil, e
	}
	h := c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	b, e := c.boundLocked(p.SessionID, p.Epoch, true)
	if e != nil {
		return nil, e
	}
	if !b.ready && p.Epoch == b.epoch {
		b.ready = true
		close(b.readyCh)
	}
	return proto.Ack{OK: true}, nil
}

// sessionEvent serves session.event. An agent executor's (with event_id
// and sequence) goes to agentEvent; a tool or shell executor's
// {session_id, epoch, event:{type, data}} is idempotent by its JSON-RPC id
// and is committed to the Baton session's log (Hooks.OnEvent, or
// recordHandEvent) before it is acknowledged.
func (c *conn) sessionEvent(ctx context.Context, f *proto.Frame) (any, error) {
	var p proto.SessionEventParams
	if e := f.Bind(&p); e != nil {
		return nil, e
	}
	if p.EventID != "" || p.Sequence != nil {
		return c.agentEvent(ctx, &p) // sequenced, deduplicated by event_id (agent.go)
	}
	h := c.hub
	key := string(f.ID)
	h.mu.Lock()
	b, e := c.boundLocked(p.SessionID, p.Epoch, true)
	if e != nil {
		h.mu.Unlock()
		return nil, e
	}
	ev, e := handEvent(&p)
	if e != nil {
		h.mu.Unlock()
		return nil, e
	}
	hook, area := b.hooks.OnEvent, b.events
	h.mu.Unlock()
	if hook == nil && area == "" {
		return nil, proto.Errorf(proto.CodeMethodNotFound, "Method not found: session %s keeps no session events", p.SessionID)
	}
	// One delivery at a time, across connections: a resend that comes on
	// a new connection while the first try is still being recorded waits
	// for its outcome instead of being acknowledged on trust.
	b.deliver.Lock()
	defer b.deliver.Unlock()
	h.mu.Lock()
	dup := b.seen.has(key)
	h.mu.Unlock()
	if dup {
		return proto.SessionEventResult{}, nil // acknowledged, not delivered again
	}
	var err error
	if hook != nil {
		err = hook(b, &p)
	} else {
		err = h.recordHandEvent(ctx, b, area, ev)
	}
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	b.seen.add(key)
	h.mu.Unlock()
	return proto.SessionEventResult{}, nil
}

// HandSink is implemented by the sink attached with Hub.Attach (the
// engine's) when it also records the durable session.event messages of
// tool and shell executors (hands); without it they are refused with
// -32601.
type HandSink interface {
	// HandEvent commits one event to the log of Baton session sessionID
	// (and so streams it to the session's subscribers); nil acknowledges
	// it to the executor, an error is answered and the executor resends.
	// payload is {type, data, executor_id, environment_id | machine_id,
	// executor_session_id?}: the executor's event, who sent it, and the
	// executor's session id when it is not sessionID (a remote sandbox's
	// sbx_…, or <session_id>@<environment_id>).
	HandEvent(ctx context.Context, sessionID string, payload json.RawMessage) error
}

// recordHandEvent hands b's event to the HandSink for the log of Baton
// session area.
func (h *Hub) recordHandEvent(ctx context.Context, b *Binding, area string, ev *proto.ToolEvent) error {
	h.mu.Lock()
	sink, _ := h.ag.sink.(HandSink)
	h.mu.Unlock()
	if sink == nil {
		return proto.Errorf(proto.CodeMethodNotFound, "Method not found: session.event of tool executors is not served by this harness")
	}
	p := map[string]any{"type": ev.Type, "data": ev.Data, "executor_id": b.rec.id}
	if b.rec.scope == baton.ExecutorScopeMachine {
		p["machine_id"] = b.rec.machineID
	} else {
		p["environment_id"] = b.rec.envID
	}
	if b.sessionID != area {
		p["executor_session_id"] = b.sessionID
	}
	return sink.HandEvent(ctx, area, baton.MarshalJSON(p))
}

// handEvent checks a tool or shell executor's event: an object with a
// non-empty type.
func handEvent(p *proto.SessionEventParams) (*proto.ToolEvent, *proto.Error) {
	var ev proto.ToolEvent
	if json.Unmarshal(p.Event, &ev) != nil || ev.Type == "" {
		return nil, proto.Errorf(proto.CodeInvalidParams, `Invalid params: "event" must be an object {type, data} with a non-empty type`)
	}
	if len(ev.Data) == 0 {
		ev.Data = json.RawMessage("null")
	}
	return &ev, nil
}

func (c *conn) sessionStatus(_ context.Context, f *proto.Frame) (any, error) {
	var p proto.SessionStatusParams
	if e := f.Bind(&p); e != nil {
		return nil, e
	}
	h := c.hub
	h.mu.Lock()
	b, e := c.boundLocked(p.SessionID, 0, false)
	h.mu.Unlock()
	if e != nil {
		return nil, e
	}
	if b.hooks.OnStatus != nil {
		b.hooks.OnStatus(b, &p)
	}
	return nil, nil
}

func (c *conn) sessionEnded(_ context.Context, f *proto.Frame) (any, error) {
	var p proto.SessionEndedParams
	if e := f.Bind(&p); e != nil {
		return nil, e
	}
	if c.agentEnded(&p) {
		return proto.Ack{OK: true}, nil
	}
	h := c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if b := h.bindings[p.SessionID]; b == nil && p.Epoch > 0 && p.Epoch <= h.epoch {
		return proto.Ack{OK: true}, nil // already over: a retry is acknowledged
	}
	b, e := c.boundLocked(p.SessionID, p.Epoch, true)
	if e != nil {
		return nil, e
	}
	err := fmt.Errorf("%w (executor %s)", ErrSessionEnded, b.rec.id)
	if p.Reason != "" {
		err = fmt.Errorf("%w (executor %s: %s)", ErrSessionEnded, b.rec.id, p.Reason)
	}
	h.endLocked(b, err)
	return proto.Ack{OK: true}, nil
}

func (c *conn) toolResult(_ context.Context, f *proto.Frame) (any, error) {
	var p proto.ToolResultParams
	if e := f.Bind(&p); e != nil {
		return nil, e
	}
	if p.ToolCallID == "" {
		return nil, proto.Errorf(proto.CodeInvalidParams, `Invalid params: missing "tool_call_id"`)
	}
	h := c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	b, e := c.boundLocked(p.SessionID, 0, false)
	if e != nil {
		return nil, e
	}
	cl := b.calls[p.ToolCallID]
	if cl == nil {
		if _, ok := b.finished[p.ToolCallID]; ok {
			return proto.Ack{OK: true}, nil // a duplicate: the first result counted
		}
		return nil, proto.Errorf(proto.CodeInvalidParams, "Invalid params: unknown tool_call_id %s", p.ToolCallID)
	}
	b.finishLocked(cl, &p, nil)
	return proto.Ack{OK: true}, nil
}

func (c *conn) toolProgress(_ context.Context, f *proto.Frame) (any, error) {
	var p proto.ToolProgressParams
	if e := f.Bind(&p); e != nil {
		return nil, e
	}
	h := c.hub
	h.mu.Lock()
	b, e := c.boundLocked(p.SessionID, 0, false)
	pending := e == nil && b.calls[p.ToolCallID] != nil
	h.mu.Unlock()
	if e != nil {
		return nil, e
	}
	if pending && b.hooks.OnProgress != nil {
		b.hooks.OnProgress(b, &p)
	}
	return nil, nil
}

// seen remembers the most recent session.event ids of a binding.
type seen struct {
	ids  map[string]struct{}
	ring []string
	next int
}

const seenMax = 4096

// add records id; it reports false when id was already there.
func (s *seen) add(id string) bool {
	if _, ok := s.ids[id]; ok {
		return false
	}
	if s.ids == nil {
		s.ids = make(map[string]struct{})
	}
	if len(s.ring) < seenMax {
		s.ring = append(s.ring, id)
	} else {
		delete(s.ids, s.ring[s.next])
		s.ring[s.next] = id
		s.next = (s.next + 1) % seenMax
	}
	s.ids[id] = struct{}{}
	return true
}
