package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/peer"
	"github.com/baton-engine/baton/executor/proto"
)

// The brain side of the hub (baton.Brains): sessions whose turns run on an
// agent executor of their machine. An agent session is opened by its first
// turn.start (no session.assign) on the machine's least loaded agent
// executor and stays with that executor: across reconnects that resume it,
// for the resume window while it is away, until session.close. Durable
// agent events are deduplicated by event_id and taken in sequence order;
// requests to the executor that must arrive (interaction.response,
// agent.custom_tool_result, turn.cancel, session.close) are held and
// re-sent, on every new connection, until the executor answers them. A
// held turn.cancel goes out before any new turn.start; custom tool
// results not delivered yet are dropped when their turn ends.

// Errors of the brain side; test them with errors.Is.
var (
	ErrTurnRunning    = &baton.Error{Code: baton.ECodeConflict, Message: "a turn is running on the agent session"}
	ErrTurnNotRunning = &baton.Error{Code: baton.ECodeConflict, Message: "the executor does not run this turn"}
	ErrNoAgentSession = &baton.Error{Code: baton.ECodeNotFound, Message: "no agent session"}
	ErrNoInteraction  = &baton.Error{Code: baton.ECodeNotFound, Message: "no such interaction"}
	ErrAnswered       = &baton.Error{Code: baton.ECodeConflict, Message: "the interaction is no longer open"}
	ErrAgentClosing   = &baton.Error{Code: baton.ECodeConflict, Message: "the agent session is closing"}
	ErrTurnOver       = &baton.Error{Code: baton.ECodeConflict, Message: "the turn is over"}
	ErrNoCustomTools  = &baton.Error{Code: baton.ECodeUnavailable, Message: "the executor takes no custom tool results"}
)

var _ baton.Brains = (*Hub)(nil)

// agents is the hub's brain state, guarded by Hub.mu; its maps are made
// on first use.
type agents struct {
	sink     baton.AgentSink
	sessions map[string]*agentSession // by session id
	refs     map[string]string        // last executor_session_ref, by session id
	byKey    map[string]*interaction  // by ixKey
	byID     map[string]*interaction  // by platform interaction id
	early    map[string][]*delivery   // held for a session not taken back yet (the hub restarted)
}

func (g *agents) init() {
	if g.sessions == nil {
		g.sessions = map[string]*agentSession{}
		g.refs = map[string]string{}
		g.byKey = map[string]*interaction{}
		g.byID = map[string]*interaction{}
		g.early = map[string][]*delivery{}
	}
}

// agentSession is one brain session on one executor. Fields are guarded
// by Hub.mu, except deliver.
type agentSession struct {
	id        string
	execID    string
	machineID string
	epochs    []int64           // every epoch given, oldest first; the last is current
	turns     map[string]bool   // turn ids started
	running   string            // the running turn as far as events tell; "" when idle
	lastIdle  string            // the last turn whose session.status_idle came
	acked     int64             // highest sequence taken
	seen      seen              // event ids taken
	custom    map[string]bool   // tool_use_ids whose result is held or delivered
	useTurn   map[string]string // turn of each agent.custom_tool_use, by tool_use_id; "" once the turn is over
	out       []*delivery       // requests held until the executor answers
	closing   bool              // CloseAgent was called
	ended     bool
	lost      baton.Timer // the resume window while its executor is away
	lostGen   int
	back      *conn         // the connection that last resumed it, once its register was answered
	moved     chan struct{} // closed when it resumes or ends; nil until waited on

	deliver sync.Mutex // one event delivery at a time, across connections
}

func (a *agentSession) epoch() int64 { return a.epochs[len(a.epochs)-1] }

// movedLocked returns a channel closed once a resumes on a new connection
// or ends; Hub.mu is held.
func (a *agentSession) movedLocked() <-chan struct{} {
	if a.moved == nil {
		a.moved = make(chan struct{})
	}
	return a.moved
}

// wakeLocked closes a's moved channel; Hub.mu is held.
func (a *agentSession) wakeLocked() {
	if a.moved != nil {
		close(a.moved)
		a.moved = nil
	}
}

// resumedLocked notes that c's register, which resumed a, was answered:
// a turn.start lost with the old connection may go out again on c.
func (a *agentSession) resumedLocked(c *conn) {
	a.back = c
	a.wakeLocked()
}

// delivery is a harness → executor request re-sent until answered.
type delivery struct {
	key      string // one pending delivery per key
	method   string
	params   any
	inflight bool
	turn     string                    // the turn an agent.custom_tool_result belongs to, when known
	answered func(res json.RawMessage) // runs under Hub.mu once answered; may be nil
	after    func()                    // runs under Hub.mu once answered, even with an error; may be nil
	done     chan struct{}             // closed once it is no longer held; may be nil
}

// over closes d.done, once; Hub.mu is held.
func (d *delivery) over() {
	if d.done == nil {
		return
	}
	select {
	case <-d.done:
	default:
		close(d.done)
	}
}

// dropOutLocked forgets every held request of a.
func dropOutLocked(a *agentSession) {
	for _, d := range a.out {
		d.over()
	}
	a.out = nil
}

// heldCancelLocked returns a's held turn.cancel, if any.
func heldCancelLocked(a *agentSession) *delivery {
	for _, d := range a.out {
		if d.method == proto.MethodTurnCancel {
			return d
		}
	}
	return nil
}

// Attach sets the sink of agent reports (the engine).
func (h *Hub) Attach(sink baton.AgentSink) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ag.init()
	h.ag.sink = sink
}

// StartTurn implements baton.Brains.
func (h *Hub) StartTurn(ctx context.Context, t *baton.BrainTurn) error {
	if t.SessionID == "" || t.TurnID == "" || t.MachineID == "" {
		return baton.Errorf(baton.ECodeInvalidParams, "turn.start: missing session, turn or machine id")
	}
	h.mu.Lock()
	h.ag.init()
	if h.closed {
		h.mu.Unlock()
		return ErrClosed
	}
	if a := h.ag.sessions[t.SessionID]; a != nil {
		if a.closing {
			h.mu.Unlock()
			return ErrAgentClosing
		}
		rec, c := h.agentConnLocked(a)
		if c == nil {
			h.mu.Unlock()
			return fmt.Errorf("%w (executor %s)", ErrDetached, a.execID)
		}
		if d := heldCancelLocked(a); d != nil { // the cancelled turn goes first
			h.mu.Unlock()
			select {
			case <-d.done:
			case <-ctx.Done():
				return ctx.Err()
			}
			return h.StartTurn(ctx, t)
		}
		epoch := a.epoch()
		h.mu.Unlock()
		return h.sendStart(ctx, a, rec, c, t, epoch)
	}
	if h.draining {
		h.mu.Unlock()
		return ErrDraining
	}
	cands := h.agentCandidatesLocked(t.MachineID)
	h.mu.Unlock()
	if len(cands) == 0 {
		return fmt.Errorf("%w: no agent executor of machine %s is connected with room for a session", ErrNoExecutor, t.MachineID)
	}
	var last error
	for _, rec := range cands {
		h.mu.Lock()
		if h.ag.sessions[t.SessionID] != nil {
			h.mu.Unlock()
			return fmt.Errorf("%w: the agent session opened meanwhile", ErrTurnRunning)
		}
		c := rec.conn
		if h.closed || c == nil || c.closing {
			h.mu.Unlock()
			continue
		}
		h.epoch++
		a := &agentSession{id: t.SessionID, execID: rec.id, machineID: rec.machineID, epochs: []int64{h.epoch},
			turns: map[string]bool{}, custom: map[string]bool{}, useTurn: map[string]string{}}
		h.ag.sessions[t.SessionID] = a  // before turn.start: its events may come before its answer
		delete(h.ag.early, t.SessionID) // held for an agent session that never came back
		h.mu.Unlock()
		last = h.sendStart(ctx, a, rec, c, t, a.epoch())
		if last == nil {
			return nil
		}
		h.mu.Lock()
		if h.ag.sessions[t.SessionID] == a && a.acked == 0 {
			h.endAgentLocked(a)
		}
		h.mu.Unlock()
		if ctx.Err() != nil || !(errors.Is(last, ErrOverCapacity) || errors.Is(last, peer.ErrClosed)) {
			break
		}
	}
	return last
}

// sendStart sends turn.start for t on c at epoch.
func (h *Hub) sendStart(ctx context.Context, a *agentSession, rec *execRec, c *conn, t *baton.BrainTurn, epoch int64) error {
	h.mu.Lock()
	creds := t.Credentials
	if creds == nil {
		creds = h.creds
	}
	h.mu.Unlock()
	var md baton.TurnMetadata
	if creds != nil {
		var err error
		if md, err = creds.Issue(ctx, t.SessionID, t.TurnID, t.MachineID, epoch); err != nil {
			return fmt.Errorf("turn credentials: %w", err)
		}
	}
	ws := h.workspaceOf(rec, t.SessionID, epoch)
	h.mu.Lock()
	p := proto.TurnStartParams{
		SessionID: t.SessionID, TurnID: t.TurnID, Input: t.Input, ExecutorSessionRef: h.ag.refs[t.SessionID],
		Metadata: proto.TurnMetadata{
			ModelBaseURL: md.ModelBaseURL, ModelToken: md.ModelToken, ModelTokenExpiresAt: md.ModelTokenExpiresAt,
			ToolsMCPURL: md.ToolsMCPURL, ToolsMCPToken: md.ToolsMCPToken, Epoch: epoch, WorkspacePath: ws,
		},
	}
	if ag := rec.caps.Agent; ag != nil && ag.CustomTools {
		for _, d := range t.CustomTools {
			p.Metadata.CustomTools = append(p.Metadata.CustomTools, proto.ToolDef(d))
		}
	}
	h.mu.Unlock()
	if len(p.Input) == 0 {
		p.Input = json.RawMessage(`[]`)
	}
	cctx, cancel := context.WithTimeout(ctx, h.callTimeout)
	defer cancel()
	var res proto.TurnStartResult
	err := c.peer.Call(cctx, proto.MethodTurnStart, p, &res)
	var pe *proto.Error
	switch {
	case errors.As(err, &pe) && pe.Code == proto.CodeConflict:
		return fmt.Errorf("%w: %s", ErrTurnRunning, pe.Message)
	case errors.As(err, &pe) && pe.Code == proto.CodeOverCapacity:
		return fmt.Errorf("%w: executor %s: %s", ErrOverCapacity, rec.id, pe.Message)
	case errors.As(err, &pe):
		return baton.Errorf(baton.ECodeUnavailable, "executor %s refused turn.start: %s", rec.id, pe.Message)
	case err != nil && ctx.Err() != nil:
		return ctx.Err()
	case err != nil:
		return h.startLost(ctx, a, c, t, fmt.Errorf("%w: turn.start on executor %s: %w", ErrDetached, rec.id, err))
	case !res.Accepted:
		return fmt.Errorf("%w: executor %s did not accept the turn", ErrOverCapacity, rec.id)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	a.turns[t.TurnID] = true
	if a.lastIdle != t.TurnID { // its end may come before turn.start's answer
		a.running = t.TurnID
	}
	if res.ExecutorSessionRef != "" {
		h.ag.refs[t.SessionID] = res.ExecutorSessionRef
	}
	h.flushLocked(a) // mounts the session's files after its first turn.start
	return nil
}

// startLost follows a turn.start whose connection c went before its
// answer. The executor may have taken the turn and run it, so the turn
// counts as running (its token refreshes are served) while the session
// waits for the executor to resume it; turn.start then goes again on the
// new connection, with the new epoch — the executor answers a turn_id it
// knows as it did the first time, and starts one it never got. When the
// session is lost instead (the resume window passed, or the executor came
// back without it) the turn did not start and err is returned.
func (h *Hub) startLost(ctx context.Context, a *agentSession, c *conn, t *baton.BrainTurn, err error) error {
	h.mu.Lock()
	if !a.ended && !a.closing {
		a.turns[t.TurnID] = true
		if a.lastIdle != t.TurnID {
			a.running = t.TurnID
		}
	}
	for {
		if h.closed || a.ended || a.closing {
			h.mu.Unlock()
			return err
		}
		if rec, cur := h.agentConnLocked(a); cur != nil && cur != c && a.back == cur {
			epoch := a.epoch()
			h.mu.Unlock()
			return h.sendStart(ctx, a, rec, cur, t, epoch)
		}
		moved := a.movedLocked()
		h.mu.Unlock()
		select {
		case <-moved:
		case <-ctx.Done():
			return ctx.Err()
		}
		h.mu.Lock()
	}
}

// agentCandidatesLocked lists the connected agent executors of a machine
// with room for one more agent session, least loaded first.
func (h *Hub) agentCandidatesLocked(machineID string) []*execRec {
	load := map[string]int{}
	for _, a := range h.ag.sessions {
		load[a.execID]++
	}
	var out []*execRec
	for _, r := range h.execs {
		ag := r.caps.Agent
		if r.scope != baton.ExecutorScopeMachine || r.machineID != machineID || ag == nil ||
			r.conn == nil || r.conn.closing || ag.MaxSessions > 0 && load[r.id] >= ag.MaxSessions {
			continue
		}
		out = append(out, r)
	}
	slices.SortFunc(out, func(x, y *execRec) int {
		if d := load[x.id] - load[y.id]; d != 0 {
			return d
		}
		return strings.Compare(x.id, y.id)
	})
	return out
}

// agentConnLocked returns the agent session's executor and its live
// connection (nil while it is away).
func (h *Hub) agentConnLocked(a *agentSession) (*execRec, *conn) {
	rec := h.execs[a.execID]
	if a.ended || rec == nil || rec.conn == nil || rec.conn.closing {
		return rec, nil
	}
	return rec, rec.conn
}

// agentRequest sends one request of an open agent session on its live
// connection.
func (h *Hub) agentRequest(ctx context.Context, sessionID, method string, params, result any) error {
	h.mu.Lock()
	a := h.ag.sessions[sessionID]
	if a == nil {
		h.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrNoAgentSession, sessionID)
	}
	_, c := h.agentConnLocked(a)
	h.mu.Unlock()
	if c == nil {
		return fmt.Errorf("%w (executor %s)", ErrDetached, a.execID)
	}
	ctx, cancel := context.WithTimeout(ctx, h.callTimeout)
	defer cancel()
	return c.peer.Call(ctx, method, params, result)
}

// TurnInput implements baton.Brains.
func (h *Hub) TurnInput(ctx context.Context, sessionID, turnID, inputID string, input json.RawMessage) error {
	var ack proto.Ack
	err := h.agentRequest(ctx, sessionID, proto.MethodTurnInput,
		proto.TurnInputParams{SessionID: sessionID, TurnID: turnID, InputID: inputID, Input: input}, &ack)
	var pe *proto.Error
	switch {
	case errors.As(err, &pe) && pe.Code == proto.CodeConflict:
		return fmt.Errorf("%w: %s", ErrTurnNotRunning, pe.Message)
	case errors.As(err, &pe):
		return baton.Errorf(baton.ECodeUnavailable, "the executor refused turn.input: %s", pe.Message)
	}
	return err
}

// CancelTurn implements baton.Brains. The turn's custom tool results not
// delivered yet are dropped. While the executor is away (or the request
// is lost with its connection) turn.cancel is held: it goes out when the
// executor resumes the session, before any new turn.start, and CancelTurn
// returns an error wrapping ErrDetached.
func (h *Hub) CancelTurn(ctx context.Context, sessionID, turnID string) (bool, error) {
	h.mu.Lock()
	h.ag.init()
	if a := h.ag.sessions[sessionID]; a != nil {
		h.turnOverLocked(a, turnID)
	}
	h.mu.Unlock()
	var res proto.TurnCancelResult
	params := proto.TurnCancelParams{SessionID: sessionID, TurnID: turnID}
	err := h.agentRequest(ctx, sessionID, proto.MethodTurnCancel, params, &res)
	var pe *proto.Error
	switch {
	case errors.Is(err, ErrNoAgentSession):
		return false, nil
	case errors.As(err, &pe):
		return false, baton.Errorf(baton.ECodeUnavailable, "the executor refused turn.cancel: %s", pe.Message)
	case err != nil: // it may not have arrived: held, as answers are
		h.mu.Lock()
		defer h.mu.Unlock()
		if a := h.ag.sessions[sessionID]; a != nil && !a.closing {
			h.holdLocked(a, &delivery{key: "cancel\x00" + turnID, method: proto.MethodTurnCancel, params: params, done: make(chan struct{})})
			return false, fmt.Errorf("turn.cancel held until the executor is back: %w", err)
		}
	}
	return res.Canceled, err
}

// turnOverLocked notes that a's turn ended or was cancelled: its custom
// tool results not delivered yet are dropped, and later ones refused.
func (h *Hub) turnOverLocked(a *agentSession, turnID string) {
	if turnID == "" {
		return
	}
	for id, tr := range a.useTurn {
		if tr == turnID {
			a.useTurn[id] = ""
		}
	}
	a.out = slices.DeleteFunc(a.out, func(d *delivery) bool {
		if d.method != proto.MethodCustomToolResult || d.turn != turnID {
			return false
		}
		d.over()
		return true
	})
}

// CloseAgent implements baton.Brains: session.close is held until the
// executor answers; the agent session ends with its session.ended (or at
// once when the executor does not know it).
func (h *Hub) CloseAgent(sessionID string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ag.init()
	delete(h.ag.refs, sessionID)
	delete(h.ag.early, sessionID)
	a := h.ag.sessions[sessionID]
	if a == nil || a.closing {
		h.dropInteractionsLocked(sessionID) // restored ones of a session never taken back
		return
	}
	a.closing = true
	h.dropInteractionsLocked(sessionID)
	dropOutLocked(a) // answers, results and cancels no longer matter
	h.holdLocked(a, h.unmountBeforeLocked(a, &delivery{key: "close", method: proto.MethodSessionClose, params: proto.SessionCloseParams{SessionID: sessionID},
		answered: func(res json.RawMessage) {
			var r proto.SessionCloseResult
			if json.Unmarshal(res, &r) == nil && !r.Closed {
				h.endAgentLocked(a)
			}
		}}))
}

// holdLocked queues d (unless one with its key is pending) and sends
// what the live connection can take.
func (h *Hub) holdLocked(a *agentSession, d *delivery) {
	if a.ended || slices.ContainsFunc(a.out, func(x *delivery) bool { return x.key == d.key }) {
		return
	}
	a.out = append(a.out, d)
	h.flushLocked(a)
}

// flushLocked sends every held request that is not in flight on the
// live connection, if there is one.
func (h *Hub) flushLocked(a *agentSession) {
	rec, c := h.agentConnLocked(a)
	if c == nil || h.mountGateLocked(a, rec, c) {
		return
	}
	for _, d := range a.out {
		if !d.inflight {
			d.inflight = true
			h.goWorkLocked(func() { h.send(a, c, d) })
		}
	}
}

// retryDelay is the pause before a held request is re-sent on a
// connection that stayed up but did not answer.
const retryDelay = time.Second

// send delivers d on c once. Any answer, an error object included, ends
// it; a lost connection leaves it held for the next one.
func (h *Hub) send(a *agentSession, c *conn, d *delivery) {
	ctx, cancel := context.WithTimeout(context.Background(), h.callTimeout)
	defer cancel()
	var res json.RawMessage
	err := c.peer.Call(ctx, d.method, d.params, &res)
	h.mu.Lock()
	defer h.mu.Unlock()
	d.inflight = false
	var pe *proto.Error
	if err != nil && !errors.As(err, &pe) {
		h.log.Debug("executor: held request not answered; kept", slog.String("session_id", a.id),
			slog.String("method", d.method), slog.Any("error", err))
		switch _, cur := h.agentConnLocked(a); {
		case h.closed:
		case cur != nil && cur != c: // the executor is back on a new connection already
			h.flushLocked(a)
		case cur == c: // no answer on a live connection: try again shortly
			h.clock.AfterFunc(retryDelay, func() {
				h.mu.Lock()
				defer h.mu.Unlock()
				h.flushLocked(a)
			})
		}
		return
	}
	if pe != nil {
		h.log.Warn("executor: held request refused", slog.String("session_id", a.id),
			slog.String("method", d.method), slog.Any("error", pe))
	}
	i := slices.Index(a.out, d)
	if i < 0 {
		return // dropped meanwhile
	}
	a.out = slices.Delete(a.out, i, i+1)
	d.over()
	if d.answered != nil && pe == nil {
		d.answered(res)
	}
	if d.after != nil {
		d.after()
	}
}

// endAgentLocked ends a once: it forgets the session, its held requests
// and its interactions.
func (h *Hub) endAgentLocked(a *agentSession) {
	if a.ended {
		return
	}
	a.ended = true
	a.wakeLocked()
	dropOutLocked(a)
	a.lostGen++
	h.fs.dropAgentLocked(a)
	if a.lost != nil {
		a.lost.Stop()
	}
	if h.ag.sessions[a.id] == a {
		delete(h.ag.sessions, a.id)
		h.dropInteractionsLocked(a.id)
	}
}

// lostLocked ends a and tells the sink (unless the engine closed it),
// outside the lock.
func (h *Hub) lostLocked(a *agentSession, err error) {
	h.endAgentLocked(a)
	sink := h.ag.sink
	if sink == nil || a.closing {
		return
	}
	h.goWorkLocked(func() { sink.AgentLost(a.id, err) })
}

// detachAgentsLocked starts the resume window of rec's agent sessions:
// its connection is gone. When the executor left for good
// (executor.close) they are lost at once.
func (h *Hub) detachAgentsLocked(rec *execRec, left bool) {
	for _, a := range h.ag.sessions {
		if a.execID != rec.id || a.ended {
			continue
		}
		if left && !h.closed {
			h.lostLocked(a, fmt.Errorf("%w (executor %s)", ErrExecutorClosed, a.execID))
			continue
		}
		a.lostGen++
		gen := a.lostGen
		if a.lost != nil {
			a.lost.Stop()
		}
		a.lost = h.clock.AfterFunc(h.window, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.closed || a.ended || a.lostGen != gen {
				return
			}
			if _, c := h.agentConnLocked(a); c != nil {
				return
			}
			h.lostLocked(a, fmt.Errorf("%w (executor %s, %s)", ErrResumeWindow, a.execID, h.window))
		})
	}
}

// resumeAgentsLocked reattaches rec's agent sessions that the register's
// resume lists, each under a new epoch; the executor's others are lost.
// A listed session this hub does not know (it restarted) with an
// acknowledged sequence is taken back too. It returns the sessions whose
// held requests are to be re-sent once the register is answered.
func (h *Hub) resumeAgentsLocked(rec *execRec, r *proto.Resume) []*agentSession {
	h.ag.init()
	held := map[string]proto.SessionEpoch{}
	if r != nil {
		for _, s := range r.ActiveSessions {
			held[s.SessionID] = s
		}
	}
	var out []*agentSession
	for _, a := range h.ag.sessions {
		if a.execID != rec.id || a.ended {
			continue
		}
		a.lostGen++
		if a.lost != nil {
			a.lost.Stop()
		}
		if _, ok := held[a.id]; !ok {
			h.lostLocked(a, fmt.Errorf("%w (executor %s)", ErrSessionLost, rec.id))
			continue
		}
		h.epoch++
		a.epochs = append(a.epochs, h.epoch)
		out = append(out, a)
	}
	if rec.scope == baton.ExecutorScopeMachine && rec.caps.Agent != nil {
		for _, s := range held {
			if s.AckedSequence == nil || h.ag.sessions[s.SessionID] != nil || rec.bindings[s.SessionID] != nil {
				continue
			}
			h.epoch = max(h.epoch, s.Epoch) + 1
			a := &agentSession{id: s.SessionID, execID: rec.id, machineID: rec.machineID, epochs: []int64{h.epoch},
				acked: *s.AckedSequence, turns: map[string]bool{}, custom: map[string]bool{}, useTurn: map[string]string{}}
			h.ag.sessions[a.id] = a
			h.takeEarlyLocked(a)
			out = append(out, a)
		}
	}
	return out
}
