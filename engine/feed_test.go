package engine_test

import (
	"context"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/engine"
	"github.com/baton-engine/baton/hub"
	"github.com/baton-engine/baton/store"
)

// TestSubscribePoll: Poll hands out replayed and already-published events
// without waiting, says when nothing is ready, and leaves the end of the
// feed for Next to report.
func TestSubscribePoll(t *testing.T) {
	ctx := context.Background()
	feed := hub.New(0)
	db, s := storeWithSession(t, store.Options{OnCommit: func(evs []*baton.Event) {
		for _, ev := range evs {
			feed.Publish(baton.Notice{Event: ev})
		}
	}})
	e := engine.New(engine.Options{Store: db, Hub: feed, ClientSweep: -1})
	defer e.Close()
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
