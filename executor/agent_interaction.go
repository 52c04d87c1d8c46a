package executor

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
)

// Interactions: an agent executor asks the platform for an approval or an
// answer (interaction.request), a driver answers (RespondInteraction, the
// first answer wins), and the answer, or the expiry, goes back as
// interaction.response until the executor answers it. The executor may
// withdraw it (interaction.cancel).

// interaction is one platform interaction, guarded by Hub.mu.
type interaction struct {
	id        string // platform id
	key       string // the executor's interaction_id
	sessionID string
	turnID    string
	kind      string
	toolUseID string
	epoch     int64  // the agent session's epoch when it was opened
	status    string // "" while open, else baton.Interaction*
	answer    *proto.InteractionAnswer
	timer     baton.Timer // the expiry
}

// adoptedPrefix starts a deterministic approval id, which the platform
// adopts as its own id: appr_ and 24 lower-case hex digits.
const adoptedPrefix = "appr_"

func adopted(id string) bool {
	if len(id) != len(adoptedPrefix)+24 || !strings.HasPrefix(id, adoptedPrefix) {
		return false
	}
	for _, r := range id[len(adoptedPrefix):] {
		if !(r >= '0' && r <= '9' || r >= 'a' && r <= 'f') {
			return false
		}
	}
	return true
}

// ixKey is what an interaction_id names: an adopted id names the same
// interaction from any executor; any other is only its executor's key.
func ixKey(execID, id string) string {
	if adopted(id) {
		return id
	}
	return execID + "\x00" + id
}

func (c *conn) interactionRequest(ctx context.Context, f *proto.Frame) (any, error) {
	var p proto.InteractionRequestParams
	if e := f.Bind(&p); e != nil {
		return nil, e
	}
	switch {
	case p.SessionID == "" || p.InteractionID == "":
		return nil, proto.Errorf(proto.CodeInvalidParams, `Invalid params: "session_id" and "interaction_id" are required`)
	case p.Kind != "permission" && p.Kind != "question":
		return nil, proto.Errorf(proto.CodeInvalidParams, `Invalid params: "kind" must be "permission" or "question"`)
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
	if sink == nil {
		return nil, proto.Errorf(proto.CodeMethodNotFound, "Method not found: %s", proto.MethodInteractionRequest)
	}
	if ls, ok := sink.(loadingSink); ok { // restores the interactions of its log first
		if err := ls.LoadAgent(ctx, p.SessionID); err != nil {
			return nil, err
		}
	}
	h.mu.Lock()
	a, e := c.agentLocked(p.SessionID, 0)
	if e != nil {
		h.mu.Unlock()
		return nil, e
	}
	k := ixKey(a.execID, p.InteractionID)
	if x := h.ag.byKey[k]; x != nil {
		defer h.mu.Unlock()
		switch {
		case x.sessionID != p.SessionID || x.kind != p.Kind:
			return nil, proto.Conflict("interaction_conflict", fmt.Sprintf("interaction %s exists for another session or kind", p.InteractionID), nil)
		case x.toolUseID != p.ToolUseID && x.epoch == a.epoch():
			return nil, proto.Conflict("interaction_conflict", fmt.Sprintf("interaction %s exists for another tool_use_id", p.InteractionID), nil)
		}
		if x.status == baton.InteractionResolved || x.status == baton.InteractionExpired {
			h.respondLocked(x) // the executor waits again (it restarted): answer again
		}
		return proto.InteractionRequestResult{PlatformInteractionID: x.id}, nil
	}
	x := &interaction{key: p.InteractionID, sessionID: p.SessionID, turnID: p.TurnID, kind: p.Kind,
		toolUseID: p.ToolUseID, epoch: a.epoch(), id: p.InteractionID}
	if !adopted(x.id) {
		x.id = baton.NewID("int_")
	}
	h.ag.byKey[k], h.ag.byID[x.id] = x, x
	h.mu.Unlock()
	in := &baton.Interaction{ID: x.id, SessionID: p.SessionID, TurnID: p.TurnID, Kind: p.Kind,
		ToolUseID: p.ToolUseID, Prompt: p.Prompt, Options: p.Options, ExpiresAt: p.ExpiresAt}
	var err error
	if ks, ok := sink.(keyedSink); ok {
		err = ks.InteractionKeyed(ctx, in, p.InteractionID)
	} else {
		err = sink.Interaction(ctx, in)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		if h.ag.byKey[k] == x {
			delete(h.ag.byKey, k)
			delete(h.ag.byID, x.id)
		}
		return nil, err
	}
	if p.ExpiresAt != nil && x.status == "" {
		x.timer = h.clock.AfterFunc(max(0, p.ExpiresAt.Sub(h.clock.Now())), func() { h.expire(x) })
	}
	return proto.InteractionRequestResult{PlatformInteractionID: x.id}, nil
}

// expire ends an open interaction at its expires_at.
func (h *Hub) expire(x *interaction) {
	h.mu.Lock()
	if h.closed || x.status != "" || h.ag.byID[x.id] != x {
		h.mu.Unlock()
		return
	}
	x.status = baton.InteractionExpired
	h.respondLocked(x)
	sink := h.ag.sink
	h.mu.Unlock()
	if sink != nil {
		sink.InteractionEnded(context.Background(), x.sessionID, x.id, baton.InteractionExpired, "")
	}
}

func (c *conn) interactionCancel(ctx context.Context, f *proto.Frame) (any, error) {
	var p proto.InteractionCancelParams
	if e := f.Bind(&p); e != nil {
		return nil, e
	}
	if p.InteractionID == "" {
		return nil, proto.Errorf(proto.CodeInvalidParams, `Invalid params: "interaction_id" is required`)
	}
	h := c.hub
	h.mu.Lock()
	h.ag.init()
	var x *interaction
	if c.exec != nil {
		x = h.ag.byKey[ixKey(c.exec.id, p.InteractionID)]
	}
	if x != nil {
		if a := h.ag.sessions[x.sessionID]; a == nil || a.execID != c.exec.id {
			x = nil // an adopted id of another executor's session
		}
	}
	if x == nil || x.status != "" { // unknown or over: nothing to withdraw
		h.mu.Unlock()
		return proto.Ack{OK: true}, nil
	}
	x.status = baton.InteractionCanceled
	if x.timer != nil {
		x.timer.Stop()
	}
	sink := h.ag.sink
	h.mu.Unlock()
	if sink != nil {
		sink.InteractionEnded(ctx, x.sessionID, x.id, baton.InteractionCanceled, p.Reason)
	}
	return proto.Ack{OK: true}, nil
}

// RespondInteraction implements baton.Brains.
func (h *Hub) RespondInteraction(sessionID, interactionID string, ans baton.InteractionAnswer) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ag.init()
	x := h.ag.byID[interactionID]
	if x == nil || x.sessionID != sessionID {
		return fmt.Errorf("%w: %s", ErrNoInteraction, interactionID)
	}
	if x.status != "" {
		return fmt.Errorf("%w: interaction %s was already %s", ErrAnswered, interactionID, x.status)
	}
	x.status = baton.InteractionResolved
	x.answer = &proto.InteractionAnswer{Decision: ans.Decision, Text: ans.Text}
	if x.timer != nil {
		x.timer.Stop()
	}
	h.respondLocked(x)
	return nil
}

// respondLocked holds interaction.response for x on its agent session.
func (h *Hub) respondLocked(x *interaction) {
	h.holdAnyLocked(x.sessionID, &delivery{key: "interaction\x00" + x.key, method: proto.MethodInteractionResponse,
		params: proto.InteractionResponseParams{InteractionID: x.key, Status: x.status, Answer: x.answer}})
}

// holdAnyLocked holds d on the session's agent session or, while the
// hub does not know it (it restarted and the executor has not resumed it
// yet), until it is taken back.
func (h *Hub) holdAnyLocked(sessionID string, d *delivery) {
	a := h.ag.sessions[sessionID]
	switch {
	case a == nil:
		if !slices.ContainsFunc(h.ag.early[sessionID], func(x *delivery) bool { return x.key == d.key }) {
			h.ag.early[sessionID] = append(h.ag.early[sessionID], d)
		}
	case !a.closing:
		h.holdLocked(a, d)
	}
}

// takeEarlyLocked gives a, just taken back, what was held for it and
// the interactions restored for it.
func (h *Hub) takeEarlyLocked(a *agentSession) {
	a.out = append(a.out, h.ag.early[a.id]...)
	delete(h.ag.early, a.id)
	for _, x := range h.ag.byID {
		if x.sessionID == a.id && x.epoch == 0 {
			x.epoch = a.epoch()
			h.ag.byKey[ixKey(a.execID, x.key)] = x
		}
	}
}

// loadingSink is a sink that rebuilds a session's state from its log on
// first use after a restart, RestoreInteraction included; the hub asks
// it to before it looks an interaction_id up.
type loadingSink interface {
	LoadAgent(ctx context.Context, sessionID string) error
}

// keyedSink is a sink that records the executor's interaction_id (key)
// with a new interaction, for RestoreInteraction after a restart.
type keyedSink interface {
	InteractionKeyed(ctx context.Context, in *baton.Interaction, key string) error
}

// RestoreInteraction takes back an interaction that was open when the
// hub restarted (the engine rebuilds it from the session's log): it can
// be answered again, first answer wins, and it expires at expiresAt.
// key is the executor's interaction_id.
func (h *Hub) RestoreInteraction(sessionID, id, key, kind, turnID, toolUseID string, expiresAt *time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ag.init()
	if h.closed || h.ag.byID[id] != nil {
		return
	}
	x := &interaction{id: id, key: key, sessionID: sessionID, turnID: turnID, kind: kind, toolUseID: toolUseID}
	h.ag.byID[id] = x
	if a := h.ag.sessions[sessionID]; a != nil {
		x.epoch = a.epoch()
		h.ag.byKey[ixKey(a.execID, key)] = x
	}
	if expiresAt != nil {
		x.timer = h.clock.AfterFunc(max(0, expiresAt.Sub(h.clock.Now())), func() { h.expire(x) })
	}
}

// dropInteractionsLocked forgets a session's interactions.
func (h *Hub) dropInteractionsLocked(sessionID string) {
	for k, x := range h.ag.byKey {
		if x.sessionID != sessionID {
			continue
		}
		if x.timer != nil {
			x.timer.Stop()
		}
		delete(h.ag.byKey, k)
		delete(h.ag.byID, x.id)
	}
}

// CustomToolResult implements baton.Brains. A JSON string content is sent
// as one text block. A result for a session the hub does not know (it
// restarted, and the executor has not resumed the session yet) is held
// until it does.
func (h *Hub) CustomToolResult(sessionID, toolUseID string, r baton.ClientResult) error {
	content := r.Content
	var s string
	if json.Unmarshal(content, &s) == nil {
		content, _ = json.Marshal([]baton.TextBlock{{Type: baton.BlockText, Text: s}})
	}
	if len(content) == 0 {
		content = json.RawMessage(`[]`)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ag.init()
	a := h.ag.sessions[sessionID]
	var turn string
	switch { // a == nil: held until the executor resumes the session after a restart
	case a != nil && a.closing:
		return fmt.Errorf("%w: %s", ErrNoAgentSession, sessionID)
	case a != nil && h.execs[a.execID] != nil && !customTools(h.execs[a.execID]): // unknown while away
		return fmt.Errorf("%w: executor %s did not declare agent.custom_tools", ErrNoCustomTools, a.execID)
	case a != nil && overUse(a, toolUseID):
		return fmt.Errorf("%w: the turn of %s is over", ErrTurnOver, toolUseID)
	case a != nil && a.custom[toolUseID]:
		return nil // only the first result of a call counts
	case a != nil:
		turn = a.useTurn[toolUseID]
		a.custom[toolUseID] = true
	}
	h.holdAnyLocked(sessionID, &delivery{key: "custom\x00" + toolUseID, method: proto.MethodCustomToolResult, turn: turn,
		params: proto.CustomToolResultParams{SessionID: sessionID, ToolUseID: toolUseID, Content: content, IsError: r.IsError}})
	return nil
}

// overUse reports whether the turn of custom tool call toolUseID is
// over; Hub.mu is held.
func overUse(a *agentSession, toolUseID string) bool {
	turn, ok := a.useTurn[toolUseID]
	return ok && turn == ""
}
