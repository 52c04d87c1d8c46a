package engine_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/engine"
	"github.com/baton-engine/baton/internal/clocktest"
	"github.com/baton-engine/baton/store"
)

// clock is a settable test clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestClientSweep drives the ttl sweeper with an injected clock: a client
// lapses ttl after its last ping, never while a calls stream is open, and
// its stream ends when it is swept.
func TestClientSweep(t *testing.T) {
	ctx := context.Background()
	db, s := storeWithSession(t, store.Options{})
	clk := &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
	e := engine.New(engine.Options{Store: db, Clients: db, ClientSweep: -1, Clock: clocktest.NowFunc(clk.now)})
	defer e.Close()

	c, err := e.RegisterClient(ctx, s.ID, "key_1", &baton.ClientRegistration{Name: "tab", TTLSeconds: 5})
	if err != nil {
		t.Fatal(err)
	}
	live := func() bool {
		cs, err := e.Clients(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		return len(cs) == 1
	}
	sweep := func() {
		if err := e.SweepClients(ctx); err != nil {
			t.Fatal(err)
		}
	}
	clk.add(4 * time.Second)
	sweep()
	if !live() {
		t.Fatal("expired before its ttl")
	}
	if _, err := e.PingClient(ctx, s.ID, c.ID); err != nil {
		t.Fatal(err)
	}
	clk.add(4 * time.Second) // 8 s after registration, 4 s after the ping
	sweep()
	if !live() {
		t.Fatal("a ping did not extend the client")
	}
	feed, err := e.ClientCalls(ctx, s.ID, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	clk.add(time.Minute)
	sweep()
	if !live() {
		t.Fatal("expired while its calls stream was open")
	}
	feed.Close() // counts as a ping at close
	clk.add(4 * time.Second)
	sweep()
	if !live() {
		t.Fatal("expired before ttl after the stream closed")
	}
	clk.add(2 * time.Second)
	sweep()
	if live() {
		t.Fatal("not swept after its ttl")
	}
	if _, err := e.PingClient(ctx, s.ID, c.ID); baton.ErrorCode(err) != baton.ECodeNotFound {
		t.Errorf("ping after expiry: %v", err)
	}
	evs, _ := db.EventsOfType(ctx, s.ID, []string{baton.EventClientExpire})
	if len(evs) != 1 || string(evs[0].Payload) != `{"client_id":"`+c.ID+`","reason":"ttl"}` {
		t.Errorf("expire events %v", evs)
	}
}

// storeWithSession is engine.StoreWithSession (export_test.go).
var storeWithSession = engine.StoreWithSession
