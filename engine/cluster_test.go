package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/baton-engine/baton"
)

// nodeEngine is a second engine on the rig's store, as the node that
// takes a session over from the rig's engine.
func (r *gateRig) nodeEngine() *Engine {
	r.t.Helper()
	e := New(Options{
		Store: stampStore{r.db, r.clk}, Hub: r.e.hub, Clock: r.clk, ClientSweep: -1,
		TurnTimeout: rigTurnTimeout, ProviderTimeout: rigProviderTimeout,
		Registry: r.e.registry, Providers: r.e.providers,
	})
	r.t.Cleanup(func() { e.Close() })
	return e
}

// syncStore commits queued appends before returning, so that what a turn
// queued behind a model call is in the log by the time the call is made.
type syncStore struct{ baton.Store }

func (s syncStore) AppendQueued(ctx context.Context, evs ...*baton.Event) func() error {
	err := s.Append(ctx, evs...)
	return func() error { return err }
}

// errorReasons returns the reasons of the session's session.error events.
func (r *gateRig) errorReasons() (reasons, actors []string) {
	r.t.Helper()
	evs, err := r.db.EventsOfType(r.ctx, r.sid, []string{baton.EventSessionError})
	if err != nil {
		r.t.Fatal(err)
	}
	for _, ev := range evs {
		var p struct{ Reason string }
		_ = json.Unmarshal(ev.Payload, &p)
		reasons = append(reasons, p.Reason)
		actors = append(actors, ev.ClientKeyID)
	}
	return reasons, actors
}

// TestAdoptEndsInterruptedTurn: a node taking over a session whose turn
// was running on the old owner records session.error turn_interrupted,
// attributed to the sender; the session stays open and takes the next
// message on the new node.
func TestAdoptEndsInterruptedTurn(t *testing.T) {
	r := newGateRig(t, func(s *rigSetup) { s.opts.Store = syncStore{s.opts.Store} })
	a := r.keys[0]
	running := r.send(a, "lost", false)
	held := r.call("lost") // the old owner is stuck in the model call, its message committed

	next := r.nodeEngine()
	if err := next.Adopt(r.ctx, r.sid); err != nil {
		t.Fatal(err)
	}
	reasons, actors := r.errorReasons()
	if len(reasons) != 1 || reasons[0] != reasonTurnInterrupted || actors[0] != a.ClientID {
		t.Fatalf("session.error reasons %v by %v; want one turn_interrupted by %s", reasons, actors, a.ClientID)
	}
	if err := next.Adopt(r.ctx, r.sid); err != nil { // adopting again finds nothing running
		t.Fatal(err)
	}
	if reasons, _ := r.errorReasons(); len(reasons) != 1 {
		t.Errorf("a second Adopt recorded again: %v", reasons)
	}
	r.e.Evict(r.sid)
	held.text("too late")
	r.resultOf(running)

	if err := next.RegisterDriver(r.ctx, a); err != nil {
		t.Fatal(err)
	}
	msg, _ := json.Marshal(map[string]any{"role": "user", "content": "again"})
	turn, err := next.SendMessage(r.ctx, a, msg, baton.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.call("again").text("fine")
	if res := r.resultOf(turn); res.Err != nil || !strings.Contains(string(res.Message.Content), "fine") {
		t.Fatalf("turn after takeover: %+v", res)
	}
}

// TestAdoptKeepsPausedTurn: a paused turn is not interrupted; the new
// owner recovers it from the log at once, so its owner's results resume
// it there.
func TestAdoptKeepsPausedTurn(t *testing.T) {
	r := newGateRig(t)
	a := r.keys[0]
	r.pause(a, "toolu_9")
	next := r.nodeEngine()
	if err := next.Adopt(r.ctx, r.sid); err != nil {
		t.Fatal(err)
	}
	if reasons, _ := r.errorReasons(); len(reasons) != 0 {
		t.Fatalf("adopting a paused session recorded %v", reasons)
	}
	next.mu.Lock()
	act := next.actors[r.sid]
	next.mu.Unlock()
	if act == nil {
		t.Fatal("Adopt left no actor")
	}
	act.mu.Lock()
	p := act.parked
	act.mu.Unlock()
	if p == nil || p.owner != a.ClientID {
		t.Fatalf("parked turn after Adopt = %+v; want a's", p)
	}
	r.e.Evict(r.sid)
	if err := next.RegisterDriver(r.ctx, a); err != nil {
		t.Fatal(err)
	}
	msg, _ := json.Marshal(map[string]any{"role": "user", "content": resultsOf("toolu_9", "42")})
	turn, err := next.SendMessage(r.ctx, a, msg, baton.SendOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.call("42").text("answered")
	if res := r.resultOf(turn); res.Err != nil || !strings.Contains(string(res.Message.Content), "answered") {
		t.Fatalf("resumed turn: %+v", res)
	}
}

// TestEvictDropsRuntime: evicting a session fails its queued messages,
// forgets its drivers and actor, and a later request rebuilds the actor
// from the log (the paused turn included).
func TestEvictDropsRuntime(t *testing.T) {
	r := newGateRig(t)
	a, b := r.keys[0], r.keys[1]
	r.pause(a, "toolu_e")
	queued := r.send(b, "waiting", true)
	r.e.Evict(r.sid)
	if res := r.resultOf(queued); res.Err == nil {
		t.Fatal("a queued turn survived the eviction")
	}
	r.e.mu.Lock()
	_, kept := r.e.actors[r.sid]
	r.e.mu.Unlock()
	if kept {
		t.Fatal("the actor survived the eviction")
	}
	if got, _ := r.e.Participants(r.ctx, r.sid); len(got) != 0 {
		t.Errorf("participants after eviction %v; want none (registrations live with the actor)", got)
	}
	if err := r.e.RegisterDriver(r.ctx, a); err != nil {
		t.Fatal(err)
	}
	// The owner's results resume the paused turn, read again from the log.
	msg, _ := json.Marshal(map[string]any{"role": "user", "content": resultsOf("toolu_e", "7")})
	turn, err := r.e.SendMessage(r.ctx, a, msg, baton.SendOptions{})
	if err != nil || turn.Queued {
		t.Fatalf("results after eviction: %v (queued %v)", err, turn != nil && turn.Queued)
	}
	r.call("7").text("resumed")
	r.wantDone(turn, "resumed")
}
