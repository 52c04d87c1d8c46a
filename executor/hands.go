package executor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/peer"
	"github.com/baton-engine/baton/executor/proto"
)

// Hands serves sessions' tools on environment-scoped executors: it
// implements baton.ExecutorHands on a Hub. A session is bound to one
// executor per environment on its first call there (session.assign with
// metadata source "harness" and the profile id), the binding is reused by
// later calls and bound again once it ended. Close it before the Hub.
type Hands struct {
	hub *Hub

	ctx  context.Context // ends at Close: pending releases give up
	stop context.CancelFunc

	mu       sync.Mutex
	closed   bool
	sessions map[string]map[string]*slot             // session → environment → slot
	progress map[string]func(baton.ExecutorProgress) // pending calls' OnProgress, by tool_call_id
	released map[*Binding]chan struct{}              // released bindings waiting for a resume to be stopped
	wg       sync.WaitGroup                          // release goroutines
}

// slot is a session's binding in one environment.
type slot struct {
	mu       sync.Mutex // held while binding, so concurrent first calls bind once
	b        *Binding   // guarded by Hands.mu
	released bool       // guarded by Hands.mu
}

var _ baton.ExecutorHands = (*Hands)(nil)

// NewHands returns Hands serving through h.
func NewHands(h *Hub) *Hands {
	ctx, stop := context.WithCancel(context.Background())
	return &Hands{
		hub: h, ctx: ctx, stop: stop,
		sessions: map[string]map[string]*slot{},
		progress: map[string]func(baton.ExecutorProgress){},
		released: map[*Binding]chan struct{}{},
	}
}

// Close stops the releases still waiting for a detached executor and
// refuses new calls. Bindings stay with the Hub, whose Close ends them.
func (x *Hands) Close() error {
	x.mu.Lock()
	x.closed = true
	x.mu.Unlock()
	x.stop()
	x.wg.Wait()
	return nil
}

// Tools lists the tools of the connected executors of envIDs, each name
// once: the first environment in envIDs serving a name owns it, and
// within an environment the executor with the smallest id defines it.
func (x *Hands) Tools(envIDs []string) []baton.ExecutorTool {
	var (
		out  []baton.ExecutorTool
		seen map[string]bool
		recs []*execRec
	)
	h := x.hub
	for _, env := range envIDs {
		recs = recs[:0]
		h.mu.Lock()
		for _, r := range h.execs {
			if r.conn != nil && r.scope == baton.ExecutorScopeEnvironment && r.envID == env && len(r.caps.Tools) > 0 {
				recs = append(recs, r)
			}
		}
		// A capabilities update replaces caps whole, so the slices read
		// below are never written again.
		defs := make([][]proto.ToolDef, len(recs))
		slices.SortFunc(recs, func(a, b *execRec) int { return cmp.Compare(a.id, b.id) })
		for i, r := range recs {
			defs[i] = r.caps.Tools
		}
		h.mu.Unlock()
		for _, ds := range defs {
			for _, d := range ds {
				if d.Name == "" || seen[d.Name] {
					continue
				}
				if seen == nil {
					seen = map[string]bool{}
				}
				seen[d.Name] = true
				out = append(out, baton.ExecutorTool{EnvironmentID: env, ToolDef: baton.ToolDef(d)})
			}
		}
	}
	return out
}

// ToolsByEnvironment lists the tools of every environment that has
// connected environment-scoped executors serving tools, each list as
// Tools lists it for that environment alone: each name once, the
// executor with the smallest id defining it. A cluster node publishes it
// for the other nodes.
func (x *Hands) ToolsByEnvironment() map[string][]baton.ToolDef {
	type served struct {
		env, id string
		defs    []proto.ToolDef
	}
	var all []served
	h := x.hub
	h.mu.Lock()
	for _, r := range h.execs {
		if r.conn != nil && r.scope == baton.ExecutorScopeEnvironment && len(r.caps.Tools) > 0 {
			// caps is replaced whole by an update: these slices are never
			// written again.
			all = append(all, served{env: r.envID, id: r.id, defs: r.caps.Tools})
		}
	}
	h.mu.Unlock()
	slices.SortFunc(all, func(a, b served) int { return cmp.Or(cmp.Compare(a.env, b.env), cmp.Compare(a.id, b.id)) })
	out := map[string][]baton.ToolDef{}
	var seen map[string]bool
	for i, s := range all {
		if i == 0 || all[i-1].env != s.env {
			seen = map[string]bool{}
		}
		for _, d := range s.defs {
			if d.Name == "" || seen[d.Name] {
				continue
			}
			seen[d.Name] = true
			out[s.env] = append(out[s.env], baton.ToolDef(d))
		}
	}
	return out
}

// Call runs c on the session's executor in c.EnvironmentID. Failures
// without a result are baton errors whose message explains them.
func (x *Hands) Call(ctx context.Context, c baton.ExecutorCall) (baton.ExecutorResult, error) {
	b, err := x.bind(ctx, c)
	if err != nil {
		return baton.ExecutorResult{}, x.explain(err, c)
	}
	if c.OnProgress != nil {
		x.mu.Lock()
		x.progress[c.ToolCallID] = c.OnProgress
		x.mu.Unlock()
		defer func() {
			x.mu.Lock()
			delete(x.progress, c.ToolCallID)
			x.mu.Unlock()
		}()
	}
	res, err := b.Call(ctx, c.ToolCallID, c.Name, c.Input, c.Timeout)
	out := baton.ExecutorResult{ExecutorID: b.ExecutorID()}
	if err != nil {
		return out, x.explain(err, c)
	}
	out.Content, out.IsError = res.Content, res.IsError
	return out, nil
}

// bind returns the session's live binding in c's environment, binding it
// to an executor serving c.Name when there is none. The session's id
// names it on the executor; when that id is bound already (to another
// environment, or to a brain) it is "<session id>@<environment id>".
func (x *Hands) bind(ctx context.Context, c baton.ExecutorCall) (*Binding, error) {
	s, err := x.slot(c.SessionID, c.EnvironmentID)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	x.mu.Lock()
	b, released := s.b, s.released
	x.mu.Unlock()
	if released {
		return nil, fmt.Errorf("%w: session %s was released", ErrSessionEnded, c.SessionID)
	}
	if b != nil && !isDone(b) {
		return b, nil
	}
	a := Assignment{
		SessionID: c.SessionID,
		Metadata:  proto.AssignMetadata{Source: proto.SourceHarness, ProfileID: c.ProfileID},
		Hooks:     Hooks{OnProgress: x.onProgress, OnResume: x.onResume},
		Events:    c.SessionID,
	}
	t := Target{EnvironmentID: c.EnvironmentID, Tool: c.Name}
	b, err = x.assign(ctx, t, a)
	if errors.Is(err, ErrBound) {
		a.SessionID = c.SessionID + "@" + c.EnvironmentID
		b, err = x.assign(ctx, t, a)
	}
	if err != nil {
		return nil, err
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	if s.released { // released while binding: undo it
		x.releaseLocked(b)
		return nil, fmt.Errorf("%w: session %s was released", ErrSessionEnded, c.SessionID)
	}
	s.b = b
	return b, nil
}

// assign binds a, trying again (a few times) when the executor it picked
// went away meanwhile: the next attempt sees it gone.
func (x *Hands) assign(ctx context.Context, t Target, a Assignment) (*Binding, error) {
	for range 3 {
		b, err := x.hub.Assign(ctx, t, a)
		if !errors.Is(err, peer.ErrClosed) {
			return b, err
		}
	}
	return x.hub.Assign(ctx, t, a)
}

// slot returns the session's slot for env, creating it.
func (x *Hands) slot(sessionID, env string) (*slot, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.closed {
		return nil, ErrClosed
	}
	m := x.sessions[sessionID]
	if m == nil {
		m = map[string]*slot{}
		x.sessions[sessionID] = m
	}
	s := m[env]
	if s == nil {
		s = &slot{}
		m[env] = s
	}
	return s, nil
}

func isDone(b *Binding) bool {
	select {
	case <-b.Done():
		return true
	default:
		return false
	}
}

// onProgress is every binding's OnProgress: it hands the report to the
// pending call's callback.
func (x *Hands) onProgress(_ *Binding, p *proto.ToolProgressParams) {
	x.mu.Lock()
	fn := x.progress[p.ToolCallID]
	x.mu.Unlock()
	if fn != nil {
		fn(baton.ExecutorProgress{Message: p.Message, Progress: p.Progress, Total: p.Total})
	}
}

// onResume wakes the release of a binding that was released while its
// executor was away.
func (x *Hands) onResume(b *Binding) {
	x.mu.Lock()
	ch := x.released[b]
	x.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// Release stops the session's bindings (session.stop) in the background.
// A binding whose executor is away is stopped when it resumes; one that
// does not come back ends with its resume window. A binding in progress
// is stopped as soon as it is made.
func (x *Hands) Release(sessionID string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, s := range x.sessions[sessionID] {
		s.released = true
		if s.b != nil {
			x.releaseLocked(s.b)
		}
	}
	delete(x.sessions, sessionID)
}

// releaseLocked starts releasing b, unless Hands is closed (the Hub's
// Close then ends it). x.mu is held.
func (x *Hands) releaseLocked(b *Binding) {
	if x.closed {
		return
	}
	x.wg.Add(1)
	go func() {
		defer x.wg.Done()
		x.release(b)
	}()
}

// release sends session.stop to b's executor, waiting for a detached
// one to resume (or for the binding to end, or for Close).
func (x *Hands) release(b *Binding) {
	wake := make(chan struct{}, 1)
	x.mu.Lock()
	x.released[b] = wake
	x.mu.Unlock()
	defer func() {
		x.mu.Lock()
		delete(x.released, b)
		x.mu.Unlock()
	}()
	for !isDone(b) {
		_, err := b.Stop(x.ctx, "session closed")
		if !errors.Is(err, ErrDetached) {
			if err != nil && !isDone(b) && x.ctx.Err() == nil {
				x.hub.log.Warn("executor: session.stop at release", slog.String("session_id", b.SessionID()),
					slog.String("executor_id", b.ExecutorID()), slog.Any("error", err))
			}
			return
		}
		select {
		case <-wake:
		case <-b.Done():
		case <-x.ctx.Done():
			return
		}
	}
}

// explain turns a call's failure into a baton error whose message tells
// the model what happened.
func (x *Hands) explain(err error, c baton.ExecutorCall) error {
	var pe *proto.Error
	var msg string
	switch {
	case errors.Is(err, ErrNoExecutor):
		msg = fmt.Sprintf("no executor of environment %s serving tool '%s' is connected", c.EnvironmentID, c.Name)
	case errors.Is(err, ErrOverCapacity):
		msg = fmt.Sprintf("every executor of environment %s serving tool '%s' is at capacity; try again later", c.EnvironmentID, c.Name)
	case errors.Is(err, peer.ErrClosed):
		msg = fmt.Sprintf("the executor serving tool '%s' went away", c.Name)
	case errors.Is(err, ErrClosed), errors.Is(err, ErrDraining):
		msg = "the server is shutting down; executor tools are unavailable"
	case errors.Is(err, ErrResumeWindow):
		msg = fmt.Sprintf("the executor running tool '%s' disconnected and did not come back within %s", c.Name, x.hub.window)
	case errors.Is(err, ErrExecutorClosed):
		msg = fmt.Sprintf("the executor running tool '%s' was stopped (executor.close) before the call finished; the call did not complete", c.Name)
	case errors.Is(err, ErrSessionLost):
		msg = fmt.Sprintf("the executor running tool '%s' reconnected without this session; the call was lost", c.Name)
	case errors.Is(err, ErrSessionEnded):
		msg = fmt.Sprintf("the executor ended this session before tool '%s' finished", c.Name)
	case errors.Is(err, ErrToolTimeout):
		msg = fmt.Sprintf("tool '%s' did not finish within %s", c.Name, c.Timeout)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		msg = fmt.Sprintf("the call to tool '%s' was cancelled", c.Name)
	case errors.As(err, &pe):
		msg = fmt.Sprintf("the executor refused tool '%s': %s", c.Name, pe.Message)
	default:
		x.hub.log.Warn("executor: tool call failed", slog.String("session_id", c.SessionID),
			slog.String("tool", c.Name), slog.Any("error", err))
		msg = fmt.Sprintf("tool '%s' failed on its executor", c.Name)
	}
	return &baton.Error{Code: baton.ECodeUnavailable, Message: msg}
}
