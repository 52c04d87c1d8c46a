package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/baton-engine/baton"
)

// Brain sessions (bma.executor.v1.1, "How executors serve sessions"): a
// profile with brain {type:"executor", machine_id} runs its turns on an
// agent executor of that machine through baton.Brains, not on the
// provider loop.
//
// session.sendMessage starts a turn (turn.start) when none runs. While one
// runs, the message joins it (turn.input): the call streams the turn from
// then on and gets the turn's terminal result too — the agent messages
// that arrived while it was attached, and its events. When the executor
// no longer runs the turn, the message waits for the turn's end and
// starts the next one. The executor's events are stored under their own
// type, attributed to the client that started the turn, and reach every
// attached call's stream; the turn's end (session.status_idle) finishes
// its calls with the agent.message content they saw ("The turn was
// cancelled." or "The agent turn failed: …" for those outcomes).
//
// agent.custom_tool_use of a tool the acting client declared pauses the
// turn for that client like a dispatch:"client" block: the attached calls
// end with the messages so far plus a tool_use block (id = the event_id,
// "dispatch":"client"); the client's next sendMessage carries the
// tool_result blocks, which go back as agent.custom_tool_result, and the
// call waits for the turn again. Plain text instead gives the calls up
// (error results) and joins the turn as input. Other drivers queue behind
// a pause; past BAE_TURN_TIMEOUT the first of them takes it over the same
// way (driver_turn_abandoned). A custom tool the acting client did not
// declare gets an error result at once.

// Call modes: what a sendMessage does with the brain turn.
const (
	modeStart   = iota // start a turn with its message
	modeJoin           // add its message to the running turn
	modeResume         // the owner answers the pause
	modeReclaim        // take over an abandoned pause
)

var (
	_ baton.BrainTurns         = (*Engine)(nil)
	_ baton.InteractionService = (*Engine)(nil)
)

// brains is the engine's side of every brain session.
type brains struct {
	b        baton.Brains // nil: profiles with an executor brain cannot run turns
	mu       sync.Mutex
	sessions map[string]*brainSession
}

// brainSession is the runtime of one brain session.
type brainSession struct {
	id      string
	machine string

	mu     sync.Mutex
	closed bool
	turn   *brainTurn // the executor turn in flight, if any
	queue  []*brainCall
	seen   map[string]bool // event_ids recorded; nil until read from the log
	actor  string          // the acting client of the latest turn
	timer  baton.Timer     // the pause's abandonment deadline
	loaded bool
}

// brainTurn is one executor turn.
type brainTurn struct {
	id         string
	actor      string        // the client that started it
	calls      []*brainCall  // attached: they end with the turn or its pause
	accepted   chan struct{} // closed once turn.start is answered (accept)
	acceptOnce sync.Once
	ok         bool        // turn.start was accepted (set before accepted closes)
	uses       []customUse // custom tool calls waiting for the acting client
	paused     bool        // some uses wait for their owner's results
	deadline   time.Time
	canceled   bool
	lastErr    string // the latest agent.error message
}

// customUse is one agent.custom_tool_use waiting for its result.
type customUse struct {
	toolUse
	shown bool // handed to the owner in a paused result
}

// brainCall is one sendMessage on a brain session.
type brainCall struct {
	key   *baton.Key
	actor string
	msg   baton.Message
	mode  int
	input json.RawMessage // blocks to start or join the turn with (nil: none)
	reply []json.RawMessage
	drop  []toolUse // pending calls it gives up (abandoned results)
	owned bool      // its own events are recorded
	sent  bool      // its input reached the executor (or it has none)

	started   chan struct{}
	sub       baton.Subscription
	own       map[string]bool
	once      sync.Once
	startOnce sync.Once
	done      chan struct{}
	result    *baton.TurnResult // set once, before done closes
	content   []json.RawMessage // agent.message blocks seen while attached
	events    []*baton.Event
}

func (bs *brains) init(b baton.Brains, e *Engine) {
	bs.b = b
	bs.sessions = map[string]*brainSession{}
	if b != nil {
		b.Attach(brainSink{e})
	}
}

// get returns a known brain session.
func (bs *brains) get(id string) *brainSession {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return bs.sessions[id]
}

// session returns the brain session id, creating it.
func (bs *brains) session(id, machine string) *brainSession {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	s := bs.sessions[id]
	if s == nil {
		s = &brainSession{id: id, machine: machine}
		bs.sessions[id] = s
	}
	return s
}

// forget ends a closed session's brain: waiting calls fail and the agent
// session is closed on the executor.
func (bs *brains) forget(id string) {
	if s := bs.take(id); s != nil {
		s.shut(baton.Errorf(baton.ECodeNotOpen, "session is closed, not open"))
	}
	if bs.b != nil { // also for an agent session taken back after a restart
		bs.b.CloseAgent(id)
	}
}

// take removes and returns the brain session id, if any.
func (bs *brains) take(id string) *brainSession {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	s := bs.sessions[id]
	delete(bs.sessions, id)
	return s
}

// close fails every waiting call at shutdown.
func (bs *brains) close() {
	bs.mu.Lock()
	all := bs.sessions
	bs.sessions = map[string]*brainSession{}
	bs.mu.Unlock()
	for _, s := range all {
		s.shut(baton.Errorf(baton.ECodeSessionFailed, "the server is shutting down"))
	}
}

// shut closes s and fails its calls with err.
func (s *brainSession) shut(err error) {
	s.mu.Lock()
	s.closed = true
	s.stopTimerLocked()
	var calls []*brainCall
	if t := s.turn; t != nil {
		calls = t.calls
		t.calls = nil
		t.accept(false) // joiners waiting for turn.start stop waiting
		s.turn = nil
	}
	calls = append(calls, s.queue...)
	s.queue = nil
	s.mu.Unlock()
	for _, c := range calls {
		c.finish(&baton.TurnResult{Err: err})
	}
}

// brainOf returns the brain machine of session s, or "" for a server brain.
func (e *Engine) brainOf(ctx context.Context, s *baton.Session) (string, error) {
	if bs := e.brains.get(s.ID); bs != nil {
		return bs.machine, nil
	}
	prof, err := e.store.Profile(ctx, s.ProfileID)
	if baton.ErrorCode(err) == baton.ECodeNotFound {
		return "", nil // the server turn reports the missing profile
	}
	if err != nil {
		return "", err
	}
	if !prof.Brain.Executor() {
		return "", nil
	}
	return prof.Brain.MachineID, nil
}

// sendBrain admits a sendMessage on a brain session.
func (e *Engine) sendBrain(key *baton.Key, s *baton.Session, machine string, msg baton.Message) (*baton.Turn, error) {
	if e.brains.b == nil {
		return nil, baton.Errorf(baton.ECodeSessionFailed, "this server runs no executor brains")
	}
	bs := e.brains.session(s.ID, machine)
	c := &brainCall{key: key, actor: key.ClientID, msg: msg, input: blocksOf(msg.Content),
		started: make(chan struct{}), done: make(chan struct{})}
	bs.mu.Lock()
	if bs.closed {
		bs.mu.Unlock()
		return nil, baton.Errorf(baton.ECodeNotOpen, "session is closed, not open")
	}
	if err := e.loadLocked(e.ctx, bs); err != nil { // a pause from before a restart
		bs.mu.Unlock()
		return nil, err
	}
	run, queued := c, false
	switch t := bs.turn; {
	case t == nil:
		bs.startLocked(c)
	case t.paused && c.actor == t.actor && !t.canceled:
		if err := c.answer(t); err != nil {
			bs.mu.Unlock()
			return nil, err
		}
		if !t.paused {
			bs.stopTimerLocked()
		}
		c.sent = c.input == nil
		t.calls = append(t.calls, c)
	case t.paused && !e.now().Before(t.deadline):
		run = bs.reclaimLocked(t, c)
	case bs.waitingLocked() >= e.maxQueued:
		bs.mu.Unlock()
		return nil, e.queueFull()
	case t.paused || len(bs.queue) > 0:
		bs.queue = append(bs.queue, c)
		run, queued = nil, true
	default:
		queued = true // it waits for the running turn to take its input
		c.mode = modeJoin
		t.calls = append(t.calls, c)
	}
	bs.mu.Unlock()
	if run != nil {
		e.goBrain(bs, run)
	}
	return &baton.Turn{
		Started: c.started,
		Queued:  queued,
		Sub: func() baton.Subscription {
			if c.sub == nil {
				return nil
			}
			return c.sub
		},
		Own:    func(ev *baton.Event) bool { return c.own[ev.ID] },
		Done:   c.done,
		Result: func() *baton.TurnResult { return c.result },
	}, nil
}

// startLocked makes c start a new turn.
func (bs *brainSession) startLocked(c *brainCall) {
	c.mode, c.sent = modeStart, true
	bs.turn = &brainTurn{id: baton.NewID("trn_"), actor: c.actor, calls: []*brainCall{c}, accepted: make(chan struct{})}
	bs.actor = c.actor
}

// answer takes the owner's message to a paused turn: tool_result blocks
// for every use it was shown (the rest of the message joins the turn),
// or, without any tool_result, plain input that gives those uses up.
func (c *brainCall) answer(t *brainTurn) error {
	bs, ok := blocks(c.msg.Content)
	var results []baton.Block
	var extras []json.RawMessage
	for _, b := range bs {
		if b.Type == baton.BlockToolResult {
			results = append(results, b)
		} else {
			extras = append(extras, b.Raw)
		}
	}
	if !ok || len(results) == 0 { // voluntary: give up what was shown
		c.mode, c.drop = modeResume, t.takeShown()
		return nil
	}
	if c.msg.Role != "user" {
		return baton.Errorf(baton.ECodeMergeInvalid, "tool result merge invalid: paused tool continuation must have role \"user\", got %q", c.msg.Role)
	}
	shown := map[string]bool{}
	for _, u := range t.uses {
		if u.shown {
			shown[u.ID] = true
		}
	}
	got := map[string]bool{}
	for _, r := range results {
		switch {
		case got[r.ToolUseID]:
			return baton.Errorf(baton.ECodeMergeInvalid, "tool result merge invalid: client returned a duplicate tool_result for id %q", r.ToolUseID)
		case !shown[r.ToolUseID]:
			return baton.Errorf(baton.ECodeMergeInvalid, "tool result merge invalid: tool_result id %q is not in the paused assistant turn", r.ToolUseID)
		}
		got[r.ToolUseID] = true
	}
	for id := range shown {
		if !got[id] {
			return baton.Errorf(baton.ECodeMergeInvalid, "tool result merge invalid: no tool_result for tool_use id %q", id)
		}
	}
	c.mode = modeResume
	for _, r := range results {
		c.reply = append(c.reply, r.Raw)
	}
	c.input = nil
	if len(extras) > 0 {
		c.input = mustJSON(extras)
	}
	t.takeShown()
	return nil
}

// takeShown removes the uses shown to the owner and returns them; the
// turn stays paused only for uses not shown yet.
func (t *brainTurn) takeShown() []toolUse {
	var out []toolUse
	rest := t.uses[:0]
	for _, u := range t.uses {
		if u.shown {
			out = append(out, u.toolUse)
		} else {
			rest = append(rest, u)
		}
	}
	t.uses = rest
	t.paused = len(rest) > 0
	return out
}

// giveUp removes every waiting use and returns them.
func (t *brainTurn) giveUp() []toolUse {
	out := make([]toolUse, len(t.uses))
	for i, u := range t.uses {
		out[i] = u.toolUse
	}
	t.uses, t.paused = nil, false
	return out
}

// TurnActive implements baton.BrainTurns: the turn is the session's brain
// turn, starting, running or paused.
func (e *Engine) TurnActive(_ context.Context, sessionID, turnID string) (bool, error) {
	bs := e.brains.get(sessionID)
	if bs == nil {
		return false, nil
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	return bs.turn != nil && bs.turn.id == turnID, nil
}

// TurnActor returns the acting client of the session's active brain turn
// turnID (its model calls and tool calls are attributed to it).
func (e *Engine) TurnActor(sessionID, turnID string) (string, bool) {
	bs := e.brains.get(sessionID)
	if bs == nil {
		return "", false
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if bs.turn == nil || bs.turn.id != turnID {
		return "", false
	}
	return bs.turn.actor, true
}

func (bs *brainSession) stopTimerLocked() {
	if bs.timer != nil {
		bs.timer.Stop()
		bs.timer = nil
	}
}

// detach removes c from the turn it is attached to.
func (bs *brainSession) detach(c *brainCall) {
	bs.mu.Lock()
	defer bs.mu.Unlock()
	if t := bs.turn; t != nil {
		t.remove(c)
	}
}

func (t *brainTurn) has(c *brainCall) bool {
	for _, x := range t.calls {
		if x == c {
			return true
		}
	}
	return false
}

func (t *brainTurn) remove(c *brainCall) {
	for i, x := range t.calls {
		if x == c {
			t.calls = append(t.calls[:i:i], t.calls[i+1:]...)
			return
		}
	}
}

// finish publishes c's result once.
func (c *brainCall) finish(r *baton.TurnResult) {
	c.once.Do(func() {
		c.result = r
		c.markStarted() // a queued call that never ran
		close(c.done)
	})
}

// markStarted closes started once.
func (c *brainCall) markStarted() { c.startOnce.Do(func() { close(c.started) }) }

// errCallDone stops a call that ended before it ran.
var errCallDone = errors.New("brain call already ended")

func (c *brainCall) isDone() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// text is c's result with a one-text-block message.
func (c *brainCall) text(s string) *baton.TurnResult {
	return &baton.TurnResult{Message: baton.Message{Role: "assistant", Content: textContent(s)}, Events: c.events}
}

// message is c's result with the agent messages it saw.
func (c *brainCall) message() *baton.TurnResult {
	content := c.content
	if content == nil {
		content = []json.RawMessage{}
	}
	return &baton.TurnResult{Message: baton.Message{Role: "assistant", Content: mustJSON(content)}, Events: c.events}
}

// blocksOf returns content as a block array: a string becomes one text
// block (none when empty); anything else but an array is a text block of
// its JSON.
func blocksOf(content json.RawMessage) json.RawMessage {
	if _, ok := blocks(content); ok {
		return content
	}
	var s string
	if json.Unmarshal(content, &s) != nil {
		s = string(content)
	}
	if s == "" {
		return json.RawMessage(`[]`)
	}
	return textContent(s)
}

// brainError words a failure to reach the brain for the wire (-32000);
// the session stays open.
func brainError(machine string, err error) error {
	if errors.Is(err, context.Canceled) {
		return baton.Errorf(baton.ECodeSessionFailed, "the server is shutting down")
	}
	detail := err.Error()
	var be *baton.Error
	if errors.As(err, &be) {
		detail = strings.TrimPrefix(detail, be.Code+": ")
	}
	return baton.Errorf(baton.ECodeSessionFailed, "the session's brain (machine %s) is unavailable: %s", machine, detail)
}

// brainLost words the end of a turn whose executor went away.
func brainLost(err error) error {
	return baton.Errorf(baton.ECodeSessionFailed, "the agent executor lost the turn: %s", strings.TrimPrefix(fmt.Sprint(err), baton.ECodeUnavailable+": "))
}
