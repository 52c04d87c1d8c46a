package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/baton-engine/baton/executor/proto"
)

// Agent is a brain: it runs whole agent turns on this machine. The
// executor calls Open before a session's first turn, Run once per
// turn.start on a goroutine of its own, and Close after session.close.
type Agent interface {
	// Open starts or resumes the local conversation of a session. ref is
	// the executor_session_ref of an earlier turn ("" for a new one); the
	// ref returned is reported to the harness for later resumes.
	Open(ctx context.Context, sessionID, ref string) (string, error)
	// Run runs one turn to its end, reporting through t. Its ctx ends on
	// turn.cancel, session.close, session.stop or Close. Returning nil
	// completes the turn; an error fails it (reported as agent.error);
	// either after a cancellation cancels it. The executor emits
	// session.status_running before Run and session.status_idle after.
	Run(ctx context.Context, t *Turn) error
	// Close releases a session's local conversation, once every event of
	// the session has been acknowledged.
	Close(ctx context.Context, sessionID string) error
}

// agentSession is the executor's side of an agent session.
type agentSession struct {
	id      string
	epoch   int64           // under e.mu
	ref     string          // set before opened closes
	openErr error           // set before opened closes
	opened  chan struct{}   // closed once Agent.Open returned
	turns   map[string]bool // every turn_id started here
	running *Turn           // takes turn.input; nil once Run returned
	last    *Turn           // the latest turn; its done says its events are held
	closing bool
	acked   int64 // highest acknowledged sequence, under e.mu
	custom  map[string]chan CustomToolResult

	emit sync.Mutex // orders sequence numbers with their place in the outbox
	seq  int64      // last sequence handed out, under emit
}

func (e *Executor) onTurnStart(r *request) (any, *RPCError) {
	if e.cfg.Agent == nil {
		return nil, capabilityMissing("agent")
	}
	var p proto.TurnStartParams
	if rerr := decodeParams(r.params, &p); rerr != nil {
		return nil, rerr
	}
	if rerr := require("session_id", p.SessionID, "turn_id", p.TurnID); rerr != nil {
		return nil, rerr
	}
	e.mu.Lock()
	s := e.agents[p.SessionID]
	switch {
	case s != nil && s.closing:
		e.mu.Unlock()
		return nil, rpcErr(CodeConflict, "session is closing", map[string]string{"reason": "closing"})
	case s != nil && s.turns[p.TurnID]: // idempotent by turn_id
		e.mu.Unlock()
		e.goWork(func() { e.replyStarted(r, s) })
		return later{}, nil
	case s != nil && s.running != nil:
		running := s.running.ID
		e.mu.Unlock()
		return nil, rpcErr(CodeConflict, "a turn is running; use turn.input",
			map[string]string{"reason": "turn_running", "turn_id": running})
	}
	first := s == nil
	if first {
		if rerr := e.agentRoomLocked(r.c); rerr != nil {
			e.mu.Unlock()
			return nil, rerr
		}
		s = &agentSession{id: p.SessionID, opened: make(chan struct{}), turns: map[string]bool{},
			custom: map[string]chan CustomToolResult{}}
		e.agents[p.SessionID] = s
	}
	if p.Metadata.Epoch != 0 {
		s.epoch = p.Metadata.Epoch
	}
	s.turns[p.TurnID] = true
	md := turnMetadata(p.Metadata)
	if ws := md.WorkspacePath; ws != "" {
		if e.files == nil || !strings.HasPrefix(ws, "/") {
			md.WorkspacePath = ""
		} else {
			md.WorkspacePath = e.files.localDir(ws)
		}
	}
	ctx, cancel := context.WithCancel(e.life)
	t := &Turn{SessionID: p.SessionID, ID: p.TurnID, Input: p.Input, Metadata: md,
		e: e, s: s, ctx: ctx, cancel: cancel, done: make(chan struct{}),
		inputIDs: map[string]bool{}, ready: make(chan struct{}, 1)}
	prev := s.last
	s.running, s.last = t, t
	e.startLocked()
	e.mu.Unlock()
	if !e.goCounted(func() { e.runTurn(r, t, first, p.ExecutorSessionRef, prev) }) {
		cancel()
	}
	return later{}, nil
}

// agentRoomLocked refuses a new agent session while draining or at
// max_sessions.
func (e *Executor) agentRoomLocked(c *conn) *RPCError {
	if e.drainingLocked(c) {
		return errDraining()
	}
	if a := e.cfg.Capabilities.Agent; a != nil && a.MaxSessions > 0 && len(e.agents) >= a.MaxSessions {
		return rpcErr(CodeOverCapacity, "over capacity", map[string]any{"reason": "max_sessions", "max_sessions": a.MaxSessions})
	}
	return nil
}

// replyStarted answers a repeated turn.start once the session is open.
func (e *Executor) replyStarted(r *request, s *agentSession) {
	select {
	case <-s.opened:
	case <-e.life.Done():
		return
	}
	if s.openErr != nil {
		r.reply(nil, e.openRefused(r.c, s.openErr))
		return
	}
	r.reply(proto.TurnStartResult{Accepted: true, ExecutorSessionRef: s.ref}, nil)
}

// openRefused answers a turn.start whose session did not open: -32009
// draining while the executor drains, else -32603.
func (e *Executor) openRefused(c *conn, err error) *RPCError {
	e.mu.Lock()
	draining := e.drainingLocked(c)
	e.mu.Unlock()
	if draining {
		return errDraining()
	}
	return rpcErr(CodeInternal, "open session: "+err.Error(), nil)
}

// runTurn opens the session if needed, waits for the previous turn's
// end (prev, nil for none), accepts the turn, runs it and ends it with
// session.status_idle.
func (e *Executor) runTurn(r *request, t *Turn, first bool, ref string, prev *Turn) {
	s := t.s
	defer func() {
		t.cancel()
		e.letGo(t)
		close(t.done)
	}()
	if first {
		s.ref, s.openErr = e.openSession(s.id, ref)
		if s.openErr != nil {
			e.mu.Lock()
			if e.agents[s.id] == s {
				delete(e.agents, s.id) // a later turn.start tries afresh
			}
			e.mu.Unlock()
		}
		close(s.opened)
	} else {
		select {
		case <-s.opened:
		case <-e.life.Done():
			return
		}
	}
	if prev != nil { // its status_idle goes before this turn's events
		select {
		case <-prev.done:
		case <-e.life.Done():
			return
		}
	}
	if s.openErr != nil {
		r.reply(nil, e.openRefused(r.c, s.openErr))
		return
	}
	r.reply(proto.TurnStartResult{Accepted: true, ExecutorSessionRef: s.ref}, nil)
	e.emitLogged(t, mustEvent(EventStatusRunning, nil))
	err := safeRun(t.ctx, e.cfg.Agent, t)
	outcome := OutcomeCompleted
	switch {
	case t.wasCanceled():
		outcome = OutcomeCanceled
	case err != nil:
		outcome = OutcomeFailed
		e.emitLogged(t, ErrorEvent(err.Error()))
	}
	// Let go first: a harness that has seen status_idle may start the
	// next turn at once.
	e.letGo(t)
	e.emitLogged(t, mustEvent(EventStatusIdle, map[string]string{"turn_outcome": outcome}))
}

// letGo ends t as its session's running turn: turn.input and turn.cancel
// no longer reach it and turn.start may start the next one.
func (e *Executor) letGo(t *Turn) {
	e.mu.Lock()
	if t.s.running == t {
		t.s.running = nil
	}
	e.mu.Unlock()
}

func (e *Executor) openSession(id, ref string) (out string, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("agent Open panicked: %v", v)
		}
	}()
	return e.cfg.Agent.Open(e.life, id, ref)
}

func safeRun(ctx context.Context, a Agent, t *Turn) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("agent Run panicked: %v", v)
		}
	}()
	return a.Run(ctx, t)
}

func (e *Executor) emitLogged(t *Turn, ev AgentEvent) {
	if _, err := t.Emit(ev); err != nil {
		lvl := slog.LevelWarn
		if errors.Is(err, ErrClosed) {
			lvl = slog.LevelDebug
		}
		e.log.Log(context.Background(), lvl, "executor: event not held", "session", t.SessionID, "type", ev.Type, "err", err)
	}
}

func (e *Executor) onTurnInput(r *request) (any, *RPCError) {
	if e.cfg.Agent == nil {
		return nil, capabilityMissing("agent")
	}
	var p proto.TurnInputParams
	if rerr := decodeParams(r.params, &p); rerr != nil {
		return nil, rerr
	}
	if rerr := require("session_id", p.SessionID, "turn_id", p.TurnID, "input_id", p.InputID); rerr != nil {
		return nil, rerr
	}
	e.mu.Lock()
	var t *Turn
	if s := e.agents[p.SessionID]; s != nil && s.running != nil && s.running.ID == p.TurnID && !s.running.wasCanceledLocked() {
		t = s.running
	}
	e.mu.Unlock()
	if t == nil {
		return nil, rpcErr(CodeConflict, "turn is not running", map[string]string{"reason": "turn_not_running"})
	}
	t.deliver(Input{ID: p.InputID, Content: p.Input})
	return proto.Ack{OK: true}, nil
}

func (e *Executor) onTurnCancel(r *request) (any, *RPCError) {
	if e.cfg.Agent == nil {
		return nil, capabilityMissing("agent")
	}
	var p proto.TurnCancelParams
	if rerr := decodeParams(r.params, &p); rerr != nil {
		return nil, rerr
	}
	e.mu.Lock()
	var ok bool
	if s := e.agents[p.SessionID]; s != nil && s.running != nil && s.running.ID == p.TurnID && !s.running.canceled {
		s.running.canceled = true
		s.running.cancel()
		ok = true
	}
	e.mu.Unlock()
	return proto.TurnCancelResult{Canceled: ok}, nil
}

func (e *Executor) onSessionClose(r *request) (any, *RPCError) {
	if e.cfg.Agent == nil {
		return nil, capabilityMissing("agent")
	}
	var p proto.SessionCloseParams
	if rerr := decodeParams(r.params, &p); rerr != nil {
		return nil, rerr
	}
	return proto.SessionCloseResult{Closed: e.closeAgentSession(p.SessionID)}, nil
}

// closeAgentSession cancels the running turn, waits until the session's
// events are acknowledged, closes the local conversation and sends
// session.ended. It reports false for an unknown session.
func (e *Executor) closeAgentSession(id string) bool {
	e.mu.Lock()
	s := e.agents[id]
	if s == nil {
		e.mu.Unlock()
		return false
	}
	if s.closing {
		e.mu.Unlock()
		return true
	}
	s.closing = true
	if t := s.running; t != nil {
		t.canceled = true
		t.cancel()
	}
	last := s.last
	e.startLocked()
	e.mu.Unlock()
	e.goCounted(func() {
		if last != nil {
			select {
			case <-last.done:
			case <-e.life.Done():
				return
			}
		}
		select {
		case <-s.opened:
		case <-e.life.Done():
			return
		}
		if err := e.out.waitSession(e.life, id); err != nil {
			return
		}
		if s.openErr == nil {
			if err := e.cfg.Agent.Close(e.life, id); err != nil {
				e.log.Warn("executor: agent Close", "session", id, "err", err)
			}
		}
		e.mu.Lock()
		if e.agents[id] == s {
			delete(e.agents, id)
		}
		epoch := s.epoch
		e.mu.Unlock()
		e.pushEnded(id, epoch, "closed", true)
	})
	return true
}
