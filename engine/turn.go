package engine

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/rawjson"
)

// unavailableText is the assistant reply of a turn whose providers failed.
const unavailableText = "The provider is currently unavailable."

// cancelledText is the assistant reply of a cancelled turn.
const cancelledText = "The turn was cancelled."

// turnCtx carries one running turn: its events, in order, and the write
// context that outlives a cancelled turn.
type turnCtx struct {
	e    *Engine
	a    *actor
	t    *turnRun
	wctx context.Context // for writes: ends only at engine shutdown

	mu     sync.Mutex // concurrent dispatchers emit through it
	events []*baton.Event
	held   []*baton.Event // recorded, to be committed with the next emit
	after  []func(error)  // told how the commit of the held events went
	behind []func() error // commits emitBehind queued, until they are awaited
	clean  bool           // completed or paused normally: its conversation may be cached
}

// errLoop is how persistence failures inside a turn reach the client.
var errLoop = baton.Errorf(baton.ECodeSessionFailed, "session loop failed")

// emit appends events, after any held ones, in one commit and records them
// as this request's. It returns once they and everything emitBehind queued
// before them are committed.
func (tc *turnCtx) emit(evs ...*baton.Event) error {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	evs, after := tc.take(evs)
	wait := tc.e.store.AppendQueued(tc.wctx, evs...)
	if err := tc.awaitBehind(); err != nil {
		_ = wait()
		return err
	}
	err := wait()
	for _, fn := range after {
		fn(err)
	}
	if err != nil {
		tc.e.log.Error("append turn events", "session_id", tc.a.id, "err", err)
		return errLoop
	}
	tc.events = append(tc.events, evs...)
	return nil
}

// emitBehind queues events (after any held ones) for commit and returns
// without waiting, so that the commit overlaps what the turn does next — a
// provider call whose provider.request nobody has acknowledged yet, a tool
// call going out. Queued commits keep the order they were queued in; the
// next emit waits for them and reports a failure. The callbacks of held
// events run as soon as their commit is done.
func (tc *turnCtx) emitBehind(evs ...*baton.Event) error {
	tc.mu.Lock()
	defer tc.mu.Unlock()
	evs, after := tc.take(evs)
	if len(evs) == 0 {
		return nil
	}
	wait := tc.e.store.AppendQueued(tc.wctx, evs...)
	if len(after) > 0 { // someone waits for this commit: tell them as soon as it is done
		done := make(chan error, 1)
		go func(commit func() error) {
			err := commit()
			for _, fn := range after {
				fn(err)
			}
			done <- err
		}(wait)
		wait = func() error { return <-done }
	}
	tc.behind = append(tc.behind, wait)
	tc.events = append(tc.events, evs...)
	return nil
}

// take returns the held events followed by evs, and the callbacks of the
// held ones. tc.mu is held.
func (tc *turnCtx) take(evs []*baton.Event) ([]*baton.Event, []func(error)) {
	if len(tc.held) > 0 {
		evs = append(tc.held, evs...)
		tc.held = nil
	}
	after := tc.after
	tc.after = nil
	return evs, after
}

// awaitBehind waits for every commit emitBehind queued. tc.mu is held.
func (tc *turnCtx) awaitBehind() error {
	var first error
	for _, wait := range tc.behind {
		if err := wait(); err != nil && first == nil {
			first = err
		}
	}
	tc.behind = tc.behind[:0]
	if first != nil {
		tc.e.log.Error("append turn events", "session_id", tc.a.id, "err", first)
		return errLoop
	}
	return nil
}

// holdThen holds events and calls fn with the outcome of the commit that
// carries them.
func (tc *turnCtx) holdThen(fn func(error), evs ...*baton.Event) {
	tc.mu.Lock()
	tc.held = append(tc.held, evs...)
	tc.after = append(tc.after, fn)
	tc.mu.Unlock()
}

// hold queues events to go out with the next emit. A turn holds what it
// records between two waits (a reply and its tool calls, say) so they share
// one commit; every wait — a provider call, a tool call, the end of the
// turn — is preceded by an emit, so nothing held is ever invisible while
// the turn waits.
func (tc *turnCtx) hold(evs ...*baton.Event) {
	tc.mu.Lock()
	tc.held = append(tc.held, evs...)
	tc.mu.Unlock()
}

// fail moves the session to error with a session.error event, as the
// failure outcomes do, and returns the unavailable reply.
func (tc *turnCtx) fail(payload map[string]any) *baton.TurnResult {
	if err := tc.emit(); err != nil {
		return &baton.TurnResult{Err: err}
	}
	ev := baton.NewEvent(tc.a.id, tc.t.actor, baton.EventSessionError, payload)
	defer tc.e.dropRow(tc.a.id)
	ended, err := tc.e.store.EndSession(tc.wctx, tc.a.id, baton.StateError, ev)
	if err != nil {
		return &baton.TurnResult{Err: errLoop}
	}
	if ended {
		tc.events = append(tc.events, ev)
		tc.e.log.Warn("session failed", "session_id", tc.a.id, "reason", payload["reason"])
	}
	return tc.reply(unavailableText)
}

func (tc *turnCtx) reply(text string) *baton.TurnResult {
	if err := tc.emit(); err != nil {
		return &baton.TurnResult{Err: err}
	}
	return &baton.TurnResult{
		Message: baton.Message{Role: "assistant", Content: textContent(text)},
		Events:  tc.events,
	}
}

// runTurn runs t to its end and hands the gate on.
func (e *Engine) runTurn(a *actor, t *turnRun) {
	tc := &turnCtx{e: e, a: a, t: t, wctx: e.ctx}
	res, p := tc.run()
	if err := tc.emit(); err != nil && res.Err == nil { // whatever is still held
		res, p = &baton.TurnResult{Err: err}, nil
	}
	if t.sub == nil { // never started: nothing to deliver to
		res.Events = tc.events
	}
	a.finish(t, p)
	t.finishWith(res)
}

// run is the turn: BAE's client API steps 5–11 and BAE's engine
func (tc *turnCtx) run() (*baton.TurnResult, *parked) {
	e, t, id := tc.e, tc.t, tc.a.id
	s, err := e.sessionRow(tc.wctx, id)
	if baton.ErrorCode(err) == baton.ECodeNotFound {
		return &baton.TurnResult{Err: baton.Errorf(baton.ECodeSessionFailed, "session no longer exists")}, nil
	} else if err != nil {
		return &baton.TurnResult{Err: errLoop}, nil
	}
	if s.State != baton.StateOpen {
		return &baton.TurnResult{Err: baton.Errorf(baton.ECodeNotOpen, "session is %s, not open", s.State)}, nil
	}

	content := t.msg.Content
	if r := t.resume; r != nil && t.reclaimed && !r.cancelled {
		// Logged before the caller's stream starts: it is in neither the
		// stream nor the result (as in BAE).
		ev := baton.NewEvent(id, r.owner, baton.EventSessionError, map[string]any{
			"reason": "driver_turn_abandoned", "owner_client_key_id": r.owner,
		})
		if err := e.store.Append(tc.wctx, ev); err != nil {
			return &baton.TurnResult{Err: errLoop}, nil
		}
	}
	t.sub = e.hub.Subscribe(id, baton.SubTurn)
	t.own = map[string]bool{}
	if r := t.resume; r != nil {
		merged, err := resumeContent(r, t.msg.Role, t.msg.Content, t.reclaimed)
		if err != nil {
			ev := baton.NewEvent(id, t.actor, baton.EventSessionError, map[string]any{
				"reason": "tool_result_merge_invalid", "detail": err.Error(),
			})
			// Other subscribers see it; the caller's stream carries only the
			// error (as in BAE).
			ev.ID = baton.NewEventID()
			t.own[ev.ID] = true
			close(t.started)
			_, endErr := e.store.EndSession(tc.wctx, id, baton.StateError, ev)
			e.dropRow(id) // after the change, so a racing read cannot cache the old row
			if endErr != nil {
				return &baton.TurnResult{Err: errLoop}, nil
			}
			return &baton.TurnResult{Err: baton.Errorf(baton.ECodeMergeInvalid, "tool result merge invalid: %s", err)}, nil
		}
		content = merged
	}

	// The caller's own message and client tool results: skipped by its
	// stream, first in its result.
	own := []*baton.Event{messageEvent(id, t.actor, baton.EventClientMessage, baton.Message{Role: t.msg.Role, Content: content})}
	// The conversation keeps the message as its event holds it, so that
	// the request body it came in is not kept alive for the whole turn.
	content = sharedMessage(own[0], t.msg.Role, content).Content
	t.msg.Content = nil
	serverIDs := map[string]bool{}
	if t.resume != nil {
		for _, r := range t.resume.serverResults {
			var b baton.Block
			_ = json.Unmarshal(r, &b)
			serverIDs[b.ToolUseID] = true
		}
	}
	if bs, ok := blocks(content); ok {
		for _, b := range bs {
			if b.Type == baton.BlockToolResult && !serverIDs[b.ToolUseID] {
				// The block's members as sent, whatever their type; null
				// when absent (as BAE).
				own = append(own, baton.NewEvent(id, t.actor, baton.EventToolResult, map[string]any{
					"tool_use_id": rawOrNull(rawjson.Member(b.Raw, "tool_use_id")), "dispatch": baton.DispatchClient,
					"content": rawOrNull(rawjson.Member(b.Raw, "content")),
				}))
			}
		}
	}
	for _, ev := range own {
		ev.ID = baton.NewEventID()
		t.own[ev.ID] = true
	}
	// The conversation so far: kept from the last turn, or rebuilt from the
	// log on the first turn since start (or after one that did not finish
	// cleanly) — read before this turn's own events are queued.
	cv := tc.a.takeConvo()
	if cv == nil {
		evs, err := e.store.EventsOfType(tc.wctx, id, transcriptTypes)
		if err != nil {
			close(t.started)
			return &baton.TurnResult{Err: errLoop}, nil
		}
		cv = newConvo(rebuild(evs).messages)
	}
	cv.add(baton.Message{Role: t.msg.Role, Content: content})
	close(t.started)
	// Held, to be committed with the provider.request (behind the call):
	// one commit, and one write of the session's index page, fewer.
	tc.hold(own...)

	prof, err := e.store.Profile(tc.wctx, s.ProfileID)
	if baton.ErrorCode(err) == baton.ECodeNotFound {
		if err := tc.emit(); err != nil { // the held message goes first
			return &baton.TurnResult{Err: err}, nil
		}
		ev := baton.NewEvent(id, t.actor, baton.EventSessionError, map[string]any{"reason": "profile_unavailable", "profile_id": s.ProfileID})
		_, err := e.store.EndSession(tc.wctx, id, baton.StateError, ev)
		e.dropRow(id)
		if err != nil {
			return &baton.TurnResult{Err: errLoop}, nil
		}
		return &baton.TurnResult{Err: baton.Errorf(baton.ECodeSessionFailed,
			"profile_unavailable: the profile bound to this session is no longer available")}, nil
	} else if err != nil {
		return &baton.TurnResult{Err: errLoop}, nil
	}
	res, p := tc.loop(prof, cv, tc.withMCP(prof, toolsFor(s, t.actor)))
	if tc.clean {
		tc.a.keepConvo(cv)
	}
	return res, p
}

// loop runs provider iterations until the model stops calling server
// tools, a client tool pauses the turn, or the iteration cap is hit.
func (tc *turnCtx) loop(prof *baton.Profile, cv *convo, base *toolset) (*baton.TurnResult, *parked) {
	t, id := tc.t, tc.a.id
	for iter := 0; iter < prof.Iterations(); iter++ {
		tools, err := tc.withRegistered(tc.withExecutors(prof, base))
		if err != nil {
			return &baton.TurnResult{Err: err}, nil
		}
		content, res := tc.callProviders(prof, cv, tools.defs)
		if res != nil {
			return res, nil
		}
		uses := toolUses(content)
		if len(uses) == 0 {
			ev := messageEvent(id, t.actor, baton.EventServerMessage, baton.Message{Role: "assistant", Content: content})
			msg := sharedMessage(ev, "assistant", content)
			if err := tc.emit(ev); err != nil {
				return &baton.TurnResult{Err: err}, nil
			}
			cv.add(msg)
			tc.clean = true
			return &baton.TurnResult{Message: msg, Events: tc.events}, nil
		}
		kinds := make([]baton.Dispatch, len(uses))
		calls := make([]*baton.Event, len(uses))
		paused := false
		for i, u := range uses {
			kinds[i] = tools.classify(u.Name)
			p := map[string]any{"id": u.ID, "name": u.Name, "input": u.Input, "dispatch": kinds[i]}
			if kinds[i] == baton.DispatchMCP {
				if srv := tools.mcp[u.Name]; srv != "" {
					p["server_name"] = srv
				} else {
					p["server_name"] = nil
				}
			}
			calls[i] = baton.NewEvent(id, t.actor, baton.EventToolCall, p)
			paused = paused || kinds[i] == baton.DispatchClient
		}
		tc.hold(calls...) // committed with the first result or the paused reply
		results, err := tc.dispatchAll(uses, kinds, tools)
		if err != nil {
			return &baton.TurnResult{Err: err}, nil
		}
		if t.ctx.Err() != nil {
			return tc.reply(cancelledText), nil
		}
		if paused {
			tagged := tagDispatch(content, uses, kinds)
			ev := messageEvent(id, t.actor, baton.EventServerMessage, baton.Message{Role: "assistant", Content: tagged})
			msg := sharedMessage(ev, "assistant", tagged)
			if err := tc.emit(ev); err != nil {
				return &baton.TurnResult{Err: err}, nil
			}
			cv.add(msg)
			tc.clean = true
			p := &parked{owner: t.actor, since: ev.CreatedAt, toolUses: uses, serverResults: results}
			return &baton.TurnResult{Message: msg, Events: tc.events}, p
		}
		cv.add(baton.Message{Role: "assistant", Content: content})
		cv.add(userResults(results))
	}
	return tc.fail(map[string]any{"reason": "loop_limit", "max_iterations": prof.Iterations()}), nil
}

// dispatchAll runs the server-side calls of one assistant message
// concurrently, across dispatchers, and returns their results in tool_use
// order.
func (tc *turnCtx) dispatchAll(uses []toolUse, kinds []baton.Dispatch, ts *toolset) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, len(uses))
	errs := make([]error, len(uses))
	var wg sync.WaitGroup
	for i, u := range uses {
		if kinds[i] == baton.DispatchClient {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i], errs[i] = tc.dispatch(kinds[i], u, ts)
		}()
	}
	wg.Wait()
	var results []json.RawMessage
	for i := range uses {
		if errs[i] != nil {
			return nil, errs[i]
		}
		if kinds[i] != baton.DispatchClient {
			results = append(results, out[i])
		}
	}
	return results, nil
}

// tagDispatch adds each tool_use block's dispatch tag to content.
func tagDispatch(content json.RawMessage, uses []toolUse, kinds []baton.Dispatch) json.RawMessage {
	byID := make(map[string]baton.Dispatch, len(uses))
	for i, u := range uses {
		byID[u.ID] = kinds[i]
	}
	i := 0
	return mapToolUses(content, func(b baton.Block) json.RawMessage {
		kind := baton.DispatchMCP
		if b.ID != nil {
			if k, ok := byID[*b.ID]; ok {
				kind = k
			}
		} else if i < len(kinds) {
			kind = kinds[i]
		}
		i++
		return setKey(b.Raw, "dispatch", string(kind))
	})
}
