package engine_test

import (
	"context"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/engine"
	"github.com/baton-engine/baton/hub"
	"github.com/baton-engine/baton/store"
)

// feedEngine returns an engine whose store publishes every commit to its
// hub, and a session in that store.
func feedEngine(t *testing.T) (*engine.Engine, *store.DB, *baton.Session) {
	t.Helper()
	return feedEngineWith(t, engine.Options{})
}

// feedEngineWith is feedEngine with more options.
func feedEngineWith(t *testing.T, opts engine.Options) (*engine.Engine, *store.DB, *baton.Session) {
	t.Helper()
	feed := hub.New(0)
	db, s := storeWithSession(t, store.Options{OnCommit: func(evs []*baton.Event) {
		for _, ev := range evs {
			feed.Publish(baton.Notice{Event: ev})
		}
	}})
	opts.Store, opts.Hub, opts.ClientSweep = db, feed, -1
	e := engine.New(opts)
	t.Cleanup(func() { e.Close() })
	return e, db, s
}

// TestSubscribePoll: Poll hands out replayed and already-published events
// without waiting, says when nothing is ready, and leaves the end of the
// feed for Next to report.
func TestSubscribePoll(t *testing.T) {
	ctx := context.Background()
	e, db, s := feedEngine(t)
	add := func(typ string) *baton.Event {
		ev := baton.NewEvent(s.ID, "key_1", typ, struct{}{})
		if err := db.Append(ctx, ev); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	first := add("a.first")
	add("a.second")
	add("a.third")

	f, err := e.Subscribe(ctx, &baton.Key{Name: s.ID, ClientID: "key_1"}, first.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n, err := f.Next(ctx)
	if err != nil || n == nil || n.Event.Type != "a.second" {
		t.Fatalf("Next = %v, %v; want the replayed a.second", n, err)
	}
	if n, ok := f.Poll(); !ok || n.Event.Type != "a.third" {
		t.Fatalf("Poll = %v, %v; want the replayed a.third", n, ok)
	}
	if n, ok := f.Poll(); ok {
		t.Fatalf("Poll = %v with nothing ready", n.Event.Type)
	}
	add("b.live") // committed and published before Append returns
	if n, ok := f.Poll(); !ok || n.Event.Type != "b.live" {
		t.Fatalf("Poll = %v, %v; want the live b.live", n, ok)
	}
	if err := e.Unsubscribe(ctx, &baton.Key{Name: s.ID, ClientID: "key_1"}); err != nil {
		t.Fatal(err)
	}
	if n, ok := f.Poll(); ok {
		t.Fatalf("Poll after the feed ended = %v", n.Event.Type)
	}
	if n, err := f.Next(ctx); n != nil || err != nil {
		t.Fatalf("Next after unsubscribe = %v, %v; want the end", n, err)
	}
}

// TestSubscribeErrorSessionStaysLive: a session in state error still takes
// events (local sandbox reports, say), so a subscription started on it
// replays and then stays live like one on an open session; only a closed
// session's feed ends after the replay, reported as closed.
func TestSubscribeErrorSessionStaysLive(t *testing.T) {
	ctx := context.Background()
	e, db, s := feedEngine(t)
	key := &baton.Key{Name: s.ID, ClientID: "key_1"}
	first := baton.NewEvent(s.ID, "key_1", "a.first", struct{}{})
	if err := db.Append(ctx, first); err != nil {
		t.Fatal(err)
	}
	if ok, err := db.EndSession(ctx, s.ID, baton.StateError, baton.NewEvent(s.ID, "key_1", baton.EventSessionError, struct{}{})); err != nil || !ok {
		t.Fatalf("EndSession = %v, %v", ok, err)
	}

	f, err := e.Subscribe(ctx, key, first.ID, false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, err := f.Next(ctx); err != nil || n == nil || n.Event.Type != baton.EventSessionError {
		t.Fatalf("Next = %v, %v; want the replayed session.error", n, err)
	}
	if n, ok := f.Poll(); ok {
		t.Fatalf("Poll = %v after the replay, want nothing ready (still live)", n)
	}
	late := baton.NewEvent(s.ID, "key_1", "session.sandbox.running", struct{}{})
	if err := db.Append(ctx, late); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Next(ctx); err != nil || n == nil || n.Event.ID != late.ID {
		t.Fatalf("Next = %v, %v; want the live event appended to the error session", n, err)
	}
	if err := e.Unsubscribe(ctx, key); err != nil {
		t.Fatal(err)
	}
	if n, err := f.Next(ctx); n != nil || err != nil || f.Closed() {
		t.Fatalf("Next after unsubscribe = %v, %v, closed %v; want the end, not closed", n, err, f.Closed())
	}

	// Closing the error session (it stays error) ends its feeds as closed.
	if f, err = e.Subscribe(ctx, key, "", false); err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := e.CloseSession(ctx, key); baton.ErrorCode(err) != baton.ECodeSessionClosed {
		t.Fatalf("CloseSession on an error session = %v, want %s", err, baton.ECodeSessionClosed)
	}
	if n, err := f.Next(ctx); n != nil || err != nil || !f.Closed() {
		t.Fatalf("Next after the close = %v, %v, closed %v; want the end, closed", n, err, f.Closed())
	}

	// A closed session: the replay, then the end, reported as closed.
	c := &baton.Session{ProfileID: s.ProfileID, ClientKeyID: "key_1"}
	if err := db.CreateSession(ctx, c, nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := db.EndSession(ctx, c.ID, baton.StateClosed, baton.NewEvent(c.ID, "key_1", baton.EventSessionClose, struct{}{})); err != nil || !ok {
		t.Fatalf("EndSession = %v, %v", ok, err)
	}
	f, err = e.Subscribe(ctx, &baton.Key{Name: c.ID, ClientID: "key_1"}, "evt_unknown", false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, err := f.Next(ctx); err != nil || n == nil || n.Event.Type != baton.EventSessionClose {
		t.Fatalf("Next = %v, %v; want the replayed session.close", n, err)
	}
	if n, err := f.Next(ctx); n != nil || err != nil || !f.Closed() {
		t.Fatalf("Next = %v, %v, closed %v; want the end of a closed session's feed", n, err, f.Closed())
	}
}

// TestSubscribeRing: on a node that does not write the session (a
// cluster's other node), commits reach a feed as rings: the feed reads
// what it has not seen from the log, once, in order, and ends after the
// session.close it reads there.
func TestSubscribeRing(t *testing.T) {
	ctx := context.Background()
	rings := hub.New(0)
	db, s := storeWithSession(t, store.Options{}) // commits reach no hub here
	e := engine.New(engine.Options{Store: db, Hub: rings, ClientSweep: -1})
	t.Cleanup(func() { e.Close() })
	before := baton.NewEvent(s.ID, "key_1", "a.before", struct{}{})
	if err := db.Append(ctx, before); err != nil {
		t.Fatal(err)
	}
	f, err := e.Subscribe(ctx, &baton.Key{Name: s.ID, ClientID: "key_1"}, "", false)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if n, ok := f.Poll(); ok { // caught up with the log: nothing after the start
		t.Fatalf("Poll at the start = %v", n.Event.Type)
	}
	one, two := baton.NewEvent(s.ID, "key_1", "b.one", struct{}{}), baton.NewEvent(s.ID, "key_1", "b.two", struct{}{})
	if err := db.Append(ctx, one, two); err != nil {
		t.Fatal(err)
	}
	if n, ok := f.Poll(); ok {
		t.Fatalf("Poll before any ring = %v", n.Event.Type)
	}
	rings.Ring(s.ID, 3)
	rings.Ring(s.ID, 3) // a repeated doorbell reads nothing twice
	for _, want := range []string{"b.one", "b.two"} {
		if n, err := f.Next(ctx); err != nil || n == nil || n.Event.Type != want {
			t.Fatalf("Next = %v, %v; want %s from the log", n, err, want)
		}
	}
	if n, ok := f.Poll(); ok {
		t.Fatalf("Poll after the rung events = %v, want nothing (before the subscription is not replayed)", n.Event.Type)
	}
	if ok, err := db.EndSession(ctx, s.ID, baton.StateClosed, baton.NewEvent(s.ID, "key_1", baton.EventSessionClose, struct{}{})); err != nil || !ok {
		t.Fatalf("EndSession = %v, %v", ok, err)
	}
	rings.Ring(s.ID, 4)
	if n, err := f.Next(ctx); err != nil || n == nil || n.Event.Type != baton.EventSessionClose {
		t.Fatalf("Next = %v, %v; want the session.close", n, err)
	}
	if n, err := f.Next(ctx); n != nil || err != nil || !f.Closed() {
		t.Fatalf("after the close: %v, %v, closed %v; want the end, closed", n, err, f.Closed())
	}
}
