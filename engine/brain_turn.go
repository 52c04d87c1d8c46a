package engine

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/baton-engine/baton"
)

// The life of a brain turn: each sendMessage runs on a goroutine of the
// engine (goBrain) that records its message and starts, joins or answers
// the turn; the executor's reports (brain_event.go) pause and end it.

// goBrain runs c on a goroutine the engine owns.
func (e *Engine) goBrain(bs *brainSession, c *brainCall) {
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.runBrainCall(bs, c)
	}()
}

// runBrainCall records c's own events and then does what its mode says.
func (e *Engine) runBrainCall(bs *brainSession, c *brainCall) {
	bs.mu.Lock()
	owned := c.owned
	bs.mu.Unlock()
	if !owned {
		if err := e.recordOwn(bs, c); errors.Is(err, errCallDone) {
			return
		} else if err != nil {
			bs.mu.Lock()
			t := bs.turn
			starter := c.mode == modeStart && t != nil && t.has(c)
			bs.mu.Unlock()
			if starter { // the turn cannot start without its message
				e.failStart(bs, t, err)
				return
			}
			bs.detach(c)
			c.finish(&baton.TurnResult{Err: err})
			return
		}
	}
	bs.mu.Lock()
	t := bs.turn
	attached := t != nil && t.has(c)
	bs.mu.Unlock()
	if !attached {
		return // it ended meanwhile, and c with it
	}
	ctx := e.turnCtx
	switch c.mode {
	case modeStart:
		e.startBrainTurn(ctx, bs, t, c)
		return
	case modeResume, modeReclaim:
		if c.mode == modeReclaim {
			ev := baton.NewEvent(bs.id, t.actor, baton.EventSessionError, map[string]any{
				"reason": "driver_turn_abandoned", "owner_client_key_id": t.actor,
			})
			if err := e.store.Append(e.ctx, ev); err != nil {
				e.log.Error("append brain event", "session_id", bs.id, "err", err)
			}
		}
		e.deliverResults(bs, c)
		if c.input == nil {
			e.pauseAgain(bs, t)
			return
		}
	}
	e.joinBrainTurn(ctx, bs, t, c)
}

// recordOwn subscribes c to the session's feed and records its message
// (and tool results) as its own events.
func (e *Engine) recordOwn(bs *brainSession, c *brainCall) error {
	sub := e.hub.Subscribe(bs.id, baton.SubTurn)
	own := []*baton.Event{messageEvent(bs.id, c.actor, baton.EventClientMessage, c.msg)}
	for _, r := range c.reply {
		var b baton.Block
		_ = json.Unmarshal(r, &b)
		own = append(own, baton.NewEvent(bs.id, c.actor, baton.EventToolResult, map[string]any{
			"tool_use_id": b.ToolUseID, "dispatch": baton.DispatchClient, "content": b.Content,
		}))
	}
	ids := map[string]bool{}
	for _, ev := range own {
		ev.ID = baton.NewEventID()
		ids[ev.ID] = true
	}
	bs.mu.Lock()
	if c.isDone() { // the session closed while c waited to run
		bs.mu.Unlock()
		sub.Close()
		return errCallDone
	}
	c.sub, c.own = sub, ids
	c.markStarted()
	bs.mu.Unlock()
	if err := e.store.Append(e.ctx, own...); err != nil {
		e.log.Error("append brain message", "session_id", bs.id, "err", err)
		return errLoop
	}
	bs.mu.Lock()
	c.owned = true
	c.events = append(own, c.events...)
	bs.mu.Unlock()
	return nil
}

// deliverResults sends the owner's tool results, and abandoned results
// for the calls given up, as agent.custom_tool_result.
func (e *Engine) deliverResults(bs *brainSession, c *brainCall) {
	send := func(id string, r baton.ClientResult) {
		if err := e.brains.b.CustomToolResult(bs.id, id, r); err != nil {
			e.log.Warn("custom tool result not delivered", "session_id", bs.id, "tool_use_id", id, "err", err)
		}
	}
	for _, raw := range c.reply {
		var b baton.Block
		_ = json.Unmarshal(raw, &b)
		content := b.Content
		if len(content) == 0 {
			content = json.RawMessage(`""`)
		}
		send(b.ToolUseID, baton.ClientResult{Content: content, IsError: b.IsError})
	}
	for _, u := range c.drop {
		send(u.ID, baton.ClientResult{Content: mustJSON(abandonedText), IsError: true})
	}
}

// startBrainTurn sends turn.start for t with c's message.
func (e *Engine) startBrainTurn(ctx context.Context, bs *brainSession, t *brainTurn, c *brainCall) {
	var tools []baton.ToolDef
	if s, err := e.sessionRow(ctx, bs.id); err == nil {
		tools = s.ClientTools[t.actor]
	}
	input := c.input
	if input == nil {
		input = json.RawMessage(`[]`)
	}
	err := e.brains.b.StartTurn(ctx, &baton.BrainTurn{SessionID: bs.id, MachineID: bs.machine, TurnID: t.id, Input: input, CustomTools: tools})
	if err != nil {
		e.log.Warn("brain turn not started", "session_id", bs.id, "machine_id", bs.machine, "err", err)
		e.failStart(bs, t, brainError(bs.machine, err))
		return
	}
	bs.mu.Lock()
	t.accept(true)
	canceled := t.canceled
	bs.mu.Unlock()
	if canceled { // cancelTurn came while turn.start was on its way
		e.cancelOnExecutor(ctx, bs, t)
	}
}

// failStart ends t, which did not start: its calls fail with err and the
// queued ones go on.
func (e *Engine) failStart(bs *brainSession, t *brainTurn, err error) {
	bs.mu.Lock()
	calls := t.calls
	t.calls = nil
	t.accept(false)
	var next []*brainCall
	if bs.turn == t {
		bs.turn = nil
		next = bs.nextLocked()
	}
	bs.mu.Unlock()
	for _, c := range calls {
		c.finish(&baton.TurnResult{Err: err})
	}
	e.runAll(bs, next)
}

// accept records how turn.start went, once; joiners wait for it.
func (t *brainTurn) accept(ok bool) {
	t.acceptOnce.Do(func() {
		t.ok = ok
		close(t.accepted)
	})
}

// joinBrainTurn adds c's message to t (turn.input). When the executor no
// longer runs t, c waits for t's end and starts the next turn (or joins
// the one that started meanwhile).
func (e *Engine) joinBrainTurn(ctx context.Context, bs *brainSession, t *brainTurn, c *brainCall) {
	for {
		select {
		case <-t.accepted:
		case <-ctx.Done():
			return
		}
		if !t.ok || c.isDone() {
			return // turn.start failed (c got its error), or c ended
		}
		err := e.brains.b.TurnInput(ctx, bs.id, t.id, baton.NewID("inp_"), c.input)
		code := baton.ErrorCode(err)
		bs.mu.Lock()
		switch {
		case err == nil:
			c.sent = true
			ended := bs.turn != t
			bs.mu.Unlock()
			if ended { // t took the input and ended meanwhile
				c.finish(c.message())
				return
			}
			e.pauseAgain(bs, t)
			return
		case code != baton.ECodeConflict && code != baton.ECodeNotFound:
			t.remove(c)
			bs.mu.Unlock()
			c.finish(&baton.TurnResult{Err: brainError(bs.machine, err)})
			return
		case c.isDone() || bs.closed:
			bs.mu.Unlock()
			return
		case bs.turn == t: // over on the executor; its end is on its way
			t.remove(c)
			bs.queue = append([]*brainCall{c}, bs.queue...)
			bs.mu.Unlock()
			return
		case bs.turn == nil:
			bs.startLocked(c)
			nt := bs.turn
			bs.mu.Unlock()
			e.startBrainTurn(ctx, bs, nt, c)
			return
		}
		t = bs.turn // another turn runs: join it
		if !t.has(c) {
			t.calls = append(t.calls, c)
		}
		bs.mu.Unlock()
	}
}

// pauseAgain hands the owner, attached again after answering, the uses it
// has not been shown yet.
func (e *Engine) pauseAgain(bs *brainSession, t *brainTurn) {
	bs.mu.Lock()
	ends := bs.pauseLocked(e, t)
	bs.mu.Unlock()
	finishAll(ends)
}

// pauseLocked pauses t for its unshown uses when calls are attached to
// hand them to, and returns their paused results for finishAll.
func (bs *brainSession) pauseLocked(e *Engine, t *brainTurn) []ending {
	var fresh []toolUse
	for i := range t.uses {
		if !t.uses[i].shown {
			fresh = append(fresh, t.uses[i].toolUse)
		}
	}
	var calls, unsent []*brainCall
	for _, c := range t.calls {
		if c.sent {
			calls = append(calls, c)
		} else {
			unsent = append(unsent, c) // they get the pause once their input is in
		}
	}
	if len(fresh) == 0 || len(calls) == 0 || bs.turn != t {
		return nil
	}
	var all []toolUse
	for i := range t.uses {
		t.uses[i].shown = true
		all = append(all, t.uses[i].toolUse)
	}
	t.paused = true
	t.deadline = e.now().Add(e.turnTimeout)
	bs.stopTimerLocked()
	bs.timer = e.clk.AfterFunc(e.turnTimeout, func() { e.abandonPause(bs, t) })
	t.calls = unsent
	ends := make([]ending, len(calls))
	for i, c := range calls {
		content := append([]json.RawMessage(nil), c.content...)
		for _, u := range all {
			content = append(content, mustJSON(map[string]any{"type": baton.BlockToolUse, "id": u.ID, "name": u.Name, "input": u.Input, "dispatch": baton.DispatchClient}))
		}
		ends[i] = ending{c, &baton.TurnResult{Message: baton.Message{Role: "assistant", Content: mustJSON(content)}, Events: c.events}}
	}
	return ends
}

// ending is a call with the result it ends with.
type ending struct {
	c *brainCall
	r *baton.TurnResult
}

// finishAll ends calls with their results, outside the session's lock.
func finishAll(ends []ending) {
	for _, x := range ends {
		x.c.finish(x.r)
	}
}

// abandonPause runs at a pause's deadline: the first queued call takes it
// over.
func (e *Engine) abandonPause(bs *brainSession, t *brainTurn) {
	bs.mu.Lock()
	if bs.closed || bs.turn != t || !t.paused || len(bs.queue) == 0 || e.now().Before(t.deadline) {
		bs.mu.Unlock()
		return
	}
	c := bs.reclaimLocked(t, nil)
	bs.mu.Unlock()
	e.goBrain(bs, c)
}

// reclaimLocked hands an abandoned pause to the first queued call (c, if
// any, queues behind it), or else to c, and returns the call to run: it
// gives the pending calls up and joins the turn with its message.
func (bs *brainSession) reclaimLocked(t *brainTurn, c *brainCall) *brainCall {
	taker := c
	if len(bs.queue) > 0 {
		taker = bs.queue[0]
		bs.queue = bs.queue[1:]
		if c != nil {
			bs.queue = append(bs.queue, c)
		}
	}
	taker.mode, taker.drop, taker.sent = modeReclaim, t.giveUp(), false
	bs.stopTimerLocked()
	t.calls = append(t.calls, taker)
	return taker
}

// endTurn finishes t: its calls end with res(c); queued calls go on.
func (e *Engine) endTurn(bs *brainSession, t *brainTurn, res func(c *brainCall) *baton.TurnResult) {
	bs.mu.Lock()
	if bs.turn != t {
		bs.mu.Unlock()
		return
	}
	bs.turn = nil
	bs.stopTimerLocked()
	var ends []ending
	for _, c := range t.calls {
		if c.sent { // an unsent one learns from turn.input that t is over
			ends = append(ends, ending{c, res(c)})
		}
	}
	t.calls = nil
	next := bs.nextLocked()
	bs.mu.Unlock()
	finishAll(ends)
	e.runAll(bs, next)
}

// waitingLocked counts the calls that wait behind the turn: queued, or
// joined to it and waiting for its end. Each holds its message.
func (bs *brainSession) waitingLocked() int {
	n := len(bs.queue)
	if t := bs.turn; t != nil {
		for _, c := range t.calls {
			if c.mode == modeJoin {
				n++
			}
		}
	}
	return n
}

// nextLocked starts the next turn with the queued calls: the first starts
// it, the others join it. It returns the calls to run.
func (bs *brainSession) nextLocked() []*brainCall {
	if bs.closed || bs.turn != nil || len(bs.queue) == 0 {
		return nil
	}
	q := bs.queue
	bs.queue = nil
	bs.startLocked(q[0])
	for _, c := range q[1:] {
		c.mode = modeJoin
		bs.turn.calls = append(bs.turn.calls, c)
	}
	return q
}

func (e *Engine) runAll(bs *brainSession, calls []*brainCall) {
	for _, c := range calls {
		e.goBrain(bs, c)
	}
}

// cancelOnExecutor sends turn.cancel; when it cannot reach the executor
// the turn ends here as cancelled (the hub holds turn.cancel until the
// executor resumes the session, before any new turn.start).
func (e *Engine) cancelOnExecutor(ctx context.Context, bs *brainSession, t *brainTurn) {
	if _, err := e.brains.b.CancelTurn(ctx, bs.id, t.id); err != nil {
		e.log.Warn("turn.cancel not answered; the turn ends here", "session_id", bs.id, "turn_id", t.id, "err", err)
		e.endTurn(bs, t, func(c *brainCall) *baton.TurnResult { return c.text(cancelledText) })
	}
}

// cancelBrain serves cancelTurn on a brain session; handled is false when
// the session has no brain turn state (a server turn, or none at all). A
// repeat while the turn is still ending succeeds again.
func (e *Engine) cancelBrain(ctx context.Context, key *baton.Key) (handled bool, err error) {
	bs := e.brains.get(key.Name)
	if bs == nil {
		return false, nil
	}
	bs.mu.Lock()
	t := bs.turn
	if t != nil && t.canceled {
		bs.mu.Unlock()
		return true, nil
	}
	if t == nil {
		bs.mu.Unlock()
		return true, baton.Errorf(baton.ECodeNoTurn, "no turn is running or paused in this session")
	}
	state := "running"
	if t.paused {
		state = "paused"
	}
	t.canceled = true
	ok := t.ok
	bs.mu.Unlock()
	e.log.Info("turn cancelled", "session_id", key.Name, "by", key.ClientID, "state", state, "turn_id", t.id)
	if ok {
		e.cancelOnExecutor(ctx, bs, t)
	}
	return true, e.store.Append(ctx, baton.NewEvent(key.Name, key.ClientID, baton.EventTurnCancel, map[string]any{"state": state}))
}
