package executor

import (
	"context"
	"encoding/json"
	"sync"

	"github.com/baton-engine/baton/executor/proto"
)

// outbox holds the requests that must reach the harness exactly once
// from the executor's side: tool.result, session.ended, session.event,
// interaction.request and interaction.cancel. Each keeps its JSON-RPC id
// for life and stays until the harness answers it. When a connection
// becomes live every held item is re-sent in order before anything new
// (attach runs under the same lock as push).
type outbox struct {
	mu      sync.Mutex
	items   []*outItem
	c       *conn         // the live connection, nil between connections
	live    chan struct{} // closed while c is set
	changed chan struct{} // closed and replaced whenever an item leaves, and on poke
}

type outItem struct {
	id      int64
	method  string
	session string
	msg     []byte
	// reepoch, when set, returns the params for another epoch (restamp).
	reepoch func(epoch int64) any
	// onAck runs once, outside the lock, with the harness's answer.
	onAck func(result json.RawMessage, rerr *RPCError)
}

func newOutbox() *outbox {
	return &outbox{live: make(chan struct{}), changed: make(chan struct{})}
}

// push appends it and sends it now when a connection is live.
func (o *outbox) push(it *outItem) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.items = append(o.items, it)
	if o.c != nil {
		o.sendLocked(o.c, it)
	}
}

func (o *outbox) sendLocked(c *conn, it *outItem) {
	if !c.expect(it.id, func(f *proto.Frame) {
		if f != nil { // nil: the connection went; the item stays for the next one
			o.ack(it, f)
		}
	}) {
		return
	}
	if err := c.write(it.msg); err != nil {
		c.log.Debug("executor: held request not sent", "method", it.method, "err", err)
	}
}

// ack removes an answered item.
func (o *outbox) ack(it *outItem, f *proto.Frame) {
	o.mu.Lock()
	for i, x := range o.items {
		if x == it {
			o.items = append(o.items[:i:i], o.items[i+1:]...)
			o.pokeLocked()
			break
		}
	}
	o.mu.Unlock()
	if it.onAck != nil {
		it.onAck(f.Result, (*RPCError)(f.Error))
	}
}

// attach re-sends every held item on c in order, then makes c live.
func (o *outbox) attach(c *conn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, it := range o.items {
		o.sendLocked(c, it)
	}
	o.c = c
	close(o.live)
}

// restamp re-encodes, with their ids, the held requests of session that
// carry its epoch, for epoch. It runs between a register and attach, so
// none is in flight.
func (o *outbox) restamp(session string, epoch int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, it := range o.items {
		if it.session != session || it.reepoch == nil {
			continue
		}
		if b, err := encodeRequest(it.id, it.method, it.reepoch(epoch)); err == nil {
			it.msg = b
		}
	}
}

// detach ends c's turn as the live connection.
func (o *outbox) detach(c *conn) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.c == c {
		o.c = nil
		o.live = make(chan struct{})
		o.pokeLocked() // waitUntil's checks may look at the live connection
	}
}

// current returns the live connection (nil if none) and a channel
// closed once one is live.
func (o *outbox) current() (*conn, <-chan struct{}) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.c, o.live
}

// held reports how many items wait for an answer.
func (o *outbox) held() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.items)
}

// poke wakes the waiters of waitUntil: something they check changed.
func (o *outbox) poke() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pokeLocked()
}

func (o *outbox) pokeLocked() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// waitUntil blocks until ok reports true, checking it again whenever an
// item leaves or someone pokes, or until ctx ends. ok runs without o.mu;
// whoever changes what it checks pokes afterwards.
func (o *outbox) waitUntil(ctx context.Context, ok func() bool) error {
	for {
		o.mu.Lock()
		ch := o.changed
		o.mu.Unlock()
		if ok() {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// holds reports whether an item of session is held.
func (o *outbox) holds(session string) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, it := range o.items {
		if it.session == session {
			return true
		}
	}
	return false
}

// waitSession blocks until no item of session is held, or ctx ends.
func (o *outbox) waitSession(ctx context.Context, session string) error {
	return o.waitUntil(ctx, func() bool { return !o.holds(session) })
}
