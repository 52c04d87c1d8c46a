package executor

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/peer"
	"github.com/baton-engine/baton/executor/proto"
)

// ErrDetached is returned by a Binding's requests while its executor is
// disconnected (within the resume window).
var ErrDetached = &baton.Error{Code: baton.ECodeUnavailable, Message: "executor is disconnected; waiting for it to resume"}

// Hooks receive what an executor reports about a bound session. They run
// on the connection's reader goroutine, in order; they may block on I/O
// (a store append) but must not wait on the same binding's requests.
type Hooks struct {
	// OnEvent gets each durable session.event once (deduplicated by its
	// JSON-RPC id) before it is acknowledged; an error is answered to the
	// executor, which resends. Without it the events are recorded in the
	// log of Assignment.Events (see HandSink).
	OnEvent func(b *Binding, p *proto.SessionEventParams) error
	// OnStatus gets session.status notifications.
	OnStatus func(b *Binding, p *proto.SessionStatusParams)
	// OnProgress gets tool.progress notifications of pending calls.
	OnProgress func(b *Binding, p *proto.ToolProgressParams)
	// OnResume runs after the binding was resumed on a new connection
	// with a new epoch and its pending tool calls were re-sent (the place
	// to re-send fs.mount with tokens for the new epoch). It runs on a
	// hub goroutine.
	OnResume func(b *Binding)
}

// Assignment is a session to bind to an executor.
type Assignment struct {
	SessionID string
	Metadata  proto.AssignMetadata
	Tools     []proto.ToolDef // optional, sent with session.assign
	Hooks     Hooks
	// Events is the Baton session whose log takes the binding's durable
	// session.event messages (through the attached sink's HandSink); ""
	// refuses them, unless Hooks.OnEvent takes them.
	Events string
}

// Binding is a session bound to an executor. Its epoch changes on every
// rebinding; it ends when the executor reports session.ended, when its
// executor does not come back within the resume window, at once when its
// executor sends executor.close, or when the hub closes. Methods are safe for concurrent use.
type Binding struct {
	hub       *Hub
	sessionID string
	rec       *execRec
	meta      proto.AssignMetadata
	tools     []proto.ToolDef
	hooks     Hooks
	events    string        // Assignment.Events
	readyCh   chan struct{} // closed on session.ready
	done      chan struct{} // closed when the binding ends
	deliver   sync.Mutex    // one session.event delivery at a time, across connections

	// guarded by hub.mu
	epoch    int64
	first    int64 // the epoch of the assignment; older ones are stale
	conn     *conn // nil while detached
	ready    bool
	ended    bool
	err      error
	seq      uint64
	calls    map[string]*call    // pending, by tool_call_id
	finished map[string]struct{} // answered tool_call_ids
	seen     seen                // session.event JSON-RPC ids
}

// call is one pending tool.call.
type call struct {
	seq      uint64
	params   proto.ToolCallParams
	timer    baton.Timer
	done     chan struct{}
	finished bool
	result   *proto.ToolResultParams
	err      error
}

// SessionID returns the bound session's id.
func (b *Binding) SessionID() string { return b.sessionID }

// ExecutorID returns the executor's id.
func (b *Binding) ExecutorID() string { return b.rec.id }

// Epoch returns the current binding epoch.
func (b *Binding) Epoch() int64 {
	b.hub.mu.Lock()
	defer b.hub.mu.Unlock()
	return b.epoch
}

// Done is closed when the binding has ended.
func (b *Binding) Done() <-chan struct{} { return b.done }

// Err returns why the binding ended (nil while it lasts).
func (b *Binding) Err() error {
	b.hub.mu.Lock()
	defer b.hub.mu.Unlock()
	return b.err
}

// Assign binds a session to a connected executor matching t, least
// loaded first: it sends session.assign and waits for session.ready. An
// executor answering -32009 is skipped for the next candidate; when none
// is left the error is ErrOverCapacity (or ErrNoExecutor when none
// matched).
func (h *Hub) Assign(ctx context.Context, t Target, a Assignment) (*Binding, error) {
	if a.SessionID == "" {
		return nil, baton.Errorf(baton.ECodeInvalidParams, "assign: missing session id")
	}
	h.mu.Lock()
	err := h.assignableLocked(a.SessionID)
	cands := h.candidatesLocked(t)
	h.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if len(cands) == 0 {
		return nil, fmt.Errorf("%w: %+v", ErrNoExecutor, t)
	}
	var last error
	for _, rec := range cands {
		b, err := h.assignTo(ctx, rec, a)
		if err == nil {
			return b, nil
		}
		last = err
		if ctx.Err() != nil || !(errors.Is(err, ErrOverCapacity) || errors.Is(err, peer.ErrClosed)) {
			break
		}
	}
	return nil, last
}

func (h *Hub) assignableLocked(sessionID string) error {
	switch {
	case h.closed:
		return ErrClosed
	case h.draining:
		return ErrDraining
	case h.bindings[sessionID] != nil:
		return fmt.Errorf("%w: %s", ErrBound, sessionID)
	}
	return nil
}

func (h *Hub) assignTo(ctx context.Context, rec *execRec, a Assignment) (*Binding, error) {
	h.mu.Lock()
	if err := h.assignableLocked(a.SessionID); err != nil {
		h.mu.Unlock()
		return nil, err
	}
	c := rec.conn
	if c == nil || c.closing {
		h.mu.Unlock()
		return nil, fmt.Errorf("%w: executor %s went away", peer.ErrClosed, rec.id)
	}
	h.epoch++
	b := &Binding{
		hub: h, sessionID: a.SessionID, rec: rec, meta: a.Metadata, tools: a.Tools, hooks: a.Hooks, events: a.Events,
		readyCh: make(chan struct{}), done: make(chan struct{}),
		epoch: h.epoch, first: h.epoch, conn: c,
		calls: map[string]*call{}, finished: map[string]struct{}{},
	}
	h.bindings[a.SessionID] = b
	rec.bindings[a.SessionID] = b
	h.mu.Unlock()

	cctx, cancel := context.WithTimeout(ctx, h.callTimeout)
	defer cancel()
	var res proto.Accepted
	err := c.peer.Call(cctx, proto.MethodSessionAssign, b.assignParams(b.first), &res)
	var pe *proto.Error
	switch {
	case errors.As(err, &pe) && pe.Code == proto.CodeOverCapacity:
		err = fmt.Errorf("%w: executor %s: %s", ErrOverCapacity, rec.id, pe.Message)
	case err == nil && !res.Accepted:
		err = fmt.Errorf("%w: executor %s did not accept the session", ErrOverCapacity, rec.id)
	case err == nil:
		select {
		case <-b.readyCh:
			return b, nil
		case <-b.done:
			err = b.Err()
		case <-cctx.Done():
			err = fmt.Errorf("assign %s: waiting for session.ready: %w", a.SessionID, cctx.Err())
		}
		// The executor took the session but we gave up on it.
		h.mu.Lock()
		if !b.ended {
			h.goWorkLocked(func() { b.stopOn(c, "assignment abandoned") })
		}
		h.mu.Unlock()
	}
	h.mu.Lock()
	h.endLocked(b, err)
	h.mu.Unlock()
	return nil, err
}

func (b *Binding) assignParams(epoch int64) proto.AssignParams {
	return proto.AssignParams{SessionID: b.sessionID, Epoch: epoch, Metadata: b.meta, Tools: b.tools}
}

// current returns the live connection, or ErrDetached / the end reason.
func (b *Binding) current() (*conn, int64, error) {
	b.hub.mu.Lock()
	defer b.hub.mu.Unlock()
	switch {
	case b.ended:
		return nil, 0, b.err
	case b.conn == nil:
		return nil, 0, ErrDetached
	}
	return b.conn, b.epoch, nil
}

// request sends one harness → executor request on the live connection.
func (b *Binding) request(ctx context.Context, method string, params, result any) error {
	c, _, err := b.current()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, b.hub.callTimeout)
	defer cancel()
	return c.peer.Call(ctx, method, params, result)
}

// Call dispatches a tool call (tool.call) and returns its tool.result.
// timeout, when positive, is sent as timeout_ms and also bounds the wait
// here (ErrToolTimeout). A call made while the executor is detached is
// sent when it resumes; a call pending when the binding ends fails with
// the end reason (ErrResumeWindow, ErrExecutorClosed, ErrSessionLost,
// ErrSessionEnded, ErrClosed), which the caller turns into an error tool_result. When the
// wait ends early (ctx, timeout) the executor is sent tool.cancel.
func (b *Binding) Call(ctx context.Context, toolCallID, name string, input json.RawMessage, timeout time.Duration) (*proto.ToolResultParams, error) {
	if toolCallID == "" || name == "" {
		return nil, baton.Errorf(baton.ECodeInvalidParams, "tool call: missing id or name")
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	h := b.hub
	cl := &call{
		params: proto.ToolCallParams{SessionID: b.sessionID, ToolCallID: toolCallID, Name: name, Input: input, TimeoutMS: timeout.Milliseconds()},
		done:   make(chan struct{}),
	}
	h.mu.Lock()
	if b.ended {
		err := b.err
		h.mu.Unlock()
		return nil, err
	}
	if _, ok := b.finished[toolCallID]; ok || b.calls[toolCallID] != nil {
		h.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", ErrDuplicate, toolCallID)
	}
	b.seq++
	cl.seq = b.seq
	b.calls[toolCallID] = cl
	if timeout > 0 {
		cl.timer = h.clock.AfterFunc(timeout, func() {
			h.mu.Lock()
			defer h.mu.Unlock()
			b.finishLocked(cl, nil, fmt.Errorf("%w after %s", ErrToolTimeout, timeout))
		})
	}
	c := b.conn
	h.mu.Unlock()

	if c != nil {
		b.send(ctx, c, cl)
	}
	select {
	case <-cl.done:
	case <-ctx.Done():
		h.mu.Lock()
		b.finishLocked(cl, nil, ctx.Err())
		h.mu.Unlock()
	}
	if cl.err != nil && (ctx.Err() != nil || errors.Is(cl.err, ErrToolTimeout)) {
		h.mu.Lock()
		if c := b.conn; c != nil && !b.ended {
			h.goWorkLocked(func() { b.cancelOn(c, toolCallID) })
		}
		h.mu.Unlock()
	}
	return cl.result, cl.err
}

// send delivers one tool.call on c. A refusal (an error answer, or
// accepted:false) fails the call; a lost connection leaves it pending for
// the resume.
func (b *Binding) send(ctx context.Context, c *conn, cl *call) {
	h := b.hub
	ctx, cancel := context.WithTimeout(ctx, h.callTimeout)
	defer cancel()
	var ack proto.Accepted
	err := c.peer.Call(ctx, proto.MethodToolCall, cl.params, &ack)
	var pe *proto.Error
	switch {
	case errors.As(err, &pe):
		err = fmt.Errorf("tool.call %s refused: %w", cl.params.Name, pe)
	case err == nil && !ack.Accepted:
		err = fmt.Errorf("tool.call %s was not accepted by executor %s", cl.params.Name, b.rec.id)
	case err != nil:
		h.log.Debug("executor: tool.call not acknowledged; kept for a resume",
			slog.String("session_id", b.sessionID), slog.String("tool_call_id", cl.params.ToolCallID), slog.Any("error", err))
		return
	default:
		return
	}
	h.mu.Lock()
	b.finishLocked(cl, nil, err)
	h.mu.Unlock()
}

// finishLocked completes a pending call once; later outcomes lose.
func (b *Binding) finishLocked(cl *call, res *proto.ToolResultParams, err error) bool {
	if cl.finished {
		return false
	}
	cl.finished, cl.result, cl.err = true, res, err
	if cl.timer != nil {
		cl.timer.Stop()
	}
	delete(b.calls, cl.params.ToolCallID)
	b.finished[cl.params.ToolCallID] = struct{}{}
	close(cl.done)
	return true
}

// Cancel sends tool.cancel; canceled is false when the executor does not
// know the call or it already finished. The call's result still arrives
// as tool.result (Call returns it).
func (b *Binding) Cancel(ctx context.Context, toolCallID string) (bool, error) {
	var res proto.ToolCancelResult
	err := b.request(ctx, proto.MethodToolCancel, proto.ToolCancelParams{SessionID: b.sessionID, ToolCallID: toolCallID}, &res)
	return res.Canceled, err
}

func (b *Binding) cancelOn(c *conn, toolCallID string) {
	ctx, cancel := context.WithTimeout(context.Background(), b.hub.callTimeout)
	defer cancel()
	var res proto.ToolCancelResult
	_ = c.peer.Call(ctx, proto.MethodToolCancel, proto.ToolCancelParams{SessionID: b.sessionID, ToolCallID: toolCallID}, &res)
}

// Stop sends session.stop; the executor then ends every process of the
// session and reports session.ended, which ends the binding (see Done).
func (b *Binding) Stop(ctx context.Context, reason string) (bool, error) {
	var res proto.SessionStopResult
	err := b.request(ctx, proto.MethodSessionStop, proto.SessionStopParams{SessionID: b.sessionID, Reason: reason}, &res)
	return res.Stopped, err
}

func (b *Binding) stopOn(c *conn, reason string) { c.stopSessions(reason, b.sessionID) }

// Mount sends fs.mount for the current epoch and returns the mounted
// views.
func (b *Binding) Mount(ctx context.Context, views []proto.FsView) ([]string, error) {
	_, epoch, err := b.current()
	if err != nil {
		return nil, err
	}
	var res proto.FsMountResult
	err = b.request(ctx, proto.MethodFsMount, proto.FsMountParams{SessionID: b.sessionID, Epoch: epoch, Views: views}, &res)
	return res.Mounted, err
}

// Unmount sends fs.unmount.
func (b *Binding) Unmount(ctx context.Context, flush bool) error {
	var res proto.FsUnmountResult
	return b.request(ctx, proto.MethodFsUnmount, proto.FsUnmountParams{SessionID: b.sessionID, Flush: flush}, &res)
}

// reattach runs after a resume on c: it tells the executor the new epoch
// (session.assign again), re-sends the pending tool calls in order, then
// runs OnResume.
func (b *Binding) reattach(c *conn) {
	h := b.hub
	h.mu.Lock()
	if b.ended || b.conn != c {
		h.mu.Unlock()
		return
	}
	params := b.assignParams(b.epoch)
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), h.callTimeout)
	defer cancel()
	var res proto.Accepted
	err := c.peer.Call(ctx, proto.MethodSessionAssign, params, &res)
	var pe *proto.Error
	if errors.As(err, &pe) || (err == nil && !res.Accepted) {
		h.mu.Lock()
		h.endLocked(b, fmt.Errorf("%w: the executor refused the session on resume: %v", ErrSessionLost, err))
		h.mu.Unlock()
		return
	}
	if err != nil {
		return // the connection went too; the next resume retries
	}
	h.mu.Lock()
	pending := make([]*call, 0, len(b.calls))
	for _, cl := range b.calls {
		pending = append(pending, cl)
	}
	h.mu.Unlock()
	slices.SortFunc(pending, func(x, y *call) int { return cmp.Compare(x.seq, y.seq) })
	for _, cl := range pending {
		b.send(ctx, c, cl)
	}
	if b.hooks.OnResume != nil {
		b.hooks.OnResume(b)
	}
}

// endLocked ends b once: pending calls fail with err.
func (h *Hub) endLocked(b *Binding, err error) {
	if b.ended {
		return
	}
	b.ended, b.err = true, err
	for _, cl := range b.calls {
		b.finishLocked(cl, nil, err)
	}
	h.fs.dropBindingLocked(b)
	if h.bindings[b.sessionID] == b {
		delete(h.bindings, b.sessionID)
	}
	rec := b.rec
	delete(rec.bindings, b.sessionID)
	if len(rec.bindings) == 0 && rec.conn == nil {
		if rec.resume != nil {
			rec.resume.Stop()
			rec.resume = nil
		}
		if h.execs[rec.id] == rec {
			delete(h.execs, rec.id)
		}
	}
	close(b.done)
}
