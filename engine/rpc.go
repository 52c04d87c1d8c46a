package engine

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/serde"
)

// openSession reads the session and enforces the S gate.
func (e *Engine) openSession(ctx context.Context, id string) (*baton.Session, error) {
	s, err := e.sessionRow(ctx, id)
	if baton.ErrorCode(err) == baton.ECodeNotFound {
		return nil, baton.Errorf(baton.ECodeSessionFailed, "session no longer exists")
	}
	if err != nil {
		return nil, err
	}
	if s.State != baton.StateOpen {
		return nil, baton.Errorf(baton.ECodeNotOpen, "session is %s, not open", s.State)
	}
	return s, nil
}

// driverGate enforces the D gate for method. It never creates an actor:
// a session without one has no drivers.
func (e *Engine) driverGate(key *baton.Key, method string) (*actor, error) {
	e.mu.Lock()
	a := e.actors[key.Name]
	e.mu.Unlock()
	if a == nil || !a.isDriver(key.ClientID) {
		return nil, baton.Errorf(baton.ECodeNotDriver, "call session.registerDriver before %s", method)
	}
	return a, nil
}

// RegisterDriver registers the caller as a driver of its session
// (BAE's client API). Only the first registration of a key logs events.
func (e *Engine) RegisterDriver(ctx context.Context, key *baton.Key) error {
	s, err := e.openSession(ctx, key.Name)
	if err != nil {
		return err
	}
	a := e.actorFor(s.ID)
	a.mu.Lock()
	_, known := a.drivers[key.ClientID]
	if !known {
		a.drivers[key.ClientID] = struct{}{}
	}
	a.mu.Unlock()
	if known {
		return nil
	}
	evs := []*baton.Event{baton.NewEvent(s.ID, key.ClientID, baton.EventDriverRegister, struct{}{})}
	if prof, err := e.store.Profile(ctx, s.ProfileID); err == nil && len(prof.AvailableSandboxes) > 0 {
		evs = append(evs, baton.NewEvent(s.ID, key.ClientID, baton.EventSandboxAvail, map[string]any{"images": e.imageStatus(prof)}))
	}
	return e.store.Append(ctx, evs...)
}

// imageStatus lists a profile's images in its declared order with their
// provisioning status (pending when unknown).
func (e *Engine) imageStatus(p *baton.Profile) []baton.ImageStatus {
	known := map[string]baton.ImageStatus{}
	if e.images != nil {
		for _, st := range e.images.Images(p.ID) {
			known[st.Name] = st
		}
	}
	out := make([]baton.ImageStatus, 0, len(p.AvailableSandboxes))
	for _, img := range p.AvailableSandboxes {
		st, ok := known[img]
		if !ok {
			st = baton.ImageStatus{Name: img, Status: baton.ImagePending}
		}
		out = append(out, st)
	}
	return out
}

// SendMessage queues a turn on the session's gate (BAE's client API). The
// turn runs on the engine's goroutine; the returned Turn lets the caller
// watch it.
func (e *Engine) SendMessage(ctx context.Context, key *baton.Key, message json.RawMessage, opts baton.SendOptions) (*baton.Turn, error) {
	a, err := e.driverGate(key, "session.sendMessage")
	if err != nil {
		return nil, err
	}
	s, err := e.openSession(ctx, key.Name)
	if err != nil {
		return nil, err
	}
	msg, err := parseMessage(message)
	if err != nil {
		return nil, err
	}
	machine, err := e.brainOf(ctx, s)
	if err != nil {
		return nil, err
	}
	if machine != "" {
		return e.sendBrain(key, s, machine, msg) // an executor's agent loop runs it (brain.go)
	}
	t := &turnRun{
		key: key, actor: key.ClientID, msg: msg, opts: opts,
		started: make(chan struct{}), done: make(chan struct{}),
	}
	t.ctx, t.cancel = context.WithCancel(e.turnCtx)
	queued, err := a.admit(ctx, t)
	if err != nil {
		t.cancel()
		return nil, err
	}
	return &baton.Turn{
		Started: t.started,
		Queued:  queued,
		Sub: func() baton.Subscription {
			if t.sub == nil {
				return nil
			}
			return t.sub
		},
		Own:    func(ev *baton.Event) bool { return t.own[ev.ID] },
		Done:   t.done,
		Result: func() *baton.TurnResult { return t.result },
	}, nil
}

// CancelTurn stops the session's running turn, or gives up its paused
// turn so the next message continues it with error results for the
// pending client calls (Baton extension).
func (e *Engine) CancelTurn(ctx context.Context, key *baton.Key) error {
	a, err := e.driverGate(key, "session.cancelTurn")
	if err != nil {
		return err
	}
	if handled, err := e.cancelBrain(ctx, key); handled {
		return err
	}
	state, ok := a.cancel()
	if !ok {
		return baton.Errorf(baton.ECodeNoTurn, "no turn is running or paused in this session")
	}
	e.log.Info("turn cancelled", "session_id", key.Name, "by", key.ClientID, "state", state)
	return e.store.Append(ctx, baton.NewEvent(key.Name, key.ClientID, baton.EventTurnCancel, map[string]any{"state": state}))
}

// UpdateClientTools replaces the caller's client tools (BAE's client API);
// they take effect from its next turn.
func (e *Engine) UpdateClientTools(ctx context.Context, key *baton.Key, raw json.RawMessage) error {
	if _, err := e.driverGate(key, "session.updateClientTools"); err != nil {
		return err
	}
	s, err := e.openSession(ctx, key.Name)
	if err != nil {
		return err
	}
	tools, err := parseClientTools(raw)
	if err != nil {
		return err
	}
	prof, err := e.store.Profile(ctx, s.ProfileID)
	if err != nil {
		return baton.Errorf(baton.ECodeInternal, "Internal error")
	}
	for _, t := range tools {
		if t.Name == reservedToolName { // BAE words it as any other name
			return baton.Errorf(baton.ECodeToolNotAllowed, "tool_not_allowed: tool %s is not in the profile's allowlist", serde.Quote(reservedToolName))
		}
	}
	for _, t := range tools {
		if !prof.Allows(t.Name) {
			return baton.Errorf(baton.ECodeToolNotAllowed, "tool_not_allowed: tool %s is not in the profile's allowlist", serde.Quote(t.Name))
		}
	}
	defer e.dropRow(s.ID)
	return e.store.SetClientTools(ctx, s.ID, key.ClientID, tools)
}

// Unsubscribe ends every session.subscribe stream of the session.
func (e *Engine) Unsubscribe(ctx context.Context, key *baton.Key) error {
	e.feeds.unsubscribe(e.hub, key.Name)
	if e.unsubscribed != nil {
		return e.unsubscribed(ctx, key.Name)
	}
	return nil
}

// EndFeeds ends this node's session.subscribe feeds of a session that a
// client unsubscribed from through another node of the cluster.
func (e *Engine) EndFeeds(sessionID string) {
	e.feeds.unsubscribe(e.hub, sessionID)
}

// feeds tracks the live session.subscribe feeds of every session, so that
// a feed that ends can tell an unsubscribe from its session's close: a
// session in state error keeps its feeds until either. The zero value is
// ready to use.
type feeds struct {
	mu  sync.Mutex // held across the hub calls, so that no feed starts between marking and ending
	m   map[string]map[*feedEnd]struct{}
	max int // live feeds per session
}

// feedEnd is set on a feed that session.unsubscribe ended.
type feedEnd struct{ unsubscribed atomic.Bool }

// subscribe starts an observer subscription of session id, unless the
// session already has max live feeds.
func (fs *feeds) subscribe(h baton.Hub, id string) (*feedEnd, baton.Subscription, error) {
	f := &feedEnd{}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	if fs.max > 0 && len(fs.m[id]) >= fs.max {
		return nil, nil, baton.Errorf(baton.ECodeTooManyRequests, "session has %d subscribers; close one before subscribing again", fs.max)
	}
	if fs.m == nil {
		fs.m = map[string]map[*feedEnd]struct{}{}
	}
	if fs.m[id] == nil {
		fs.m[id] = map[*feedEnd]struct{}{}
	}
	fs.m[id][f] = struct{}{}
	return f, h.Subscribe(id, baton.SubObserver), nil
}

// remove forgets a feed that is done.
func (fs *feeds) remove(id string, f *feedEnd) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	delete(fs.m[id], f)
	if len(fs.m[id]) == 0 {
		delete(fs.m, id)
	}
}

// unsubscribe marks the session's feeds as unsubscribed and ends them.
func (fs *feeds) unsubscribe(h baton.Hub, id string) {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	for f := range fs.m[id] {
		f.unsubscribed.Store(true)
	}
	h.End(id, baton.SubObserver)
}

// replayChunk is how many events a replay reads at a time.
const replayChunk = 200

// Subscribe opens a session.subscribe feed (BAE's client API): it
// subscribes to the live feed first, then replays what followed
// sinceEventID, then goes live without a gap or a duplicate at the seam.
// On a closed session it replays and then ends; a session in state error
// still takes events (BAE's client API), so its feed stays live.
func (e *Engine) Subscribe(ctx context.Context, key *baton.Key, sinceEventID string, deltas bool) (*baton.Feed, error) {
	id := key.Name
	// Without since_event_id the feed starts at the log's end as read
	// before subscribing: whatever commits from here on reaches it, by
	// the hub or, from another node of a cluster, by a ring and the log.
	var base int64
	if sinceEventID == "" {
		var err error
		if base, err = e.store.LastSeq(ctx, id); err != nil {
			return nil, err
		}
	}
	end, sub, err := e.feeds.subscribe(e.hub, id)
	if err != nil {
		return nil, err
	}
	stop := func() {
		sub.Close()
		e.feeds.remove(id, end)
	}
	s, err := e.store.Session(ctx, id)
	if err != nil {
		stop()
		return nil, err
	}
	var (
		last      = base // highest seq delivered
		replaying = true // reads the log after last until it is caught up
		buf       []*baton.Event
		ended     = s.State == baton.StateClosed
		closed    = ended
		rung      bool // another node writes the session (a ring came)
	)
	if sinceEventID != "" {
		if last, err = e.store.EventSeq(ctx, id, sinceEventID); err != nil {
			stop()
			return nil, err
		}
	}
	// step returns the next notice; without block it returns ready=false
	// instead of waiting, and leaves an ended feed for a blocking call to
	// report.
	step := func(ctx context.Context, block bool) (*baton.Notice, bool, error) {
	again:
		for replaying {
			if len(buf) > 0 {
				ev := buf[0]
				buf = buf[1:]
				last = ev.Seq
				if rung && ev.Type == baton.EventSessionClose {
					// Nothing on this node ends the hub's feed of a session
					// another node closed: the close event does.
					ended, closed, replaying, buf = true, true, false, nil
				}
				return &baton.Notice{Event: ev}, true, nil
			}
			evs, err := e.store.EventsAfter(ctx, id, last, replayChunk)
			if err != nil {
				if !block {
					return nil, false, nil
				}
				return nil, true, baton.Errorf(baton.ECodeSessionFailed, "replay failed")
			}
			if len(evs) == 0 {
				replaying = false
			}
			buf = evs
		}
		if ended {
			return nil, block, nil
		}
		for {
			var (
				n  baton.Notice
				ok bool
			)
			if block {
				select {
				case <-ctx.Done():
					return nil, true, ctx.Err()
				case n, ok = <-sub.C():
				}
			} else {
				select {
				case n, ok = <-sub.C():
				default:
					return nil, false, nil
				}
			}
			if !ok {
				if !block {
					return nil, false, nil // Next reports the end
				}
				if err := sub.Err(); err != nil {
					return nil, true, err
				}
				// Ended by the session's close, unless an unsubscribe did it:
				// a session in error is never moved to closed.
				if s, err := e.store.Session(context.WithoutCancel(ctx), id); err == nil &&
					(s.State == baton.StateClosed || s.State == baton.StateError && !end.unsubscribed.Load()) {
					closed = true
				}
				return nil, true, nil
			}
			if n.Delta != nil {
				if deltas {
					return &n, true, nil
				}
				continue
			}
			if n.Ring != nil {
				if n.Ring.Seq > last {
					rung, replaying = true, true
					goto again
				}
				continue
			}
			if n.Event.Seq <= last {
				continue // already replayed
			}
			last = n.Event.Seq
			return &n, true, nil
		}
	}
	next := func(ctx context.Context) (*baton.Notice, error) {
		n, _, err := step(ctx, true)
		return n, err
	}
	poll := func() (*baton.Notice, bool) {
		n, ok, _ := step(ctx, false)
		return n, ok
	}
	return &baton.Feed{Next: next, Poll: poll, Closed: func() bool { return closed }, Close: stop}, nil
}
