package executor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"net/http"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"github.com/baton-engine/baton/executor/proto"
)

// Executor is one executor process's link to the harness. New builds
// it, Open connects and registers, and from then on it serves tool
// calls, sessions and turns, reconnecting on its own, until Close or
// until the harness stops it for good (Done, Err).
type Executor struct {
	cfg   Config
	log   *slog.Logger
	tools map[string]Tool
	ids   atomic.Int64
	out   *outbox

	life context.Context // parent of every connection and handler
	stop context.CancelFunc
	done chan struct{} // closed when every goroutine has returned

	mu           sync.Mutex
	state        int // stateNew, stateOpen, stateStopped
	work         sync.WaitGroup
	err          error // why the executor stopped, nil after Close
	executorID   string
	registered   bool // a registration succeeded; later ones resume
	calls        map[string]*runningCall
	finished     *recent
	hands        map[string]*hand
	agents       map[string]*agentSession
	interactions map[string]*interactionWait
	files        *fileMounts // nil without Config.Files
	draining     bool        // Drain was called: no new calls, sessions or agent sessions
	busy         int         // calls, turns and session ends whose last request is not held yet
}

const (
	stateNew = iota
	stateOpen
	stateStopped
)

// New checks cfg and returns an unopened Executor.
func New(cfg Config) (*Executor, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	life, stop := context.WithCancel(context.Background())
	e := &Executor{
		cfg: cfg, log: cfg.Logger, tools: make(map[string]Tool, len(cfg.Tools)),
		out: newOutbox(), life: life, stop: stop, done: make(chan struct{}),
		executorID:   cfg.ExecutorID,
		calls:        make(map[string]*runningCall),
		finished:     newRecent(cfg.DoneCalls),
		hands:        make(map[string]*hand),
		agents:       make(map[string]*agentSession),
		interactions: make(map[string]*interactionWait),
	}
	for _, t := range cfg.Tools {
		e.tools[t.Def.Name] = t
	}
	if cfg.Files != nil {
		e.files = newFileMounts(e, *cfg.Files)
	}
	return e, nil
}

// Open exchanges the credential for a token, connects and registers. It
// retries transient failures with backoff until ctx ends, and returns at
// once on a permanent one (*HTTPError for a refused credential,
// *RegisterError, *CloseError). After Open returns nil the executor
// runs in the background until Close.
func (e *Executor) Open(ctx context.Context) error {
	e.mu.Lock()
	if e.state != stateNew {
		e.mu.Unlock()
		return errors.New("executor: Open called twice")
	}
	e.state = stateOpen
	e.work.Add(1)
	e.mu.Unlock()
	first := make(chan error, 1)
	go e.run(first)
	select {
	case err := <-first:
		if err != nil {
			<-e.done
		}
		return err
	case <-e.done:
		// run reports the first registration before it stops, so a
		// refusal is waiting here when both are ready.
		select {
		case err := <-first:
			return err
		default:
			return ErrClosed
		}
	case <-ctx.Done():
		e.halt(nil)
		<-e.done
		return ctx.Err()
	}
}

// Close stops the executor for good. Tool calls still running are
// cancelled and answered at once with an is_error tool.result ("the
// executor stopped", or "the executor stopped (drain timed out)" after
// Drain), which Close waits the harness to acknowledge (or ctx); then
// it sends executor.close, closes the connection with 1000, and waits
// for every handler to return, or for ctx. Other results not yet
// acknowledged are dropped: the harness ends the executor's bindings on
// executor.close. Drain first to let running work finish.
func (e *Executor) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.state == stateNew {
		e.state = stateStopped
		e.err = ErrClosed
		e.mu.Unlock()
		e.stop()
		close(e.done)
		return nil
	}
	stopping := e.state != stateStopped
	var cut []cutCall
	if stopping {
		e.state, e.err = stateStopped, ErrClosed
		cut = e.cutCallsLocked()
	}
	e.mu.Unlock()
	if c, _ := e.out.current(); c != nil && stopping {
		e.answerCut(ctx, c, cut)
		_ = c.notify(proto.MethodClose, proto.Reason{Reason: "shutdown"})
		_ = c.ws.Close(websocket.StatusNormalClosure, "executor closing")
	}
	e.stop()
	select {
	case <-e.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Done is closed once the executor has stopped: after Close, or when
// the harness stopped it for good.
func (e *Executor) Done() <-chan struct{} { return e.done }

// Err reports why the executor stopped: nil while it runs or after
// Close, else a *CloseError, *RegisterError or *HTTPError.
func (e *Executor) Err() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if errors.Is(e.err, ErrClosed) {
		return nil
	}
	return e.err
}

// ExecutorID is the id the harness registered this executor under ("" before
// the first registration unless Config.ExecutorID was set).
func (e *Executor) ExecutorID() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.executorID
}

// Draining reports whether the executor drains: Drain was called, or
// the harness asked the current connection to drain (then no new
// sessions are taken until a new connection).
func (e *Executor) Draining() bool {
	c, _ := e.out.current()
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.drainingLocked(c)
}

// halt stops the executor: no new work, every handler cancelled. err is
// the reason recorded for Err (nil means Close).
func (e *Executor) halt(err error) {
	e.mu.Lock()
	if e.state != stateStopped {
		e.state = stateStopped
		if err == nil {
			err = ErrClosed
		}
		e.err = err
	}
	e.mu.Unlock()
	e.stop()
}

// goWork runs f on a goroutine the executor waits for; it reports false
// (and does not run f) once the executor is stopping.
func (e *Executor) goWork(f func()) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state == stateStopped {
		return false
	}
	e.work.Add(1)
	go func() {
		defer e.work.Done()
		f()
	}()
	return true
}

func (e *Executor) nextID() int64 { return e.ids.Add(1) }

func (e *Executor) stopped() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state == stateStopped
}

// run is the connection loop: connect, serve until the connection ends,
// back off, reconnect. first receives the outcome of the first
// registration.
func (e *Executor) run(first chan<- error) {
	defer func() {
		e.halt(nil)
		e.work.Done()
		e.work.Wait()
		close(e.done)
	}()
	attempt := 0
	for {
		c, err := e.connect()
		if err == nil {
			if first != nil {
				first <- nil
				first = nil
			}
			attempt = 0
			err = e.serve(c)
		}
		if e.stopped() {
			return
		}
		if permanent(err) {
			e.log.Error("executor: stopped for good", "err", err)
			e.halt(err)
			if first != nil {
				first <- err
			}
			return
		}
		d := backoff(attempt, e.cfg.ReconnectMin, e.cfg.ReconnectMax)
		attempt++
		e.log.Warn("executor: reconnecting", "err", err, "in", d)
		t := time.NewTimer(d)
		select {
		case <-e.life.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// permanent reports whether err ends the executor rather than a
// connection.
func permanent(err error) bool {
	var he *HTTPError
	var re *RegisterError
	var ce *CloseError
	return errors.As(err, &he) && he.permanent() || errors.As(err, &re) || errors.As(err, &ce)
}

// backoff is the jittered wait before attempt n (0-based).
func backoff(n int, lo, hi time.Duration) time.Duration {
	d := lo
	for i := 0; i < n && d < hi; i++ {
		d *= 2
	}
	d = min(d, hi)
	return d/2 + mrand.N(d/2+1)
}

// connectTimeout bounds the token exchange and the WebSocket upgrade of
// one connection attempt.
const connectTimeout = 30 * time.Second

// connect exchanges the credential, dials and registers. On success the
// connection is live and its held requests were re-sent.
func (e *Executor) connect() (*conn, error) {
	ctx, cancel := context.WithTimeout(e.life, connectTimeout)
	defer cancel()
	tok, err := e.exchange(ctx)
	if err != nil {
		return nil, err
	}
	h := http.Header{}
	h.Set("Authorization", "Bearer "+tok.Value)
	ws, resp, err := websocket.Dial(ctx, e.cfg.BaseURL+"/v1/executors/connect", &websocket.DialOptions{
		HTTPClient:   e.cfg.HTTPClient,
		HTTPHeader:   h,
		Subprotocols: []string{Protocol},
	})
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			var body []byte
			if resp.Body != nil {
				body, _ = io.ReadAll(resp.Body)
			}
			return nil, httpError("connect", resp.StatusCode, body)
		}
		return nil, fmt.Errorf("executor: connect: %w", err)
	}
	if ws.Subprotocol() != Protocol {
		_ = ws.Close(proto.CloseProtocolMismatch, "subprotocol not negotiated")
		return nil, &CloseError{Code: proto.CloseProtocolMismatch, Reason: "the harness did not accept subprotocol " + Protocol}
	}
	ws.SetReadLimit(MaxMessageSize)
	c := newConn(e, ws)
	go c.readLoop()
	res, err := e.register(c)
	if err != nil {
		c.cancel()
		rerr := <-c.read
		c.teardown()
		var ce websocket.CloseError
		if errors.As(rerr, &ce) && (ce.Code == proto.CloseProtocolError || ce.Code == proto.CloseProtocolMismatch) && !permanent(err) {
			return nil, &CloseError{Code: int(ce.Code), Reason: ce.Reason}
		}
		return nil, err
	}
	exp := res.TokenExpiresAt
	if exp.IsZero() {
		exp = tok.ExpiresAt
	}
	e.out.attach(c)
	interval := time.Duration(res.HeartbeatIntervalMS) * time.Millisecond
	if interval <= 0 {
		interval = 10 * time.Second
	}
	c.wg.Add(2)
	go c.heartbeat(interval)
	go c.refresher(exp)
	e.log.Info("executor: registered", "executor_id", res.ExecutorID, "connection_id", res.ConnectionID,
		"heartbeat", interval, "held", e.out.held())
	return c, nil
}

// register sends executor.register, with resume after a first
// registration.
func (e *Executor) register(c *conn) (proto.RegisterResult, error) {
	p := registerParams{Protocol: Protocol, Capabilities: e.capabilities()}
	if e.cfg.Scope.Kind == ScopeEnvironment {
		p.EnvironmentID = e.cfg.Scope.ID
	}
	e.mu.Lock()
	p.ExecutorID = e.executorID
	if e.registered {
		p.Resume = &proto.Resume{ExecutorID: e.executorID, ActiveSessions: e.resumeLocked()}
	}
	e.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.ctx, e.cfg.WriteTimeout)
	defer cancel()
	raw, err := c.call(ctx, proto.MethodRegister, p)
	var rerr *RPCError
	if errors.As(err, &rerr) && (rerr.Code == CodeProtocolMismatch || rerr.Code == CodeCapabilityMissing) {
		return proto.RegisterResult{}, &RegisterError{RPC: rerr}
	}
	if err != nil {
		return proto.RegisterResult{}, fmt.Errorf("executor: register: %w", err)
	}
	var res proto.RegisterResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return proto.RegisterResult{}, fmt.Errorf("executor: register answer: %w", err)
	}
	e.mu.Lock()
	if res.ExecutorID != "" {
		e.executorID = res.ExecutorID
	}
	e.registered = true
	e.mu.Unlock()
	e.adopt(res.Sessions)
	return res, nil
}

// adopt takes the epochs a register's result reports for the resumed
// sessions (Baton lists them in sessions; a harness that does not leaves
// every epoch as it was). An entry with acked_sequence is an agent
// session's: its held session.event and session.ended are re-stamped with
// the new epoch before they are re-sent (the harness refuses an older
// one), and its events and tools_token.refresh carry it from now on. An
// entry without is a hand session's (session.assign tells it again too).
func (e *Executor) adopt(sessions []proto.SessionEpoch) {
	for _, a := range sessions {
		if a.Epoch <= 0 {
			continue
		}
		e.mu.Lock()
		if a.AckedSequence == nil {
			if h := e.hands[a.SessionID]; h != nil {
				h.epoch = a.Epoch
			}
			e.mu.Unlock()
			continue
		}
		s := e.agents[a.SessionID]
		e.mu.Unlock()
		if s == nil {
			continue
		}
		s.emit.Lock() // no event takes the old epoch after the re-stamp
		e.mu.Lock()
		changed := s.epoch != a.Epoch
		s.epoch = a.Epoch
		e.mu.Unlock()
		if changed {
			e.out.restamp(s.id, a.Epoch)
			e.log.Info("executor: agent session resumed in a new epoch", "session", s.id, "epoch", a.Epoch)
		}
		s.emit.Unlock()
	}
}

// serve waits for c to end and says why: a permanent *CloseError, or the
// transient error to reconnect after.
func (e *Executor) serve(c *conn) error {
	err := <-c.read
	e.out.detach(c)
	c.teardown()
	code := int(websocket.CloseStatus(err))
	if n := c.closeNotice(); n != nil {
		return &CloseError{Code: code, Reason: n.Reason, Notified: true}
	}
	switch code {
	case proto.CloseProtocolError, proto.CloseProtocolMismatch:
		var ce websocket.CloseError
		errors.As(err, &ce)
		return &CloseError{Code: code, Reason: ce.Reason}
	}
	return fmt.Errorf("executor: connection lost: %w", err)
}

// capabilities renders what executor.register declares.
func (e *Executor) capabilities() registerCaps {
	w := registerCaps{Process: e.cfg.Capabilities.Process, Agent: e.cfg.Capabilities.Agent}
	if e.files != nil {
		w.FS = &proto.FSCapability{Fuse: true} // fs.mount is served, through FUSE or a synced directory
	}
	for _, t := range e.cfg.Tools {
		w.Tools = append(w.Tools, t.Def)
	}
	return w
}

// resumeLocked lists the sessions held here for resume, sorted by id.
func (e *Executor) resumeLocked() []proto.SessionEpoch {
	byID := map[string]proto.SessionEpoch{}
	for id, h := range e.hands {
		byID[id] = proto.SessionEpoch{SessionID: id, Epoch: h.epoch}
	}
	for id, s := range e.agents {
		a := proto.SessionEpoch{SessionID: id, Epoch: s.epoch}
		if s.acked > 0 {
			acked := s.acked
			a.AckedSequence = &acked
		}
		byID[id] = a
	}
	out := make([]proto.SessionEpoch, 0, len(byID))
	for _, a := range byID {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].SessionID < out[j].SessionID })
	return out
}

// heartbeatParams reports the sessions and the running tool calls.
func (e *Executor) heartbeatParams() proto.HeartbeatParams {
	e.mu.Lock()
	defer e.mu.Unlock()
	ids := make([]string, 0, len(e.hands)+len(e.agents))
	for _, a := range e.resumeLocked() {
		ids = append(ids, a.SessionID)
	}
	return proto.HeartbeatParams{ActiveSessions: ids, Load: &proto.Load{RunningTools: len(e.calls)}}
}

// call sends a request that is safe to repeat on the live connection,
// waiting for one and retrying on the next when the connection drops.
func (e *Executor) call(ctx context.Context, method string, params, out any) error {
	for {
		c, live := e.out.current()
		if c == nil {
			select {
			case <-live:
				continue
			case <-e.life.Done():
				return ErrClosed
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		raw, err := c.call(ctx, method, params)
		if errors.Is(err, ErrDisconnected) {
			e.waitDown(ctx, c)
			continue
		}
		if err != nil {
			return err
		}
		if out != nil {
			if err := json.Unmarshal(raw, out); err != nil {
				return fmt.Errorf("executor: %s answer: %w", method, err)
			}
		}
		return nil
	}
}

// waitDown waits until c is no longer the live connection.
func (e *Executor) waitDown(ctx context.Context, c *conn) {
	select {
	case <-c.ctx.Done():
	case <-ctx.Done():
	}
	for {
		cur, live := e.out.current()
		if cur != c {
			return
		}
		select {
		case <-live:
		case <-ctx.Done():
			return
		case <-e.life.Done():
			return
		}
	}
}

// push holds a request in the outbox and sends it when it can.
func (e *Executor) push(method, session string, params any, onAck func(json.RawMessage, *RPCError)) error {
	return e.pushStamped(method, session, params, nil, onAck)
}

// pushStamped is push for a request of an agent session that carries its
// epoch: reepoch returns its params for another epoch, with which it is
// re-encoded (same id) when a resume moves the session to a new one
// before it was answered (see adopt).
func (e *Executor) pushStamped(method, session string, params any, reepoch func(int64) any, onAck func(json.RawMessage, *RPCError)) error {
	id := e.nextID()
	b, err := encodeRequest(id, method, params)
	if err != nil {
		return err
	}
	if onAck == nil {
		onAck = func(_ json.RawMessage, rerr *RPCError) {
			if rerr != nil {
				e.log.Warn("executor: harness refused a held request", "method", method, "session", session, "err", rerr)
			}
		}
	}
	e.out.push(&outItem{id: id, method: method, session: session, msg: b, reepoch: reepoch, onAck: onAck})
	return nil
}

// notifyLive sends a lossy notification on the live connection, if any.
func (e *Executor) notifyLive(method string, params any) error {
	c, _ := e.out.current()
	if c == nil {
		return ErrDisconnected
	}
	return c.notify(method, params)
}

// newID returns prefix plus 24 random hex digits.
func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// recent remembers the last n finished tool_call_ids.
type recent struct {
	set  map[string]struct{}
	ring []string
	next int
}

func newRecent(n int) *recent {
	return &recent{set: make(map[string]struct{}, n), ring: make([]string, n)}
}

func (r *recent) has(id string) bool { _, ok := r.set[id]; return ok }

func (r *recent) add(id string) {
	if r.has(id) {
		return
	}
	if old := r.ring[r.next]; old != "" {
		delete(r.set, old)
	}
	r.ring[r.next] = id
	r.set[id] = struct{}{}
	r.next = (r.next + 1) % len(r.ring)
}
