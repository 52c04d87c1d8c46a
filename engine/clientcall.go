package engine

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/baton-engine/baton"
)

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
