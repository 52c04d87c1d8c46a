package engine

import (
	"context"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/store"
)

// TestClientRegsForgotten: a client's runtime entry goes when the client
// ends, whether or not it ever had one, and lookups after the end (a
// calls stream, a late result) answer as for an ended client without
// bringing an entry back.
func TestClientRegsForgotten(t *testing.T) {
	ctx := context.Background()
	db, s := StoreWithSession(t, store.Options{})
	e := New(Options{Store: db, Clients: db, ClientSweep: -1, MaxClients: 4})
	defer e.Close()
	regs := func() int {
		e.cmu.Lock()
		defer e.cmu.Unlock()
		return len(e.regs)
	}
	for i := range 50 {
		c, err := e.RegisterClient(ctx, s.ID, "key_1", &baton.ClientRegistration{Name: "tab"})
		if err != nil {
			t.Fatal(err)
		}
		if i%2 == 0 { // half of them had a calls stream, hence an entry
			feed, err := e.ClientCalls(ctx, s.ID, c.ID)
			if err != nil {
				t.Fatal(err)
			}
			feed.Close()
			if regs() != 1 {
				t.Fatalf("%d entries with one stream opened", regs())
			}
		}
		if _, err := e.ClientResult(ctx, s.ID, c.ID, "call_nope", baton.ClientResult{}); baton.ErrorCode(err) != baton.ECodeNotFound {
			t.Fatalf("result for an unknown call of a live client: %v", err)
		}
		if err := e.DeleteClient(ctx, s.ID, c.ID, "key_1"); err != nil {
			t.Fatal(err)
		}
		if _, err := e.ClientCalls(ctx, s.ID, c.ID); baton.ErrorCode(err) != baton.ECodeNotFound {
			t.Fatalf("calls stream of a deleted client: %v", err)
		}
		if ok, err := e.ClientResult(ctx, s.ID, c.ID, "call_late", baton.ClientResult{}); ok || err != nil {
			t.Fatalf("late result for a deleted client = %v, %v; want not accepted", ok, err)
		}
		if n := regs(); n != 0 {
			t.Fatalf("after %d deleted clients e.regs holds %d entries", i+1, n)
		}
	}
}
