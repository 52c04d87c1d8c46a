package engine

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/baton-engine/baton"
)

// registeredPrefix starts every model-visible registered tool name:
// client__{name}__{tool}.
const registeredPrefix = "client__"

// regTarget is where a registered tool name routes.
type regTarget struct {
	clientID string
	tool     string
}

// RegisteredToolName is the model-visible name of a registered client's
// tool.
func RegisteredToolName(client, tool string) string {
	return registeredPrefix + client + "__" + tool
}

// withRegistered returns base plus the tools of the session's live
// registered clients, read now: it is called before every model call, so
// a client registered during a running turn is seen by the next one.
func (tc *turnCtx) withRegistered(base *toolset) (*toolset, error) {
	base = tc.withStatus(base) // remote_subagent_status, while it has something to report
	if tc.e.clients == nil {
		return base, nil
	}
	live, err := tc.e.Clients(tc.wctx, tc.a.id)
	if err != nil {
		tc.e.log.Error("load registered clients", "session_id", tc.a.id, "err", err)
		return nil, errLoop
	}
	if len(live) == 0 {
		return base, nil
	}
	ts := *base
	ts.defs = append([]json.RawMessage(nil), base.defs...)
	ts.registered = map[string]regTarget{}
	for _, c := range live {
		for _, t := range c.Tools {
			name := RegisteredToolName(c.Name, t.Name)
			if ts.client[name] || ts.sandbox[name] || ts.subagent[name] || ts.mcp[name] != "" {
				continue // a declared tool of that exact name wins
			}
			ts.registered[name] = regTarget{clientID: c.ID, tool: t.Name}
			desc := t.Description
			ts.defs = append(ts.defs, mustJSON(struct {
				Name        string          `json:"name"`
				Description *string         `json:"description"`
				InputSchema json.RawMessage `json:"input_schema"`
			}{name, &desc, t.Parameters}))
		}
	}
	return &ts, nil
}

// dispatchRegisteredCall sends one call to its registered client and waits
// for the result, the call timeout, the client's end or the turn's cancel.
func (tc *turnCtx) dispatchRegisteredCall(u toolUse, target regTarget) (json.RawMessage, error) {
	e, id, actor := tc.e, tc.a.id, tc.t.actor
	now := e.clock()
	deadline := now.Add(e.callTimeout)
	call := baton.ClientCall{
		CallID: baton.NewID("call_"), Tool: target.tool, Input: u.Input,
		ToolUseID: u.ID, Deadline: baton.FormatTime(deadline),
	}
	// The call goes out while its event commits (the next emit awaits it):
	// the client does not wait for the fsync.
	if err := tc.emitBehind(baton.NewEvent(id, actor, baton.EventClientToolCall, map[string]any{
		"client_id": target.clientID, "call_id": call.CallID, "tool": call.Tool, "tool_use_id": u.ID,
		"input": u.Input, "deadline": call.Deadline,
	})); err != nil {
		return nil, err
	}
	var (
		res    baton.ClientResult
		reason string // why the call failed without a result
	)
	rc := e.reg(target.clientID)
	pc := &pendingCall{call: call, res: make(chan baton.ClientResult, 1), saved: make(chan error, 1)}
	switch {
	case !e.liveClientOf(tc.wctx, id, target.clientID): // cached; every change drops it
		e.release(target.clientID, rc) // it ended: no entry stays behind
		reason = "client_gone"
	case !rc.add(pc):
		reason = "client_gone"
	default:
		fired, stop := e.after(deadline.Sub(now))
		select {
		case res = <-pc.res:
		case <-fired:
			reason = "timeout"
		case <-rc.gone:
			reason = "client_gone"
		case <-tc.t.ctx.Done():
			reason = "cancelled"
		}
		stop()
		if reason != "" {
			if _, waiting := rc.take(call.CallID); !waiting {
				res, reason = <-pc.res, "" // the result won the race
			}
		}
	}
	content := res.Content
	isErr := res.IsError
	if reason != "" {
		isErr = true
		content = textContent(failText(reason, target.tool, e.callTimeout))
	} else if len(content) > 0 && content[0] == '"' {
		var s string
		_ = json.Unmarshal(content, &s)
		content = textContent(s)
	}
	p := map[string]any{"client_id": target.clientID, "call_id": call.CallID, "tool_use_id": u.ID, "is_error": isErr, "content": content}
	if reason != "" {
		p["reason"] = reason
	}
	evs := []*baton.Event{
		baton.NewEvent(id, actor, baton.EventClientToolResult, p),
		baton.NewEvent(id, actor, baton.EventToolResult, map[string]any{
			"tool_use_id": u.ID, "dispatch": baton.DispatchRegistered, "is_error": isErr, "content": content,
		}),
	}
	if reason != "" {
		// Nobody waits on a call that got no result: its events share a
		// commit with what the turn records next.
		tc.hold(evs...)
		return toolResult(u.ID, content, isErr), nil
	}
	// The client's result POST is answered once these events are durable,
	// so their commit is queued now rather than held for the next model
	// request, which waits for every other call of the message: a client
	// answering one call at a time would stall on its own first answer.
	// The store's writer still batches the commit with whatever else is
	// being appended; the next emit awaits it.
	tc.holdThen(func(err error) { pc.saved <- err }, evs...)
	if err := tc.emitBehind(); err != nil {
		return nil, err
	}
	return toolResult(u.ID, content, isErr), nil
}

// failText is the error result the model sees for a call that got no
// result.
func failText(reason, tool string, timeout time.Duration) string {
	switch reason {
	case "timeout":
		return fmt.Sprintf("registered client error: tool '%s' did not answer within %s", tool, timeout)
	case "cancelled":
		return fmt.Sprintf("registered client error: the call to '%s' was cancelled", tool)
	}
	return fmt.Sprintf("registered client error: the client serving '%s' is gone", tool)
}
