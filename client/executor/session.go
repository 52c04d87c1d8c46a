package executor

import (
	"context"

	"github.com/baton-engine/baton/executor/proto"
)

// hand is a session assigned with session.assign.
type hand struct {
	epoch    int64
	oneShot  bool // metadata.source other than "harness": ends after its tool call
	stopping bool
}

func (e *Executor) onAssign(r *request) (any, *RPCError) {
	var p proto.AssignParams
	if rerr := decodeParams(r.params, &p); rerr != nil {
		return nil, rerr
	}
	if rerr := require("session_id", p.SessionID); rerr != nil {
		return nil, rerr
	}
	e.mu.Lock()
	h := e.hands[p.SessionID]
	switch {
	case h != nil && h.stopping:
		e.mu.Unlock()
		return nil, rpcErr(CodeConflict, "session is stopping", map[string]string{"reason": "stopping"})
	case h != nil: // a repeat, or a new binding epoch after a resume
		h.epoch = p.Epoch
	case e.drainingLocked(r.c):
		e.mu.Unlock()
		return nil, errDraining()
	default:
		if limit := e.sessionLimit(); limit > 0 && len(e.hands) >= limit {
			e.mu.Unlock()
			return nil, rpcErr(CodeOverCapacity, "over capacity", map[string]any{"reason": "max_sessions", "max_sessions": limit})
		}
		e.hands[p.SessionID] = &hand{epoch: p.Epoch, oneShot: p.Metadata.Source != "harness"}
	}
	e.mu.Unlock()
	r.reply(proto.Accepted{Accepted: true}, nil)
	c := r.c
	e.goWork(func() {
		ctx, cancel := context.WithTimeout(c.ctx, e.cfg.WriteTimeout)
		defer cancel()
		if _, err := c.call(ctx, proto.MethodSessionReady, proto.SessionEpoch{SessionID: p.SessionID, Epoch: p.Epoch}); err != nil {
			e.log.Warn("executor: session.ready not acknowledged", "session", p.SessionID, "err", err)
		}
	})
	return later{}, nil
}

// sessionLimit is the max_sessions for assigned sessions (0: none).
func (e *Executor) sessionLimit() int {
	if p := e.cfg.Capabilities.Process; p != nil {
		return p.MaxSessions
	}
	return 0
}

// oneShotDoneLocked removes and returns a one-shot session whose last
// running call just finished; nil otherwise.
func (e *Executor) oneShotDoneLocked(session string) *hand {
	h := e.hands[session]
	if h == nil || !h.oneShot || h.stopping {
		return nil
	}
	for _, rc := range e.calls {
		if rc.session == session {
			return nil
		}
	}
	delete(e.hands, session)
	return h
}

func (e *Executor) onStop(r *request) (any, *RPCError) {
	var p proto.SessionStopParams
	if rerr := decodeParams(r.params, &p); rerr != nil {
		return nil, rerr
	}
	if rerr := require("session_id", p.SessionID); rerr != nil {
		return nil, rerr
	}
	type stopped struct {
		Stopped bool `json:"stopped"`
	}
	e.mu.Lock()
	h := e.hands[p.SessionID]
	var calls []*runningCall
	for _, rc := range e.calls {
		if rc.session == p.SessionID {
			rc.canceled = true
			rc.cancel()
			calls = append(calls, rc)
		}
	}
	_, isAgent := e.agents[p.SessionID]
	switch {
	case h != nil && h.stopping:
		e.mu.Unlock()
		return stopped{true}, nil
	case h == nil && len(calls) == 0 && isAgent:
		e.mu.Unlock()
		e.closeAgentSession(p.SessionID)
		return stopped{true}, nil
	case h == nil && len(calls) == 0:
		e.mu.Unlock()
		return stopped{false}, nil
	}
	var epoch int64
	if h != nil {
		h.stopping = true
		epoch = h.epoch
	}
	e.startLocked()
	e.mu.Unlock()
	e.goCounted(func() {
		for _, rc := range calls {
			select {
			case <-rc.done:
			case <-e.life.Done():
				return
			}
		}
		e.mu.Lock()
		if e.hands[p.SessionID] == h {
			delete(e.hands, p.SessionID)
		}
		e.mu.Unlock()
		e.pushEnded(p.SessionID, epoch, "stopped", false)
	})
	return stopped{true}, nil
}

// pushEnded holds session.ended until the harness acknowledges it. An
// agent session's is re-stamped when a resume moves it to a new epoch.
func (e *Executor) pushEnded(session string, epoch int64, reason string, agent bool) {
	p := proto.SessionEndedParams{SessionID: session, Epoch: epoch, Reason: reason}
	var reepoch func(int64) any
	if agent {
		reepoch = func(ep int64) any {
			q := p
			q.Epoch = ep
			return q
		}
	}
	if err := e.pushStamped(proto.MethodSessionEnded, session, p, reepoch, nil); err != nil {
		e.log.Error("executor: session.ended", "session", session, "err", err)
	}
}

func (e *Executor) onDrain(r *request) (any, *RPCError) {
	var p proto.Reason
	if rerr := decodeParams(r.params, &p); rerr != nil {
		return nil, rerr
	}
	if r.c.drain() {
		e.log.Info("executor: draining", "reason", p.Reason)
	}
	return struct {
		ActiveSessions []string `json:"active_sessions"`
	}{e.heartbeatParams().ActiveSessions}, nil
}

// Session statuses for SessionStatus.
const (
	StatusIdle    = "idle"
	StatusRunning = "running"
	StatusError   = "error"
)

// SessionStatus reports a session's status with a session.status
// notification; detail is free-form context such as "tool_running" or
// "mcp_unavailable". It is lossy: while disconnected it returns
// ErrDisconnected.
func (e *Executor) SessionStatus(sessionID, status, detail string) error {
	return e.notifyLive(proto.MethodSessionStatus, proto.SessionStatusParams{SessionID: sessionID, Status: status, Detail: detail})
}
