package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/baton-engine/baton/executor/proto"
)

// conn is one registered WebSocket connection to the harness. Its
// reader, heartbeat and token refresher live as long as it does; the
// run loop owns it and tears it down.
type conn struct {
	e      *Executor
	ws     *websocket.Conn
	log    *slog.Logger
	ctx    context.Context // cancelled at teardown; closes ws
	cancel context.CancelFunc
	read   chan error     // the reader's terminal error
	wg     sync.WaitGroup // heartbeat and refresher

	mu       sync.Mutex
	pending  map[int64]func(*proto.Frame) // nil frame: the connection is gone
	down     bool
	notified *proto.Reason // executor.close received
	draining bool          // executor.drain or heartbeat drain:true seen
}

func newConn(e *Executor, ws *websocket.Conn) *conn {
	ctx, cancel := context.WithCancel(e.life)
	return &conn{
		e: e, ws: ws, log: e.log, ctx: ctx, cancel: cancel,
		read:    make(chan error, 1),
		pending: make(map[int64]func(*proto.Frame)),
	}
}

// write sends one message, bounded by WriteTimeout. A failed write
// tears the connection down (the reader then returns).
func (c *conn) write(b []byte) error {
	ctx, cancel := context.WithTimeout(c.ctx, c.e.cfg.WriteTimeout)
	defer cancel()
	if err := c.ws.Write(ctx, websocket.MessageText, b); err != nil {
		c.cancel()
		return fmt.Errorf("%w: %v", ErrDisconnected, err)
	}
	return nil
}

// expect registers fn for the response to id; it reports false when the
// connection is already gone.
func (c *conn) expect(id int64, fn func(*proto.Frame)) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.down {
		return false
	}
	c.pending[id] = fn
	return true
}

func (c *conn) forget(id int64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// resolve hands a response to whoever waits for it.
func (c *conn) resolve(f *proto.Frame) {
	id, ok := numericID(f)
	if !ok {
		c.log.Debug("executor: response with a foreign id", "id", string(f.ID))
		return
	}
	c.mu.Lock()
	fn := c.pending[id]
	delete(c.pending, id)
	c.mu.Unlock()
	if fn == nil {
		c.log.Debug("executor: response to no pending request", "id", id)
		return
	}
	fn(f)
}

// call sends a request on this connection and waits for its answer. It
// returns ErrDisconnected if the connection goes first, an *RPCError for
// an error answer, and ctx's error when ctx ends first.
func (c *conn) call(ctx context.Context, method string, params any) (json.RawMessage, error) {
	id := c.e.nextID()
	b, err := encodeRequest(id, method, params)
	if err != nil {
		return nil, err
	}
	ch := make(chan *proto.Frame, 1)
	if !c.expect(id, func(f *proto.Frame) { ch <- f }) {
		return nil, ErrDisconnected
	}
	if err := c.write(b); err != nil {
		c.forget(id)
		return nil, err
	}
	select {
	case f := <-ch:
		if f == nil {
			return nil, ErrDisconnected
		}
		if f.Error != nil {
			return nil, (*RPCError)(f.Error)
		}
		return f.Result, nil
	case <-ctx.Done():
		c.forget(id)
		return nil, ctx.Err()
	}
}

// notify sends a notification.
func (c *conn) notify(method string, params any) error {
	b, err := encodeRequest(0, method, params)
	if err != nil {
		return err
	}
	return c.write(b)
}

// reply answers a harness request.
func (c *conn) reply(id json.RawMessage, result any, rerr *RPCError) {
	b, err := encodeResponse(id, result, rerr)
	if err != nil {
		c.log.Error("executor: encode response", "err", err)
		b, _ = encodeResponse(id, nil, rpcErr(CodeInternal, "internal error", nil))
	}
	if err := c.write(b); err != nil {
		c.log.Debug("executor: reply not sent", "err", err)
	}
}

// readLoop reads frames until the connection ends and reports why on
// c.read. Requests and notifications go to the executor's dispatcher.
func (c *conn) readLoop() {
	for {
		typ, b, err := c.ws.Read(c.ctx)
		if err != nil {
			c.read <- err
			return
		}
		if typ != websocket.MessageText {
			c.log.Debug("executor: binary message ignored")
			continue
		}
		f, perr := proto.DecodeLoose(b)
		if perr != nil {
			c.log.Warn("executor: malformed frame from the harness", "err", perr.Message)
			var id json.RawMessage // the id of a malformed request, so that the answer reaches its caller
			if f != nil {
				id = f.ID
			}
			c.reply(id, nil, (*RPCError)(perr))
			continue
		}
		if f.Kind() == proto.KindResponse {
			c.resolve(f)
			continue
		}
		c.e.dispatch(c, f)
	}
}

// teardown fails every pending call and stops the connection's
// goroutines. The reader must have returned.
func (c *conn) teardown() {
	c.cancel()
	c.mu.Lock()
	c.down = true
	pending := c.pending
	c.pending = nil
	c.mu.Unlock()
	for _, fn := range pending {
		fn(nil)
	}
	c.wg.Wait()
	_ = c.ws.CloseNow()
}

func (c *conn) setNotified(p proto.Reason) {
	c.mu.Lock()
	c.notified = &p
	c.mu.Unlock()
}

func (c *conn) closeNotice() *proto.Reason {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.notified
}

// drain marks the connection draining: no new sessions until the next
// connection.
func (c *conn) drain() (first bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	first = !c.draining
	c.draining = true
	return first
}

func (c *conn) isDraining() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.draining
}

// heartbeat refreshes the lease every interval until the connection
// ends, and drains on drain:true.
func (c *conn) heartbeat(interval time.Duration) {
	defer c.wg.Done()
	t := time.NewTicker(interval)
	defer t.Stop()
	wait := max(interval, c.e.cfg.WriteTimeout)
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(c.ctx, wait)
		raw, err := c.call(ctx, proto.MethodHeartbeat, c.e.heartbeatParams())
		cancel()
		if err != nil {
			if c.ctx.Err() == nil {
				c.log.Warn("executor: heartbeat failed", "err", err)
			}
			continue
		}
		var res proto.HeartbeatResult
		if err := json.Unmarshal(raw, &res); err != nil {
			c.log.Warn("executor: heartbeat answer", "err", err)
			continue
		}
		if res.Drain && c.drain() {
			c.log.Info("executor: draining (heartbeat)")
		}
	}
}

// refresher fetches a fresh executor token before exp and moves the
// connection's deadline with executor.token.refresh. A harness without
// the method (-32601) makes it stop; the connection then ends with 4001
// and the run loop reconnects.
func (c *conn) refresher(exp time.Time) {
	defer c.wg.Done()
	cfg := &c.e.cfg
	var failed bool
	for {
		d := refreshDelay(time.Now(), exp, cfg.RefreshBefore)
		if failed {
			d = max(d, cfg.ReconnectMin)
		}
		t := time.NewTimer(d)
		select {
		case <-c.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		next, err := c.refresh()
		var rerr *RPCError
		var herr *HTTPError
		switch {
		case errors.As(err, &rerr) && rerr.Code == CodeMethodNotFound:
			c.log.Info("executor: harness has no executor.token.refresh; reconnecting at expiry")
			return
		case errors.As(err, &herr) && herr.permanent():
			c.log.Error("executor: credential refused; the connection ends at token expiry", "err", err)
			return
		case err != nil:
			if c.ctx.Err() != nil {
				return
			}
			c.log.Warn("executor: token refresh failed", "err", err)
			failed = true
			continue
		}
		failed = false
		exp = next
	}
}

// refresh fetches a token and sends it; it returns the new deadline.
func (c *conn) refresh() (time.Time, error) {
	tok, err := c.e.exchange(c.ctx)
	if err != nil {
		return time.Time{}, err
	}
	ctx, cancel := context.WithTimeout(c.ctx, c.e.cfg.WriteTimeout)
	defer cancel()
	raw, err := c.call(ctx, proto.MethodTokenRefresh, proto.TokenRefreshParams{Token: tok.Value})
	if err != nil {
		return time.Time{}, err
	}
	var res proto.TokenRefreshResult
	if err := json.Unmarshal(raw, &res); err != nil {
		return time.Time{}, fmt.Errorf("executor.token.refresh answer: %w", err)
	}
	if res.ExpiresAt.IsZero() {
		res.ExpiresAt = tok.ExpiresAt
	}
	c.log.Debug("executor: token refreshed", "expires_at", res.ExpiresAt)
	return res.ExpiresAt, nil
}
