package engine

import (
	"context"
	"encoding/json"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/baton-engine/baton"
)

// actor is the runtime of one open session: its registered drivers and its
// turn gate — the running turn, a parked (paused) turn with its
// abandonment deadline, and the FIFO queue of waiting turns. All of it is
// guarded by mu; the turn itself runs on a goroutine the engine owns.
type actor struct {
	id string
	e  *Engine

	mu      sync.Mutex
	loaded  bool // the log has been read for a parked turn
	closed  bool
	drivers map[string]struct{}
	running *turnRun
	parked  *parked
	queue   []*turnRun
	timer   baton.Timer
	sandbox *remoteSandbox // the session's remote sandbox, if any
	convo   *convo         // the conversation after the last finished turn; nil = read the log
	row     *baton.Session // the open session's row, while nothing changed it
	rowGen  uint64         // bumped by every change, so a read racing one is not cached
}

// maxCachedConvo bounds the conversation an idle actor keeps in memory;
// a longer one is rebuilt from the log at each turn instead.
const maxCachedConvo = 1 << 20

// takeConvo hands the cached conversation to a starting turn; the cache is
// empty until the turn gives it back, so a turn that fails leaves the next
// one to rebuild from the log.
func (a *actor) takeConvo() *convo {
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.convo
	a.convo = nil
	return c
}

// keepConvo caches the conversation of a turn that finished cleanly.
func (a *actor) keepConvo(c *convo) {
	if c.size > maxCachedConvo {
		return
	}
	a.mu.Lock()
	if !a.closed {
		a.convo = c
	}
	a.mu.Unlock()
}

// parked is a paused turn waiting for its client tool results.
type parked struct {
	owner         string // client key id that owns the turn
	since         time.Time
	deadline      time.Time
	toolUses      []toolUse
	serverResults []json.RawMessage
	cancelled     bool // cancelTurn: the next message abandons it silently
}

// turnRun is one sendMessage waiting for or holding the gate.
type turnRun struct {
	key   *baton.Key
	actor string // acting client key id
	msg   baton.Message
	opts  baton.SendOptions

	ctx    context.Context // cancelled by cancelTurn, close or shutdown
	cancel context.CancelFunc

	started chan struct{}
	sub     baton.Subscription
	own     map[string]bool
	done    chan struct{}
	result  *baton.TurnResult

	resume    *parked // the paused turn this one continues
	reclaimed bool    // taken by abandonment (deadline or cancel)
}

// actorFor returns the session's actor, creating it on first use.
func (e *Engine) actorFor(id string) *actor {
	e.mu.Lock()
	defer e.mu.Unlock()
	a := e.actors[id]
	if a == nil {
		a = &actor{id: id, e: e, drivers: make(map[string]struct{})}
		e.actors[id] = a
	}
	return a
}

// load recovers a parked turn from the log after a restart, once.
// Caller holds a.mu.
func (a *actor) loadLocked(ctx context.Context) error {
	if a.loaded {
		return nil
	}
	evs, err := a.e.store.EventsOfType(ctx, a.id, transcriptTypes)
	if err != nil {
		return err
	}
	if tr := rebuild(evs); tr.paused != nil {
		p := tr.paused
		p.deadline = p.since.Add(a.e.turnTimeout)
		a.parked = p
		a.armLocked()
	}
	a.loaded = true
	return nil
}

// admit puts t through the gate (BAE's client API): the owner resumes its
// parked turn at once; anyone may reclaim an expired or cancelled parked
// turn ahead of the queue; an idle session starts t; otherwise t queues,
// and queued says so, unless the queue is full.
func (a *actor) admit(ctx context.Context, t *turnRun) (queued bool, err error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return false, baton.Errorf(baton.ECodeNotOpen, "session is closed, not open")
	}
	if err := a.loadLocked(ctx); err != nil {
		return false, err
	}
	switch p := a.parked; {
	case p != nil && p.owner == t.actor && !p.cancelled:
		a.takeParkedLocked(t, false)
	case p != nil && (p.cancelled || !a.e.now().Before(p.deadline)):
		a.takeParkedLocked(t, true)
	case a.running == nil && a.parked == nil && len(a.queue) == 0:
		a.startLocked(t)
	case len(a.queue) >= a.e.maxQueued:
		return false, a.e.queueFull()
	default:
		a.queue = append(a.queue, t)
		return true, nil
	}
	return false, nil
}

// queueFull is the error of a sendMessage past the session's queue cap:
// each queued turn holds its message until it runs, so a client cannot
// pile up more than maxQueued of them.
func (e *Engine) queueFull() error {
	return baton.Errorf(baton.ECodeTooManyRequests, "session has %d queued messages; wait for a turn to finish", e.maxQueued)
}

func (a *actor) takeParkedLocked(t *turnRun, reclaimed bool) {
	t.resume, t.reclaimed = a.parked, reclaimed
	a.parked = nil
	a.disarmLocked()
	a.startLocked(t)
}

func (a *actor) startLocked(t *turnRun) {
	a.running = t
	a.e.wg.Add(1)
	go func() {
		defer a.e.wg.Done()
		a.e.runTurn(a, t)
	}()
}

// finish is called by a turn when it ends; p is its paused state, if any.
// A paused turn is parked and goes at once to its owner's queued message,
// if there is one; otherwise its abandonment timer is armed.
func (a *actor) finish(t *turnRun, p *parked) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.running == t {
		a.running = nil
	}
	if a.closed {
		return
	}
	if p != nil {
		p.deadline = p.since.Add(a.e.turnTimeout)
		a.parked = p
		if next := a.ownerQueuedLocked(); next != nil {
			a.takeParkedLocked(next, false)
			return
		}
		a.armLocked()
		return
	}
	a.nextLocked()
}

// ownerQueuedLocked removes from the queue and returns the parked turn's
// owner's first queued message, if any: one sent while the turn still ran
// resumes it as soon as it pauses, ahead of the other drivers (rule 1 of
// admission, as if it arrived now).
func (a *actor) ownerQueuedLocked() *turnRun {
	for i, t := range a.queue {
		if t.actor == a.parked.owner {
			a.queue = slices.Delete(a.queue, i, i+1)
			return t
		}
	}
	return nil
}

// nextLocked starts the first queued turn when the gate is free.
func (a *actor) nextLocked() {
	if a.running != nil || a.parked != nil || len(a.queue) == 0 {
		return
	}
	t := a.queue[0]
	a.queue = a.queue[1:]
	a.startLocked(t)
}

// armLocked sets the abandonment timer: at the deadline the first queued
// driver reclaims the parked turn (BAE only checked on the next arrival).
func (a *actor) armLocked() {
	a.disarmLocked()
	d := a.parked.deadline.Sub(a.e.now())
	a.timer = a.e.clk.AfterFunc(d, a.expire)
}

func (a *actor) disarmLocked() {
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
}

// expire runs at a parked turn's deadline.
func (a *actor) expire() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed || a.parked == nil || a.running != nil || len(a.queue) == 0 {
		return
	}
	if a.e.now().Before(a.parked.deadline) {
		a.armLocked() // re-parked since this timer was set
		return
	}
	t := a.queue[0]
	a.queue = a.queue[1:]
	a.takeParkedLocked(t, true)
}

// cancel stops the running turn, or marks a parked turn cancelled so the
// next message (a queued one first) continues it with error results.
func (a *actor) cancel() (state string, ok bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.running != nil:
		a.running.cancel()
		return "running", true
	case a.parked != nil && !a.parked.cancelled:
		a.parked.cancelled = true
		if len(a.queue) > 0 {
			t := a.queue[0]
			a.queue = a.queue[1:]
			a.takeParkedLocked(t, true)
		}
		return "paused", true
	}
	return "", false
}

// close drops all runtime state: drivers, parked turn, queue (whose turns
// fail), and cancels the running turn.
func (a *actor) close() {
	a.mu.Lock()
	a.closed = true
	a.drivers = map[string]struct{}{}
	a.parked = nil
	a.convo = nil
	a.row = nil
	a.disarmLocked()
	queue := a.queue
	a.queue = nil
	if a.running != nil {
		a.running.cancel()
	}
	a.mu.Unlock()
	for _, t := range queue {
		t.cancel()
		t.finishWith(&baton.TurnResult{Err: baton.Errorf(baton.ECodeNotOpen, "session is closed, not open")})
	}
}

// finishWith publishes t's result. Started is closed too, so a caller
// waiting for the turn to start wakes up.
func (t *turnRun) finishWith(r *baton.TurnResult) {
	t.result = r
	select {
	case <-t.started:
	default:
		close(t.started)
	}
	close(t.done)
}

// driverIDs returns the registered driver key ids, sorted.
func (a *actor) driverIDs() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	ids := make([]string, 0, len(a.drivers))
	for id := range a.drivers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// isDriver reports whether clientKeyID registered as a driver.
func (a *actor) isDriver(clientKeyID string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	_, ok := a.drivers[clientKeyID]
	return ok
}
