package executor

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/coder/websocket"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/peer"
	"github.com/baton-engine/baton/executor/proto"
)

// conn is one executor WebSocket connection. Fields after peer are
// guarded by Hub.mu.
type conn struct {
	hub      *Hub
	id       string
	protocol string // the negotiated subprotocol
	peer     *peer.Peer

	grant        *baton.ExecutorGrant // the current token's; refresh replaces it
	exec         *execRec             // nil until registered
	spoke        bool                 // a first message came
	closing      bool
	left         bool                 // the executor sent executor.close: it is gone for good
	closeCode    websocket.StatusCode // why it is closing, once closing
	closeReason  string
	running      int // running tools, per the last heartbeat
	lease        baton.Timer
	leaseGen     int
	leaseExpires time.Time
	token        baton.Timer
	tokenGen     int
}

// method serves one executor → harness method on a connection.
type method func(c *conn, ctx context.Context, f *proto.Frame) (any, error)

// table is the executor → harness method table.
func (h *Hub) table() map[string]method {
	return map[string]method{
		proto.MethodRegister:           (*conn).register,
		proto.MethodHeartbeat:          (*conn).heartbeat,
		proto.MethodTokenRefresh:       (*conn).refresh,
		proto.MethodCapabilitiesUpdate: (*conn).capabilities,
		proto.MethodClose:              (*conn).closeByExecutor,
		proto.MethodSessionReady:       (*conn).sessionReady,
		proto.MethodSessionEvent:       (*conn).sessionEvent,
		proto.MethodSessionStatus:      (*conn).sessionStatus,
		proto.MethodSessionEnded:       (*conn).sessionEnded,
		proto.MethodToolResult:         (*conn).toolResult,
		proto.MethodToolProgress:       (*conn).toolProgress,
		proto.MethodEventDelta:         (*conn).eventDelta,
		proto.MethodInteractionRequest: (*conn).interactionRequest,
		proto.MethodInteractionCancel:  (*conn).interactionCancel,
		proto.MethodModelTokenRefresh:  (*conn).modelTokenRefresh,
		proto.MethodToolsTokenRefresh:  (*conn).toolsTokenRefresh,
	}
}

// handle is the connection's peer.Handler: until the connection is
// registered only executor.register is allowed; anything else is -32600
// and closes it with 4002.
func (c *conn) handle(ctx context.Context, f *proto.Frame) (any, error) {
	h := c.hub
	if f.Method != proto.MethodRegister {
		if r := c.unregistered(nil); r != nil {
			if f.Kind() == proto.KindNotification { // no answer of its own: the error goes out with id null
				e, shut := r.Err.(*proto.Error), r.After
				r.After = func() {
					if err := c.peer.SendError(nil, e); err != nil {
						h.log.Debug("executor: error before close not sent", slog.String("connection_id", c.id), slog.Any("error", err))
					}
					shut()
				}
			}
			return r, nil
		}
	} else {
		h.mu.Lock()
		c.spoke = true
		h.mu.Unlock()
	}
	m := h.methods[f.Method]
	if m == nil {
		return nil, proto.Errorf(proto.CodeMethodNotFound, "Method not found: %s", f.Method)
	}
	return m(c, ctx, f)
}

// unregistered refuses a message on a connection that is not registered:
// its error e (the protocol's answer to a malformed message), or -32600
// saying what is missing, then close 4002 (bma.executor.v1.1 "First
// frame"). It is nil once the connection is registered. It is also the
// peer's Invalid hook, for the messages the handler never sees.
func (c *conn) unregistered(e *proto.Error) *peer.Reply {
	h := c.hub
	h.mu.Lock()
	registered, first := c.exec != nil, !c.spoke
	c.spoke = true
	h.mu.Unlock()
	if registered {
		return nil
	}
	why := "the first frame must be executor.register"
	if !first {
		why = "the connection is not registered; executor.register must succeed first"
	}
	if e == nil {
		e = proto.Errorf(proto.CodeInvalidRequest, "Invalid Request: %s", why)
	}
	return &peer.Reply{Err: e, After: func() { h.shut(c, proto.CloseProtocolError, why) }}
}

func (c *conn) register(_ context.Context, f *proto.Frame) (any, error) {
	var p proto.RegisterParams
	if e := f.Bind(&p); e != nil {
		return nil, e
	}
	h := c.hub
	if p.Protocol != c.protocol {
		return &peer.Reply{
			Err: proto.Errorf(proto.CodeProtocolMismatch, "protocol %q does not match the negotiated subprotocol %q", p.Protocol, c.protocol),
			After: func() {
				h.shut(c, proto.CloseProtocolMismatch, "protocol mismatch")
			},
		}, nil
	}
	id, e := executorID(&p)
	if e != nil {
		return nil, e
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.exec != nil || c.closing {
		return nil, proto.Errorf(proto.CodeInvalidRequest, "Invalid Request: the connection is already registered")
	}
	g := c.grant
	if e := checkScope(g, &p); e != nil {
		return nil, e
	}
	rec := h.execs[id]
	if rec != nil && (rec.scope != g.Scope || rec.owner() != grantOwner(g)) {
		return nil, proto.Errorf(proto.CodeForbidden, "executor id %s belongs to another environment or machine", id)
	}
	if rec == nil {
		rec = &execRec{id: id, scope: g.Scope, envID: g.EnvironmentID, machineID: g.MachineID, bindings: map[string]*Binding{}}
	}
	if old := rec.conn; old != nil { // a new connection takes the executor over
		h.shutLocked(old, proto.CloseNormal, "superseded by a new connection")
	}
	h.execs[id] = rec
	rec.conn, rec.caps, rec.credID = c, p.Capabilities, g.CredentialID
	rec.detachGen++
	if rec.resume != nil {
		rec.resume.Stop()
		rec.resume = nil
	}
	c.exec = rec
	resumed := h.resumeLocked(rec, c, p.Resume)
	agents := h.resumeAgentsLocked(rec, p.Resume)
	stray := h.strayLocked(p.Resume, resumed)
	c.renewLeaseLocked()
	res := proto.RegisterResult{
		ExecutorID:          id,
		ConnectionID:        c.id,
		HeartbeatIntervalMS: h.interval.Milliseconds(),
		LeaseExpiresAt:      c.leaseExpires,
		TokenExpiresAt:      g.ExpiresAt,
	}
	for _, b := range resumed {
		res.Sessions = append(res.Sessions, proto.SessionEpoch{SessionID: b.sessionID, Epoch: b.epoch})
	}
	for _, a := range agents { // the executor stamps its events with the new epoch
		acked := a.acked
		res.Sessions = append(res.Sessions, proto.SessionEpoch{SessionID: a.id, Epoch: a.epoch(), AckedSequence: &acked})
	}
	slices.SortStableFunc(res.Sessions, func(x, y proto.SessionEpoch) int { return strings.Compare(x.SessionID, y.SessionID) })
	h.log.Info("executor registered", slog.String("executor_id", id), slog.String("connection_id", c.id),
		slog.String("scope", g.Scope), slog.String("owner", rec.owner()), slog.Int("resumed", len(resumed)))
	return &peer.Reply{Result: res, After: func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, b := range resumed {
			h.goWorkLocked(func() { b.reattach(c) })
		}
		for _, a := range agents {
			a.resumedLocked(c)
			h.flushLocked(a)
		}
		if len(stray) > 0 {
			h.log.Info("executor: stopping resumed sessions this hub does not hold", slog.String("executor_id", id),
				slog.Any("sessions", stray))
			h.goWorkLocked(func() { c.stopSessions(reasonUnknownSession, stray...) })
		}
	}}, nil
}

// reasonUnknownSession is session.stop's reason for a resumed session
// the hub does not hold.
const reasonUnknownSession = "unknown_session"

// strayLocked lists, sorted, the sessions a resume names that the hub
// did not bind again (it never saw them, or their binding ended) and
// that are not agent sessions: the executor would keep them, counting
// against its max_sessions. Agent sessions — with an acked_sequence, or
// known to the brain side — are left to resumeAgentsLocked. The hub's
// epochs move past the strays' (a restarted hub starts again from 0), so
// that their session.ended is acknowledged as over and a new binding
// fences them.
func (h *Hub) strayLocked(r *proto.Resume, resumed []*Binding) []string {
	if r == nil {
		return nil
	}
	back := make(map[string]bool, len(resumed))
	for _, b := range resumed {
		back[b.sessionID] = true
	}
	var out []string
	for _, s := range r.ActiveSessions {
		if !back[s.SessionID] && s.AckedSequence == nil && h.ag.sessions[s.SessionID] == nil {
			out = append(out, s.SessionID)
			h.epoch = max(h.epoch, s.Epoch)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// stopSessions sends session.stop for each session on c, one after the
// other, until one fails because c is gone.
func (c *conn) stopSessions(reason string, sessionIDs ...string) {
	for _, id := range sessionIDs {
		ctx, cancel := context.WithTimeout(context.Background(), c.hub.callTimeout)
		var res proto.SessionStopResult
		err := c.peer.Call(ctx, proto.MethodSessionStop, proto.SessionStopParams{SessionID: id, Reason: reason}, &res)
		cancel()
		if errors.Is(err, peer.ErrClosed) {
			return
		}
		if err != nil {
			c.hub.log.Debug("executor: session.stop", slog.String("connection_id", c.id), slog.String("session_id", id), slog.Any("error", err))
		}
	}
}

// executorID picks the executor id of a register: executor_id, else the
// resume's, else a new one.
func executorID(p *proto.RegisterParams) (string, *proto.Error) {
	id := p.ExecutorID
	if r := p.Resume; r != nil {
		switch {
		case id == "":
			id = r.ExecutorID
		case r.ExecutorID != "" && r.ExecutorID != id:
			return "", proto.Errorf(proto.CodeInvalidParams, "Invalid params: resume.executor_id differs from executor_id")
		}
	}
	if id == "" {
		return baton.NewID("exe_"), nil
	}
	if len(id) > 128 || strings.ContainsFunc(id, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_-.:", r))
	}) {
		return "", proto.Errorf(proto.CodeInvalidParams, "Invalid params: executor_id must be at most 128 letters, digits or _-.:")
	}
	return id, nil
}

// checkScope checks a register against what the token names.
func checkScope(g *baton.ExecutorGrant, p *proto.RegisterParams) *proto.Error {
	switch g.Scope {
	case baton.ExecutorScopeEnvironment:
		if p.EnvironmentID != g.EnvironmentID {
			return proto.Errorf(proto.CodeForbidden, "the executor token is for environment %s, not %q", g.EnvironmentID, p.EnvironmentID)
		}
	case baton.ExecutorScopeMachine:
		if p.EnvironmentID != "" {
			return proto.Errorf(proto.CodeForbidden, "a machine-scoped executor registers with an empty environment_id")
		}
		if p.Capabilities.Process == nil && p.Capabilities.Agent == nil {
			return proto.CapabilityMissing(CapabilityProcess, "a machine-scoped executor must declare capabilities.process or capabilities.agent")
		}
	default:
		return proto.Errorf(proto.CodeForbidden, "the executor token has no usable scope")
	}
	return nil
}

func grantOwner(g *baton.ExecutorGrant) string {
	if g.Scope == baton.ExecutorScopeMachine {
		return g.MachineID
	}
	return g.EnvironmentID
}

func (c *conn) heartbeat(_ context.Context, f *proto.Frame) (any, error) {
	var p proto.HeartbeatParams
	if e := f.Bind(&p); e != nil {
		return nil, e
	}
	h := c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.closing {
		return nil, proto.Errorf(proto.CodeInvalidRequest, "Invalid Request: the connection is closing")
	}
	c.renewLeaseLocked()
	if p.Load != nil {
		c.running = p.Load.RunningTools
	}
	return proto.HeartbeatResult{LeaseExpiresAt: c.leaseExpires, Drain: h.draining}, nil
}

func (c *conn) refresh(ctx context.Context, f *proto.Frame) (any, error) {
	var p proto.TokenRefreshParams
	if e := f.Bind(&p); e != nil {
		return nil, e
	}
	if p.Token == "" {
		return nil, proto.Errorf(proto.CodeInvalidParams, `Invalid params: missing "token"`)
	}
	h := c.hub
	g, err := h.tokens.Verify(ctx, p.Token)
	if err != nil {
		if baton.ErrorCode(err) == baton.ECodeUnauthorized {
			return nil, proto.Errorf(proto.CodeForbidden, "token rejected: %s", baton.ErrorMessage(err))
		}
		return nil, fmt.Errorf("verify executor token: %w", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if !c.grant.SameExecutor(g) {
		return nil, proto.Errorf(proto.CodeForbidden, "token rejected: it names another executor scope or credential")
	}
	if !g.ExpiresAt.After(h.clock.Now()) {
		return nil, proto.Errorf(proto.CodeForbidden, "token rejected: expired")
	}
	if c.closing {
		return nil, proto.Errorf(proto.CodeInvalidRequest, "Invalid Request: the connection is closing")
	}
	c.grant = g
	c.armTokenLocked()
	return proto.TokenRefreshResult{ExpiresAt: g.ExpiresAt}, nil
}

func (c *conn) capabilities(_ context.Context, f *proto.Frame) (any, error) {
	var p proto.CapabilitiesUpdateParams
	if e := f.Bind(&p); e != nil {
		return nil, e
	}
	h := c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	if c.exec != nil && c.exec.conn == c {
		c.exec.caps = p.Capabilities
	}
	return nil, nil
}

// closeByExecutor serves executor.close: the executor is leaving for
// good (bma.executor.v1.1: the side that receives executor.close stops), so its
// sessions do not wait the resume window — their bindings end at once
// with ErrExecutorClosed and their next calls bind to another executor.
func (c *conn) closeByExecutor(context.Context, *proto.Frame) (any, error) {
	h := c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	c.left = true
	h.shutLocked(c, proto.CloseNormal, "closed by executor")
	return nil, nil
}

// renewLeaseLocked starts a new lease of two heartbeat intervals.
func (c *conn) renewLeaseLocked() {
	h := c.hub
	c.leaseGen++
	gen := c.leaseGen
	if c.lease != nil {
		c.lease.Stop()
	}
	d := 2 * h.interval
	c.leaseExpires = h.clock.Now().Add(d).UTC().Truncate(time.Millisecond)
	c.lease = h.clock.AfterFunc(d, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if c.leaseGen == gen {
			h.log.Info("executor lease expired", slog.String("connection_id", c.id))
			h.shutLocked(c, proto.CloseLeaseExpired, "lease expired")
		}
	})
}

// armTokenLocked sets the 4001 deadline to the current token's expiry.
func (c *conn) armTokenLocked() {
	h := c.hub
	c.tokenGen++
	gen := c.tokenGen
	if c.token != nil {
		c.token.Stop()
	}
	c.token = h.clock.AfterFunc(c.grant.ExpiresAt.Sub(h.clock.Now()), func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if c.tokenGen == gen {
			h.shutLocked(c, proto.CloseTokenExpired, "token expired")
		}
	})
}

// startTimersLocked arms a new connection: it must register within one
// lease, and it ends with its token.
func (c *conn) startTimersLocked() {
	c.renewLeaseLocked()
	c.armTokenLocked()
}

func (c *conn) stopTimersLocked() {
	c.leaseGen++
	c.tokenGen++
	if c.lease != nil {
		c.lease.Stop()
	}
	if c.token != nil {
		c.token.Stop()
	}
}

// shut closes c with code; see shutLocked.
func (h *Hub) shut(c *conn, code websocket.StatusCode, reason string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.shutLocked(c, code, reason)
}

// shutLocked starts closing c with code: its timers stop, its executor's
// sessions are detached at once, and the close handshake runs in the
// background. Only the first call counts.
func (h *Hub) shutLocked(c *conn, code websocket.StatusCode, reason string) {
	if c.closing {
		return
	}
	c.closing, c.closeCode, c.closeReason = true, code, reason
	c.stopTimersLocked()
	h.detachLocked(c)
	if c.peer != nil { // else ServeHTTP closes it once upgraded
		c.peer.Close(code, reason)
	}
}

// ended is the peer's OnClose: the connection is gone.
func (c *conn) ended(err error) {
	h := c.hub
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.conns, c)
	c.closing = true
	c.stopTimersLocked()
	h.detachLocked(c)
	h.log.Debug("executor connection ended", slog.String("connection_id", c.id), slog.Any("reason", err))
}

// detachLocked unbinds c from its executor. Sessions waiting for
// session.ready fail; the others are detached and wait the resume window,
// unless the executor said executor.close: then they end at once.
func (h *Hub) detachLocked(c *conn) {
	rec := c.exec
	c.exec = nil
	if rec == nil || rec.conn != c {
		return
	}
	rec.conn = nil
	h.detachAgentsLocked(rec, c.left)
	for _, b := range rec.bindings {
		if b.conn == c {
			b.conn = nil
		}
		if !b.ready {
			h.endLocked(b, fmt.Errorf("%w: the executor connection closed before session.ready", peer.ErrClosed))
		}
	}
	if len(rec.bindings) == 0 {
		if h.execs[rec.id] == rec {
			delete(h.execs, rec.id)
		}
		return
	}
	if h.closed {
		return // Close ends the bindings
	}
	if c.left {
		err := fmt.Errorf("%w (executor %s)", ErrExecutorClosed, rec.id)
		for _, b := range rec.bindings {
			h.endLocked(b, err) // the last one forgets rec
		}
		return
	}
	rec.detachGen++
	gen := rec.detachGen
	rec.resume = h.clock.AfterFunc(h.window, func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if rec.detachGen != gen || rec.conn != nil {
			return
		}
		err := fmt.Errorf("%w (executor %s, %s)", ErrResumeWindow, rec.id, h.window)
		for _, b := range rec.bindings {
			h.endLocked(b, err)
		}
	})
}

// resumeLocked rebinds, with new epochs, the executor's sessions that the
// register's resume lists (at an epoch of their binding); the executor's
// other sessions are lost and end.
func (h *Hub) resumeLocked(rec *execRec, c *conn, r *proto.Resume) []*Binding {
	held := map[string]int64{}
	if r != nil {
		for _, s := range r.ActiveSessions {
			held[s.SessionID] = s.Epoch
		}
	}
	var out []*Binding
	for sid, b := range rec.bindings {
		if !b.ready {
			continue // being assigned on this very connection
		}
		ep, ok := held[sid]
		if !ok || ep < b.first || ep > b.epoch {
			h.endLocked(b, fmt.Errorf("%w (executor %s)", ErrSessionLost, rec.id))
			continue
		}
		h.epoch++
		b.epoch, b.conn = h.epoch, c
		out = append(out, b)
	}
	slices.SortFunc(out, func(a, b *Binding) int { return strings.Compare(a.sessionID, b.sessionID) })
	return out
}
