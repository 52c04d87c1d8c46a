package executor

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/baton-engine/baton/executor/proto"
)

// Interaction kinds.
const (
	KindPermission = "permission"
	KindQuestion   = "question"
)

// Interaction is an approval or a question put to the platform with
// interaction.request.
type Interaction struct {
	// ID is the executor's key for it; generated when empty. An id of the
	// form appr_ plus 24 lower-case hex digits is adopted by the platform.
	ID        string
	Kind      string // KindPermission or KindQuestion
	ToolUseID string // the agent.tool_use event a permission is about
	Prompt    string
	Options   []string
	// ExpiresAt, when set, is a local deny: the wait ends with Status
	// "expired".
	ExpiresAt time.Time
}

// Answer is how an interaction resolved.
type Answer struct {
	PlatformID string // platform_interaction_id
	Status     string // "resolved", "expired" or "canceled"
	Decision   string // "allow" or "deny" for a permission
	Text       string
}

// CustomToolResult is the user's result of a custom tool call.
type CustomToolResult struct {
	Content json.RawMessage
	IsError bool
}

type interactionWait struct {
	answered bool // under e.mu
	ch       chan Answer
}

// RequestInteraction asks the platform and waits for the answer. When
// ctx ends first the interaction is withdrawn with interaction.cancel
// (reason turn_canceled if the turn was cancelled, else
// resolved_locally) and ctx's error is returned.
func (t *Turn) RequestInteraction(ctx context.Context, in Interaction) (Answer, error) {
	e := t.e
	if in.ID == "" {
		in.ID = newID("ixn_")
	}
	w := &interactionWait{ch: make(chan Answer, 1)}
	e.mu.Lock()
	if _, dup := e.interactions[in.ID]; dup {
		e.mu.Unlock()
		return Answer{}, errors.New("executor: interaction " + in.ID + " is already waiting")
	}
	e.interactions[in.ID] = w
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.interactions, in.ID)
		e.mu.Unlock()
	}()

	type ackd struct {
		id   string
		rerr *RPCError
	}
	acks := make(chan ackd, 1)
	p := proto.InteractionRequestParams{SessionID: t.SessionID, TurnID: t.ID, InteractionID: in.ID, Kind: in.Kind,
		ToolUseID: in.ToolUseID, Prompt: in.Prompt}
	if len(in.Options) > 0 {
		p.Options, _ = json.Marshal(in.Options) // a []string always encodes
	}
	if !in.ExpiresAt.IsZero() {
		p.ExpiresAt = &in.ExpiresAt
	}
	if err := e.push(proto.MethodInteractionRequest, t.SessionID, p, func(raw json.RawMessage, rerr *RPCError) {
		var res proto.InteractionRequestResult
		if rerr == nil {
			_ = json.Unmarshal(raw, &res)
		}
		acks <- ackd{res.PlatformInteractionID, rerr}
	}); err != nil {
		return Answer{}, err
	}
	var expiry <-chan time.Time
	if !in.ExpiresAt.IsZero() {
		tm := time.NewTimer(time.Until(in.ExpiresAt))
		defer tm.Stop()
		expiry = tm.C
	}
	var platform string
	for {
		select {
		case a := <-acks:
			if a.rerr != nil {
				return Answer{}, a.rerr
			}
			platform = a.id
		case a := <-w.ch:
			select { // an acknowledgement read before the answer, both ready at once
			case ak := <-acks:
				if ak.rerr == nil {
					platform = ak.id
				}
			default:
			}
			a.PlatformID = platform
			return a, nil
		case <-expiry:
			return Answer{PlatformID: platform, Status: "expired"}, nil
		case <-t.ctx.Done():
			t.withdraw(in.ID, "turn_canceled")
			return Answer{}, t.ctx.Err()
		case <-ctx.Done():
			if t.ctx.Err() != nil { // ctx derives from the turn's
				t.withdraw(in.ID, "turn_canceled")
			} else {
				t.withdraw(in.ID, "resolved_locally")
			}
			return Answer{}, ctx.Err()
		}
	}
}

// withdraw holds interaction.cancel.
func (t *Turn) withdraw(id, reason string) {
	if err := t.e.push(proto.MethodInteractionCancel, t.SessionID, proto.InteractionCancelParams{InteractionID: id, Reason: reason}, nil); err != nil {
		t.e.log.Warn("executor: interaction.cancel", "interaction_id", id, "err", err)
	}
}

func (e *Executor) onInteractionResponse(r *request) (any, *RPCError) {
	var p proto.InteractionResponseParams
	if rerr := decodeParams(r.params, &p); rerr != nil {
		return nil, rerr
	}
	if rerr := require("interaction_id", p.InteractionID, "status", p.Status); rerr != nil {
		return nil, rerr
	}
	e.mu.Lock()
	w := e.interactions[p.InteractionID]
	ok := w != nil && !w.answered
	if ok {
		w.answered = true
	}
	e.mu.Unlock()
	if ok {
		a := Answer{Status: p.Status}
		if p.Answer != nil {
			a.Decision, a.Text = p.Answer.Decision, p.Answer.Text
		}
		w.ch <- a
	}
	return proto.Accepted{Accepted: ok}, nil
}

// CustomTool runs a client's custom tool: it emits agent.custom_tool_use
// (its event_id is the tool_use_id) and waits for the result the harness
// delivers with agent.custom_tool_result. If ctx's deadline passes first
// the call ends with a failed agent.tool_result; a later result is
// refused.
func (t *Turn) CustomTool(ctx context.Context, name string, input json.RawMessage) (CustomToolResult, error) {
	e, s := t.e, t.s
	id := newID("toolu_")
	ch := make(chan CustomToolResult, 1)
	e.mu.Lock()
	s.custom[id] = ch
	e.mu.Unlock()
	forget := func() {
		e.mu.Lock()
		delete(s.custom, id)
		e.mu.Unlock()
	}
	ev, err := NewEvent(EventCustomToolUse, struct {
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	}{name, orEmpty(input, "{}")})
	if err != nil {
		forget()
		return CustomToolResult{}, err
	}
	ev.ID = id
	if _, err := t.Emit(ev); err != nil {
		forget()
		return CustomToolResult{}, err
	}
	select {
	case r := <-ch:
		return r, nil
	case <-t.ctx.Done():
		forget()
		return CustomToolResult{}, t.ctx.Err()
	case <-ctx.Done():
		forget()
		select {
		case r := <-ch: // it arrived as the wait ended
			return r, nil
		default:
		}
		if errors.Is(ctx.Err(), context.DeadlineExceeded) && t.ctx.Err() == nil {
			e.emitLogged(t, ToolResultEvent(id, TextResult("custom tool call timed out").Content, true))
		}
		return CustomToolResult{}, ctx.Err()
	}
}

func (e *Executor) onCustomToolResult(r *request) (any, *RPCError) {
	if e.cfg.Agent == nil {
		return nil, capabilityMissing("agent")
	}
	var p proto.CustomToolResultParams
	if rerr := decodeParams(r.params, &p); rerr != nil {
		return nil, rerr
	}
	e.mu.Lock()
	var ch chan CustomToolResult
	if s := e.agents[p.SessionID]; s != nil {
		ch = s.custom[p.ToolUseID]
		delete(s.custom, p.ToolUseID)
	}
	e.mu.Unlock()
	if ch == nil {
		return proto.Accepted{Accepted: false}, nil
	}
	ch <- CustomToolResult{Content: p.Content, IsError: p.IsError}
	return proto.Accepted{Accepted: true}, nil
}
