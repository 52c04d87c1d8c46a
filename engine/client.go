package engine

import (
	"context"
	"sync"
	"time"

	"github.com/baton-engine/baton"
)

// Registered session clients (docs/api.md, registered session clients): the durable part lives in
// the ClientStore; this file keeps each client's runtime — its unanswered
// calls and open calls streams — and implements baton.ClientService.

var _ baton.ClientService = (*Engine)(nil)

// maxDone bounds how many finished call ids a client remembers, so a late
// second result gets {"accepted":false} rather than 404.
const maxDone = 4096

// regClient is one registered client's runtime.
type regClient struct {
	mu      sync.Mutex
	queue   []*pendingCall // unanswered calls, oldest first
	done    map[string]bool
	streams int
	wake    chan struct{} // closed and replaced whenever queue grows
	gone    chan struct{} // closed once the client expires or is deleted
	isGone  bool
}

// pendingCall is one call waiting for its client's result.
type pendingCall struct {
	call  baton.ClientCall
	res   chan baton.ClientResult // buffered: the first result lands here
	saved chan error              // buffered: the result's events were committed (or not)
}

// reg returns the runtime of client id, creating it on first use. The
// entry lives until the client ends (ended), or until a caller that found
// the client not live lets go of it (release).
func (e *Engine) reg(id string) *regClient {
	e.cmu.Lock()
	defer e.cmu.Unlock()
	rc := e.regs[id]
	if rc == nil {
		rc = &regClient{done: map[string]bool{}, wake: make(chan struct{}), gone: make(chan struct{})}
		e.regs[id] = rc
	}
	return rc
}

// streaming reports whether client id has an open calls stream here.
func (e *Engine) streaming(id string) bool {
	rc := e.regOf(id)
	if rc == nil {
		return false
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.streams > 0
}

// add queues pc unless the client is gone.
func (rc *regClient) add(pc *pendingCall) bool {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.isGone {
		return false
	}
	rc.queue = append(rc.queue, pc)
	close(rc.wake)
	rc.wake = make(chan struct{})
	return true
}

// take removes call id from the queue and remembers it as finished; false
// when it was not waiting.
func (rc *regClient) take(id string) (*pendingCall, bool) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for i, pc := range rc.queue {
		if pc.call.CallID == id {
			rc.queue = append(rc.queue[:i:i], rc.queue[i+1:]...)
			if len(rc.done) >= maxDone {
				rc.done = map[string]bool{}
			}
			rc.done[id] = true
			return pc, true
		}
	}
	return nil, false
}

// end marks the client gone: its streams end and its waiting calls fail.
func (rc *regClient) end() {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if !rc.isGone {
		rc.isGone = true
		close(rc.gone)
	}
}

// ended is called after a client was marked gone in the store: its
// runtime ends and is forgotten. A lookup after this finds the client gone
// in the store first, so it never needs the entry again.
func (e *Engine) ended(id string) {
	e.cmu.Lock()
	rc := e.regs[id]
	delete(e.regs, id)
	e.cmu.Unlock()
	if rc != nil {
		rc.end()
	}
}

// release forgets rc, which a caller took with reg and then found its
// client not live (it ended meanwhile, or lapsed), unless rc is in use:
// a calls stream is open or a call waits. A released entry is gone, so a
// call racing to add itself fails as for an ended client.
func (e *Engine) release(id string, rc *regClient) {
	e.cmu.Lock()
	defer e.cmu.Unlock()
	if e.regs[id] != rc {
		return
	}
	rc.mu.Lock()
	idle := rc.streams == 0 && len(rc.queue) == 0
	rc.mu.Unlock()
	if idle {
		delete(e.regs, id)
		rc.end()
	}
}

// regOf returns the runtime of client id, or nil when it has none.
func (e *Engine) regOf(id string) *regClient {
	e.cmu.Lock()
	defer e.cmu.Unlock()
	return e.regs[id]
}

// RegisterClient registers a client on an open session.
func (e *Engine) RegisterClient(ctx context.Context, sessionID, actor string, reg *baton.ClientRegistration) (*baton.RegisteredClient, error) {
	c := &baton.RegisteredClient{
		SessionID: sessionID, RequestedName: reg.Name, Tools: reg.Tools, TTLSeconds: reg.TTLSeconds,
		CreatedAt: e.clock(),
	}
	err := e.clients.CreateClient(ctx, c, e.maxClients, func(c *baton.RegisteredClient) *baton.Event {
		lifetime := map[string]any{"type": "never"}
		var exp any
		if c.TTLSeconds > 0 {
			lifetime = map[string]any{"type": "ttl", "data": map[string]any{"seconds": c.TTLSeconds}}
			exp = baton.FormatTime(*c.ExpiresAt)
		}
		return baton.NewEvent(sessionID, actor, baton.EventClientRegister, map[string]any{
			"client_id": c.ID, "name": c.Name, "requested_name": c.RequestedName,
			"tools": c.ToolNames(), "lifetime": lifetime, "expires_at": exp,
		})
	})
	e.dropClients(sessionID)
	if err != nil {
		return nil, err
	}
	e.log.Info("client registered", "session_id", sessionID, "client_id", c.ID, "name", c.Name)
	return c, nil
}

// Clients lists the session's live clients. Turns ask before every model
// call, so the list is cached per session; every change to a client goes
// through the engine, which drops the cached list.
func (e *Engine) Clients(ctx context.Context, sessionID string) ([]*baton.RegisteredClient, error) {
	e.ccMu.Lock()
	ent := e.cc[sessionID]
	if ent == nil {
		ent = &clientList{}
		e.cc[sessionID] = ent
	}
	all, ok, gen := ent.list, ent.ok, ent.gen
	e.ccMu.Unlock()
	if !ok {
		var err error
		if all, err = e.clients.LiveClients(ctx, sessionID); err != nil {
			return nil, err
		}
		e.ccMu.Lock()
		if ent.gen == gen { // no change raced the read
			ent.list, ent.ok = all, true
		}
		e.ccMu.Unlock()
	}
	now := e.clock()
	out := make([]*baton.RegisteredClient, 0, len(all))
	for _, c := range all {
		if c.Live(now) {
			out = append(out, c)
		}
	}
	return out, nil
}

// liveClientOf reports whether clientID is a live client of the session,
// by the cached list.
func (e *Engine) liveClientOf(ctx context.Context, sessionID, clientID string) bool {
	live, err := e.Clients(ctx, sessionID)
	if err != nil {
		return false
	}
	for _, c := range live {
		if c.ID == clientID {
			return true
		}
	}
	return false
}

// clientList is a session's cached live clients.
type clientList struct {
	list []*baton.RegisteredClient
	ok   bool
	gen  uint64 // bumped by every change
}

// dropClients forgets a session's cached client list after a change.
func (e *Engine) dropClients(sessionID string) {
	e.ccMu.Lock()
	if ent := e.cc[sessionID]; ent != nil {
		ent.list, ent.ok = nil, false
		ent.gen++
	}
	e.ccMu.Unlock()
}

// PingClient extends a live client; an expired one is not found even
// before the sweeper ends it.
func (e *Engine) PingClient(ctx context.Context, sessionID, clientID string) (*baton.RegisteredClient, error) {
	now := e.clock()
	c, err := e.clients.Client(ctx, sessionID, clientID)
	if err != nil {
		return nil, err
	}
	if !c.Live(now) && !e.streaming(clientID) {
		return nil, baton.Errorf(baton.ECodeNotFound, "no client %s", clientID)
	}
	defer e.dropClients(sessionID)
	return e.clients.PingClient(ctx, sessionID, clientID, now)
}

// ReplaceClientTools replaces a live client's tools; the next model call
// sees them.
func (e *Engine) ReplaceClientTools(ctx context.Context, sessionID, clientID, actor string, tools []baton.ClientTool) error {
	names := make([]string, len(tools))
	for i, t := range tools {
		names[i] = t.Name
	}
	ev := baton.NewEvent(sessionID, actor, baton.EventClientTools, map[string]any{"client_id": clientID, "tools": names})
	defer e.dropClients(sessionID)
	return e.clients.SetRegisteredTools(ctx, sessionID, clientID, tools, e.clock(), ev)
}

// DeleteClient removes a client at once; its pending calls fail.
func (e *Engine) DeleteClient(ctx context.Context, sessionID, clientID, actor string) error {
	return e.endClient(ctx, sessionID, clientID, actor, baton.ClientGoneDeleted)
}

func (e *Engine) endClient(ctx context.Context, sessionID, clientID, actor, reason string) error {
	ev := baton.NewEvent(sessionID, actor, baton.EventClientExpire, map[string]any{"client_id": clientID, "reason": reason})
	ok, err := e.clients.EndClient(ctx, sessionID, clientID, reason, e.clock(), ev)
	e.dropClients(sessionID)
	if err != nil {
		return err
	}
	e.ended(clientID)
	if !ok {
		return baton.Errorf(baton.ECodeNotFound, "no client %s", clientID)
	}
	e.log.Info("client ended", "session_id", sessionID, "client_id", clientID, "reason", reason)
	return nil
}

// endClients ends every live registered client of a session that closed:
// their calls streams end and their pending calls fail at once.
func (e *Engine) endClients(ctx context.Context, sessionID, actor string) {
	if e.clients == nil {
		return
	}
	live, err := e.clients.LiveClients(ctx, sessionID)
	if err != nil {
		e.log.Warn("list clients at close", "session_id", sessionID, "err", err)
		return
	}
	for _, c := range live {
		if err := e.endClient(ctx, sessionID, c.ID, actor, baton.ClientGoneClosed); err != nil && baton.ErrorCode(err) != baton.ECodeNotFound {
			e.log.Warn("end client at close", "session_id", sessionID, "client_id", c.ID, "err", err)
		}
	}
}

// ClientCalls opens a calls stream. Opening counts as a ping; while it is
// open the sweeper keeps the client alive; closing it pings again.
func (e *Engine) ClientCalls(ctx context.Context, sessionID, clientID string) (*baton.CallFeed, error) {
	if _, err := e.PingClient(ctx, sessionID, clientID); err != nil {
		return nil, err
	}
	rc := e.reg(clientID)
	rc.mu.Lock()
	rc.streams++
	rc.mu.Unlock()
	// A client that ended after the ping may have left no entry to end
	// this stream with: check again now that the stream is counted.
	if !e.liveClientOf(ctx, sessionID, clientID) {
		rc.mu.Lock()
		rc.streams--
		rc.mu.Unlock()
		e.release(clientID, rc)
		return nil, baton.Errorf(baton.ECodeNotFound, "no client %s", clientID)
	}
	sent := map[string]bool{}
	var once sync.Once
	next := func(ctx context.Context) (*baton.ClientCall, error) {
		for {
			rc.mu.Lock()
			if rc.isGone {
				rc.mu.Unlock()
				return nil, nil
			}
			for _, pc := range rc.queue {
				if !sent[pc.call.CallID] {
					sent[pc.call.CallID] = true
					c := pc.call
					rc.mu.Unlock()
					return &c, nil
				}
			}
			wake := rc.wake
			rc.mu.Unlock()
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-e.stopping:
				return nil, nil
			case <-rc.gone:
			case <-wake:
			}
		}
	}
	closeFn := func() {
		once.Do(func() {
			rc.mu.Lock()
			rc.streams--
			gone := rc.isGone
			rc.mu.Unlock()
			if !gone {
				_, _ = e.clients.PingClient(e.ctx, sessionID, clientID, e.clock())
				e.dropClients(sessionID)
			}
		})
	}
	return &baton.CallFeed{Next: next, Close: closeFn}, nil
}

// ClientResult delivers a call's result; only the first one counts.
func (e *Engine) ClientResult(ctx context.Context, sessionID, clientID, callID string, r baton.ClientResult) (bool, error) {
	// A live client of this session is known from the cached list; any
	// other is looked up (gone clients still answer, unknown ones are 404).
	live := e.liveClientOf(ctx, sessionID, clientID)
	if !live {
		if _, err := e.clients.Client(ctx, sessionID, clientID); err != nil {
			return false, err
		}
	}
	rc := e.regOf(clientID)
	if rc == nil { // no call of it waits here
		if !live {
			return false, nil // ended: its calls are over, no result counts
		}
		return false, baton.Errorf(baton.ECodeNotFound, "no call %s", callID)
	}
	pc, ok := rc.take(callID)
	if !ok {
		rc.mu.Lock()
		known := rc.done[callID]
		rc.mu.Unlock()
		if known {
			return false, nil
		}
		return false, baton.Errorf(baton.ECodeNotFound, "no call %s", callID)
	}
	pc.res <- r
	// The result is acknowledged only once it is durable: the turn queues
	// its commit as soon as it takes it, whatever the other calls of the
	// model message are doing.
	select {
	case err := <-pc.saved:
		if err != nil {
			return false, err
		}
		return true, nil
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// SweepClients ends every ttl client whose expiry has passed, except those
// with an open calls stream here, which count as pinged. It is what the
// sweeper runs; tests call it directly.
func (e *Engine) SweepClients(ctx context.Context) error {
	now := e.clock()
	due, err := e.clients.DueClients(ctx, now)
	if err != nil {
		return err
	}
	for _, c := range due {
		if e.streaming(c.ID) {
			_, err := e.clients.PingClient(ctx, c.SessionID, c.ID, now)
			e.dropClients(c.SessionID)
			if err != nil && baton.ErrorCode(err) != baton.ECodeNotFound {
				return err
			}
			continue
		}
		err := e.endClient(ctx, c.SessionID, c.ID, "", baton.ClientGoneTTL)
		switch baton.ErrorCode(err) {
		case "", baton.ECodeNotFound:
		case baton.ECodeLeaseLost: // another node owns the session and sweeps it
		default:
			return err
		}
	}
	return nil
}

// sweep runs SweepClients every interval until ctx ends.
// Like a ticker, the next wait starts when a sweep is due, not when it
// is done.
func (e *Engine) sweep(ctx context.Context, every time.Duration) {
	fired, stop := e.after(every)
	for {
		select {
		case <-ctx.Done():
			stop()
			return
		case <-fired:
			fired, stop = e.after(every)
			if err := e.SweepClients(ctx); err != nil && ctx.Err() == nil {
				e.log.Warn("client sweep", "err", err)
			}
		}
	}
}

// clock is the engine's time for client lifetimes, at store precision.
func (e *Engine) clock() time.Time { return e.now().UTC().Truncate(time.Millisecond) }
