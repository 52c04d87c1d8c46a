package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/baton-engine/baton"
)

// progressEvery is the least time between two stored progress reports of
// one executor call; reports in between are dropped (tool.progress is
// lossy anyway).
const progressEvery = 250 * time.Millisecond

// dispatchExecutor runs one call on the session's executor in the tool's
// environment and returns its tool_result. It never pauses the turn: a
// failure (no executor, over capacity, timeout, the executor gone past
// its resume window, the turn cancelled) is an error result saying why.
//
// Events: executor.tool.call (committed while the call runs),
// executor.tool.progress at most every progressEvery, then
// executor.tool.result and tool.result, held to share a commit with what
// the turn records next.
func (tc *turnCtx) dispatchExecutor(u toolUse, target execTarget) (json.RawMessage, error) {
	e, id, actor := tc.e, tc.a.id, tc.t.actor
	callID := baton.NewID("call_")
	// The call goes out while its record commits (the next emit awaits it).
	if err := tc.emitBehind(baton.NewEvent(id, actor, baton.EventExecutorToolCall, map[string]any{
		"tool_use_id": u.ID, "tool_call_id": callID, "environment_id": target.env,
		"tool": u.Name, "input": u.Input, "timeout_ms": e.executorTimeout.Milliseconds(),
	})); err != nil {
		return nil, err
	}
	pr := &progress{tc: tc, useID: u.ID, callID: callID}
	res, err := e.executors.Call(tc.t.ctx, baton.ExecutorCall{
		SessionID: id, ProfileID: target.profile, EnvironmentID: target.env,
		ToolCallID: callID, Name: u.Name, Input: u.Input, Timeout: e.executorTimeout,
		OnProgress: pr.report,
	})
	pr.finish()

	var executorID any
	if res.ExecutorID != "" {
		executorID = res.ExecutorID
	}
	p := map[string]any{"tool_use_id": u.ID, "tool_call_id": callID, "environment_id": target.env, "executor_id": executorID}
	content, isErr := executorContent(res.Content), res.IsError
	if err != nil {
		msg := baton.ErrorMessage(err)
		content, isErr = textContent("executor error: "+msg), true
		p["error"] = msg
	}
	p["is_error"], p["content"] = isErr, content
	tc.hold(
		baton.NewEvent(id, actor, baton.EventExecutorToolResult, p),
		baton.NewEvent(id, actor, baton.EventToolResult, map[string]any{
			"tool_use_id": u.ID, "dispatch": baton.DispatchExecutor, "is_error": isErr, "content": content,
		}),
	)
	return toolResult(u.ID, content, isErr), nil
}

// progress stores one call's tool.progress reports, throttled, and
// never after the call's result.
type progress struct {
	tc            *turnCtx
	useID, callID string

	mu       sync.Mutex
	last     time.Time
	finished bool
}

// report runs on the executor connection's reader; it queues the report
// for commit (the reader never waits for one) unless one was stored less
// than progressEvery ago. The turn's next emit reports a failed commit.
func (p *progress) report(r baton.ExecutorProgress) {
	now := p.tc.e.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.finished || now.Sub(p.last) < progressEvery {
		return
	}
	p.last = now
	tc := p.tc
	_ = tc.emitBehind(baton.NewEvent(tc.a.id, tc.t.actor, baton.EventExecutorToolProgress, map[string]any{
		"tool_use_id": p.useID, "tool_call_id": p.callID,
		"message": r.Message, "progress": r.Progress, "total": r.Total,
	}))
}

// finish stops reports: none is queued after it returns.
func (p *progress) finish() {
	p.mu.Lock()
	p.finished = true
	p.mu.Unlock()
}

// executorContent turns an executor's result content into tool_result
// content: a block array passes (artifact blocks, which models do not
// know, become a text line naming the artifact), a string becomes a text
// block, and any other JSON value becomes a text block of its JSON.
func executorContent(raw json.RawMessage) json.RawMessage {
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage(`[]`)
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return textContent(s)
	}
	var items []json.RawMessage
	if json.Unmarshal(raw, &items) != nil {
		return textContent(string(raw))
	}
	changed := false
	for i, it := range items {
		var b struct {
			Type       *string `json:"type"`
			ArtifactID string  `json:"artifact_id"`
			Name       string  `json:"name"`
			MediaType  string  `json:"media_type"`
			Size       int64   `json:"size"`
		}
		if json.Unmarshal(it, &b) != nil || b.Type == nil {
			return textContent(string(raw)) // not a block array
		}
		if *b.Type == "artifact" {
			items[i] = mustJSON(map[string]string{"type": "text", "text": fmt.Sprintf(
				"[artifact %s: %s (%s, %d bytes)]", b.ArtifactID, b.Name, b.MediaType, b.Size)})
			changed = true
		}
	}
	if !changed {
		return raw
	}
	return mustJSON(items)
}

// HandEvent records a tool or shell executor's durable session.event
// (the executor hub's HandSink): committed as executor.event with the
// hub's payload {type, data, executor_id, environment_id | machine_id,
// executor_session_id?}, attributed to the acting client of the turn the
// session runs (none between turns), before the executor gets its
// acknowledgement. An unknown session is forbidden; one that is no longer
// open takes nothing: the event is acknowledged and dropped, as a brain's
// after close.
func (k brainSink) HandEvent(ctx context.Context, sessionID string, payload json.RawMessage) error {
	e := k.e
	s, err := e.store.Session(ctx, sessionID)
	if baton.ErrorCode(err) == baton.ECodeNotFound {
		return baton.Errorf(baton.ECodeForbidden, "unknown session %s", sessionID)
	}
	if err != nil || s.State != baton.StateOpen {
		return err
	}
	return e.store.Append(ctx, &baton.Event{SessionID: sessionID, ClientKeyID: e.turnActor(sessionID), Type: baton.EventExecutorEvent, Payload: payload})
}

// turnActor is the acting client of the session's running turn — a
// server turn's, or a brain turn's — or "" when none runs.
func (e *Engine) turnActor(sessionID string) string {
	e.mu.Lock()
	a := e.actors[sessionID]
	e.mu.Unlock()
	if a != nil {
		a.mu.Lock()
		t := a.running
		a.mu.Unlock()
		if t != nil {
			return t.actor
		}
	}
	if bs := e.brains.get(sessionID); bs != nil {
		bs.mu.Lock()
		defer bs.mu.Unlock()
		if bs.turn != nil {
			return bs.turn.actor
		}
	}
	return ""
}
