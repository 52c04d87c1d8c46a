package engine

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/baton-engine/baton"
)

// brainSink is the engine's baton.AgentSink: what agent executors report
// about brain sessions becomes session events and moves the turns on.
type brainSink struct{ e *Engine }

var (
	_ baton.AgentSink = brainSink{}
	_ interface {
		LoadAgent(ctx context.Context, sessionID string) error // the hub's loadingSink
	} = brainSink{}
)

// agentTypes are the AgentEvent types stored under their own type; any
// other agent.* type is stored as is too, and anything else as
// agent.event (its payload keeps the executor's type), so that an
// executor cannot write the server's own event types.
var agentTypes = []string{
	baton.AgentMessage, baton.AgentThinking, baton.AgentToolUse, baton.AgentToolResult, baton.AgentCustomToolUse,
	baton.AgentError, baton.AgentStatusRunning, baton.AgentStatusIdle,
}

// storedType is the event type an agent event is stored under.
func storedType(typ string) string {
	for _, t := range agentTypes {
		if t == typ {
			return typ
		}
	}
	if strings.HasPrefix(typ, "agent.") {
		return typ
	}
	return baton.EventAgentEvent
}

// agentPayload returns the type an agent event is stored under and its
// payload: the event's members (type dropped, unless it is stored as
// agent.event) with turn_id and event_id.
func agentPayload(ev *baton.AgentEvent) (string, map[string]json.RawMessage, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(ev.Event, &fields); err != nil || fields == nil {
		return "", nil, baton.Errorf(baton.ECodeInvalidParams, "agent event is not an object")
	}
	typ := storedType(ev.Type)
	if typ == ev.Type {
		delete(fields, "type")
	} else {
		fields["type"] = mustJSON(ev.Type)
	}
	fields["turn_id"], fields["event_id"] = mustJSON(ev.TurnID), mustJSON(ev.EventID)
	return typ, fields, nil
}

// lookupBrain returns the brain session an executor reports about, creating
// it for an open session whose profile's brain is machine ("" skips that
// check). It is nil, with no error, for a session that is not open: the
// report is acknowledged and dropped.
func (e *Engine) lookupBrain(ctx context.Context, sessionID, machine string) (*brainSession, error) {
	if bs := e.brains.get(sessionID); bs != nil {
		if machine != "" && bs.machine != machine {
			return nil, baton.Errorf(baton.ECodeForbidden, "session %s is not routed to machine %s", sessionID, machine)
		}
		return bs, nil
	}
	s, err := e.store.Session(ctx, sessionID)
	if baton.ErrorCode(err) == baton.ECodeNotFound {
		return nil, baton.Errorf(baton.ECodeForbidden, "unknown session %s", sessionID)
	}
	if err != nil {
		return nil, err
	}
	if s.State != baton.StateOpen {
		return nil, nil
	}
	prof, err := e.store.Profile(ctx, s.ProfileID)
	if err != nil {
		return nil, err
	}
	if !prof.Brain.Executor() || machine != "" && prof.Brain.MachineID != machine {
		return nil, baton.Errorf(baton.ECodeForbidden, "session %s is not routed to machine %s", sessionID, machine)
	}
	return e.brains.session(sessionID, prof.Brain.MachineID), nil
}

// AgentEvent stores one agent event (once per event_id) and applies it
// to the turn it belongs to.
func (k brainSink) AgentEvent(ctx context.Context, ev *baton.AgentEvent) error {
	e := k.e
	bs, err := e.lookupBrain(ctx, ev.SessionID, ev.MachineID)
	if err != nil || bs == nil {
		return err
	}
	typ, fields, err := agentPayload(ev)
	if err != nil {
		return err
	}
	var declared []baton.ToolDef
	if ev.Type == baton.AgentCustomToolUse {
		if s, err := e.sessionRow(ctx, bs.id); err == nil {
			declared = s.ClientTools[bs.actorOf(ev.TurnID)]
		}
	}

	bs.mu.Lock()
	if err := e.loadLocked(ctx, bs); err != nil {
		bs.mu.Unlock()
		return err
	}
	if bs.seen[ev.EventID] || bs.closed {
		bs.mu.Unlock()
		return nil
	}
	actor := bs.actor
	if t := bs.turn; t != nil && t.id == ev.TurnID {
		actor = t.actor
	}
	bs.mu.Unlock()
	stored := baton.NewEvent(bs.id, actor, typ, fields)
	if err := e.store.Append(ctx, stored); err != nil {
		return err
	}

	bs.mu.Lock()
	bs.seen[ev.EventID] = true
	t := bs.turn
	if t == nil || t.id != ev.TurnID {
		bs.mu.Unlock()
		return nil // another turn's, or one that ended here
	}
	for _, c := range t.calls {
		c.events = append(c.events, stored)
	}
	var paused []ending
	var idle string
	switch ev.Type {
	case baton.AgentMessage:
		bl, _ := blocks(blocksOf(fields["content"]))
		for _, c := range t.calls {
			for _, b := range bl {
				c.content = append(c.content, b.Raw)
			}
		}
	case baton.AgentError:
		var m string
		_ = json.Unmarshal(fields["message"], &m)
		t.lastErr = m
	case baton.AgentCustomToolUse:
		var name string
		_ = json.Unmarshal(fields["name"], &name)
		input := fields["input"]
		if len(input) == 0 || string(input) == "null" {
			input = json.RawMessage(`{}`)
		}
		if !declares(declared, name) {
			bs.mu.Unlock()
			if err := e.brains.b.CustomToolResult(bs.id, ev.EventID, baton.ClientResult{
				Content: mustJSON("tool " + name + " is not declared by the acting client"), IsError: true,
			}); err != nil {
				e.log.Warn("custom tool refusal not delivered", "session_id", bs.id, "err", err)
			}
			return nil
		}
		t.uses = append(t.uses, customUse{toolUse: toolUse{ID: ev.EventID, Name: name, Input: input}})
		paused = bs.pauseLocked(e, t)
	case baton.AgentStatusIdle:
		var o string
		_ = json.Unmarshal(fields["turn_outcome"], &o)
		idle = o
		if idle == "" {
			idle = baton.OutcomeCompleted
		}
	}
	bs.mu.Unlock()
	finishAll(paused)
	if idle != "" {
		e.endTurn(bs, t, func(c *brainCall) *baton.TurnResult {
			switch idle {
			case baton.OutcomeCanceled:
				return c.text(cancelledText)
			case baton.OutcomeFailed:
				if t.lastErr != "" {
					return c.text("The agent turn failed: " + t.lastErr)
				}
				return c.text("The agent turn failed.")
			}
			return c.message()
		})
	}
	return nil
}

// actorOf returns the acting client of turnID, or of the latest turn.
func (bs *brainSession) actorOf(turnID string) string {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if t := bs.turn; t != nil && t.id == turnID {
		return t.actor
	}
	return bs.actor
}

func declares(tools []baton.ToolDef, name string) bool {
	for _, t := range tools {
		if t.Name == name {
			return true
		}
	}
	return false
}

// AgentDelta relays a preview live, named by its turn and event. A text
// preview ({"text":…} or a JSON string) goes out as text, as the provider
// loop's deltas do; any other (tool input, thinking) goes out as is.
func (k brainSink) AgentDelta(d *baton.AgentDelta) {
	e := k.e
	bs := e.brains.get(d.SessionID)
	if bs == nil || len(d.Delta) == 0 {
		return
	}
	out := &baton.Delta{SessionID: d.SessionID, ClientKeyID: bs.actorOf(d.TurnID), TurnID: d.TurnID, EventID: d.EventID}
	switch text, ok := deltaText(d.Delta); {
	case ok && text == "":
		return
	case ok:
		out.Text = text
	default:
		out.Preview = d.Delta
	}
	e.hub.Publish(baton.Notice{Delta: out})
}

// deltaText is the text of a text preview: a JSON string, or an object
// with a text field whose type is "text", "text_delta" or none; ok is
// false for any other preview.
func deltaText(delta json.RawMessage) (text string, ok bool) {
	if json.Unmarshal(delta, &text) == nil {
		return text, true
	}
	var obj struct {
		Type string  `json:"type"`
		Text *string `json:"text"`
	}
	if json.Unmarshal(delta, &obj) != nil || obj.Text == nil {
		return "", false
	}
	switch obj.Type {
	case "", "text", "text_delta":
		return *obj.Text, true
	}
	return "", false
}

// LoadAgent rebuilds the brain session from its log, once (the hub
// takes back its open interactions before it looks one up).
func (k brainSink) LoadAgent(ctx context.Context, sessionID string) error {
	bs, err := k.e.lookupBrain(ctx, sessionID, "")
	if err != nil || bs == nil {
		return err
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return k.e.loadLocked(ctx, bs)
}

// Interaction records interaction.request for the session's drivers.
func (k brainSink) Interaction(ctx context.Context, in *baton.Interaction) error {
	return k.InteractionKeyed(ctx, in, "")
}

// InteractionKeyed records interaction.request with the executor's
// interaction_id (key), which an answer after a restart is sent under.
func (k brainSink) InteractionKeyed(ctx context.Context, in *baton.Interaction, key string) error {
	e := k.e
	bs, err := e.lookupBrain(ctx, in.SessionID, "")
	if err != nil {
		return err
	}
	if bs == nil {
		return baton.Errorf(baton.ECodeSessionClosed, "session %s is not open", in.SessionID)
	}
	p := map[string]any{"interaction_id": in.ID, "kind": in.Kind, "prompt": in.Prompt, "turn_id": in.TurnID}
	if in.ToolUseID != "" {
		p["tool_use_id"] = in.ToolUseID
	}
	if len(in.Options) > 0 && string(in.Options) != "null" {
		p["options"] = in.Options
	}
	if in.ExpiresAt != nil {
		p["expires_at"] = baton.FormatTime(*in.ExpiresAt)
	}
	if key != "" && key != in.ID {
		p["executor_interaction_id"] = key
	}
	return e.brainRecord(ctx, bs, bs.actorOf(in.TurnID), baton.EventInteractionRequest, p)
}

// InteractionEnded records an expiry (interaction.response) or a
// withdrawal (interaction.cancel).
func (k brainSink) InteractionEnded(ctx context.Context, sessionID, interactionID, status, reason string) {
	e := k.e
	bs, err := e.lookupBrain(ctx, sessionID, "")
	if err != nil || bs == nil {
		return
	}
	typ, p := baton.EventInteractionResponse, map[string]any{"interaction_id": interactionID, "status": status}
	if status == baton.InteractionCanceled {
		typ, p = baton.EventInteractionCancel, map[string]any{"interaction_id": interactionID, "reason": reason}
	}
	if err := e.brainRecord(ctx, bs, bs.actorOf(""), typ, p); err != nil {
		e.log.Error("record interaction end", "session_id", sessionID, "err", err)
	}
}

// brainRecord appends one event of the brain session, attributed to
// actor, and adds it to the events of the calls attached to its turn.
func (e *Engine) brainRecord(ctx context.Context, bs *brainSession, actor, typ string, payload any) error {
	ev := baton.NewEvent(bs.id, actor, typ, payload)
	if err := e.store.Append(ctx, ev); err != nil {
		return err
	}
	bs.mu.Lock()
	if t := bs.turn; t != nil {
		for _, c := range t.calls {
			c.events = append(c.events, ev)
		}
	}
	bs.mu.Unlock()
	return nil
}

// AgentLost ends the session's turn: its executor is gone for good.
func (k brainSink) AgentLost(sessionID string, err error) {
	e := k.e
	bs := e.brains.get(sessionID)
	if bs == nil {
		return
	}
	bs.mu.Lock()
	t := bs.turn
	bs.mu.Unlock()
	if t == nil {
		return
	}
	e.log.Warn("brain turn lost", "session_id", sessionID, "turn_id", t.id, "err", err)
	werr := brainLost(err)
	e.endTurn(bs, t, func(*brainCall) *baton.TurnResult { return &baton.TurnResult{Err: werr} })
}

// RespondInteraction serves session.respondInteraction (Baton extension):
// any registered driver answers an open interaction of the session; the
// first answer wins.
func (e *Engine) RespondInteraction(ctx context.Context, key *baton.Key, params json.RawMessage) (any, error) {
	if _, err := e.driverGate(key, "session.respondInteraction"); err != nil {
		return nil, err
	}
	s, err := e.openSession(ctx, key.Name)
	if err != nil {
		return nil, err
	}
	if _, err := e.loadBrain(ctx, s); err != nil { // open interactions after a restart
		return nil, err
	}
	var p struct {
		ID     *string         `json:"interaction_id"`
		Answer json.RawMessage `json:"answer"`
	}
	if params != nil && json.Unmarshal(params, &p) != nil {
		return nil, baton.Errorf(baton.ECodeInvalidParams, "Invalid params: params must be an object")
	}
	if p.ID == nil || *p.ID == "" {
		return nil, baton.Errorf(baton.ECodeInvalidParams, `Invalid params: missing "interaction_id"`)
	}
	ans, err := parseAnswer(p.Answer)
	if err != nil {
		return nil, err
	}
	if e.brains.b == nil {
		return nil, baton.Errorf(baton.ECodeSessionFailed, "unknown interaction %s", *p.ID)
	}
	if err := e.brains.b.RespondInteraction(key.Name, *p.ID, ans); err != nil {
		switch baton.ErrorCode(err) {
		case baton.ECodeNotFound:
			return nil, baton.Errorf(baton.ECodeSessionFailed, "unknown interaction %s", *p.ID)
		case baton.ECodeConflict:
			return nil, baton.Errorf(baton.ECodeSessionFailed, "interaction %s is no longer open: the first answer wins", *p.ID)
		}
		return nil, err
	}
	payload := map[string]any{"interaction_id": *p.ID, "status": baton.InteractionResolved, "answer": ans}
	if bs := e.brains.get(key.Name); bs != nil {
		err = e.brainRecord(ctx, bs, key.ClientID, baton.EventInteractionResponse, payload)
	} else {
		err = e.store.Append(ctx, baton.NewEvent(key.Name, key.ClientID, baton.EventInteractionResponse, payload))
	}
	if err != nil {
		return nil, err
	}
	return map[string]bool{"answered": true}, nil
}

// parseAnswer reads an answer: {"decision"?: "allow"|"deny", "text"?: …}
// or a string (the text).
func parseAnswer(raw json.RawMessage) (baton.InteractionAnswer, error) {
	var a baton.InteractionAnswer
	if len(raw) == 0 || string(raw) == "null" {
		return a, baton.Errorf(baton.ECodeInvalidParams, `Invalid params: missing "answer"`)
	}
	if json.Unmarshal(raw, &a.Text) == nil {
		if a.Text == "" {
			return a, baton.Errorf(baton.ECodeInvalidParams, `Invalid params: "answer" is empty`)
		}
		return a, nil
	}
	var obj struct {
		Decision *string `json:"decision"`
		Text     *string `json:"text"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return a, baton.Errorf(baton.ECodeInvalidParams, `Invalid params: "answer" must be a string or {"decision","text"}`)
	}
	if obj.Decision != nil {
		if *obj.Decision != "allow" && *obj.Decision != "deny" {
			return a, baton.Errorf(baton.ECodeInvalidParams, `Invalid params: "answer.decision" must be "allow" or "deny"`)
		}
		a.Decision = *obj.Decision
	}
	if obj.Text != nil {
		a.Text = *obj.Text
	}
	if a.Decision == "" && a.Text == "" {
		return a, baton.Errorf(baton.ECodeInvalidParams, `Invalid params: "answer" needs a "decision" or a "text"`)
	}
	return a, nil
}
