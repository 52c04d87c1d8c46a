package engine_test

import (
	"context"
	"encoding/json"
	"testing"

	"go.uber.org/goleak"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/engine"
	"github.com/baton-engine/baton/hub"
	"github.com/baton-engine/baton/store"
	"github.com/baton-engine/baton/wire"
)

// gatedProvider holds every call until the test lets one through.
type gatedProvider struct {
	entered chan struct{} // one send per call that started
	release chan struct{} // one receive per call let through
}

func (g *gatedProvider) Call(ctx context.Context, _ *baton.ProviderEntry, _ string, _ *baton.ProviderRequest) (*baton.ProviderResponse, error) {
	g.entered <- struct{}{}
	select {
	case <-g.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return &baton.ProviderResponse{Content: json.RawMessage(`[{"type":"text","text":"ok"}]`)}, nil
}

// wantCapError checks err is the refusal of a full session: -32000 on the
// wire with msg.
func wantCapError(t *testing.T, err error, msg string) {
	t.Helper()
	if baton.ErrorCode(err) != baton.ECodeTooManyRequests {
		t.Fatalf("err = %v; want %s", err, baton.ECodeTooManyRequests)
	}
	w := wire.FromError(err)
	if w.Code != wire.CodeServer || w.Message != msg {
		t.Fatalf("wire error %+v; want %d %q", w, wire.CodeServer, msg)
	}
}

// TestSendMessageQueueCap: with a turn held running, sendMessage queues up
// to the cap and is refused past it; once a turn finishes a slot frees up,
// and every admitted turn runs.
func TestSendMessageQueueCap(t *testing.T) {
	t.Cleanup(func() { goleak.VerifyNone(t) }) // runs last
	ctx := context.Background()
	db, _ := storeWithSession(t, store.Options{})
	p := &baton.Profile{Name: "gated", PrimaryProvider: "script"}
	if err := db.CreateProfile(ctx, p); err != nil {
		t.Fatal(err)
	}
	ck, _ := baton.MintKey(baton.RoleClient, "c", p.ID, "")
	if err := db.CreateKey(ctx, ck); err != nil {
		t.Fatal(err)
	}
	g := &gatedProvider{entered: make(chan struct{}, 8), release: make(chan struct{})}
	e := engine.New(engine.Options{Store: db, Hub: hub.New(0), ClientSweep: -1, MaxQueuedTurns: 2,
		Registry:  &baton.Registry{Providers: []baton.ProviderEntry{{Name: "script", Provider: baton.ProviderScripted, Model: "s", MaxTokens: 100}}},
		Providers: map[string]baton.Provider{baton.ProviderScripted: g}})
	t.Cleanup(func() { e.Close() })
	res, err := e.Open(ctx, ck, &baton.OpenRequest{})
	if err != nil {
		t.Fatal(err)
	}
	key := &baton.Key{Name: res.SessionID, ClientID: ck.ID, Role: baton.RoleSession, ProfileID: p.ID}
	if err := e.RegisterDriver(ctx, key); err != nil {
		t.Fatal(err)
	}
	send := func() (*baton.Turn, error) {
		return e.SendMessage(ctx, key, json.RawMessage(`{"role":"user","content":"hi"}`), baton.SendOptions{})
	}
	var turns []*baton.Turn
	mustSend := func(queued bool) {
		t.Helper()
		turn, err := send()
		if err != nil {
			t.Fatal(err)
		}
		if turn.Queued != queued {
			t.Fatalf("Queued = %v; want %v", turn.Queued, queued)
		}
		turns = append(turns, turn)
	}
	mustSend(false)
	got(t, g.entered) // the first turn holds the gate
	mustSend(true)
	mustSend(true)
	const full = "session has 2 queued messages; wait for a turn to finish"
	for range 3 {
		_, err := send()
		wantCapError(t, err, full)
	}
	g.release <- struct{}{} // the first turn ends; the second starts
	got(t, turns[0].Done)
	got(t, g.entered)
	mustSend(true) // a slot freed up
	_, err = send()
	wantCapError(t, err, full)
	for range 2 {
		g.release <- struct{}{}
		got(t, g.entered)
	}
	g.release <- struct{}{}
	for i, turn := range turns {
		if r := result(t, turn); r.Err != nil {
			t.Fatalf("turn %d: %v", i, r.Err)
		}
	}
}

// TestBrainQueueCap: on a brain session the calls waiting behind the turn
// (joined or queued) are capped the same way, and the cap frees up when
// the turn ends.
func TestBrainQueueCap(t *testing.T) {
	r := newBrainRig(t, func(o *engine.Options) { o.MaxQueuedTurns = 1 })
	first := r.send(r.owner, "go")
	st := got(t, r.b.starts)
	joined := r.send(r.other, "more")
	if !joined.Queued {
		t.Fatal("a message joining the running turn is not queued")
	}
	got(t, r.b.inputs)
	_, err := r.sendErr(r.other, "too much")
	wantCapError(t, err, "session has 1 queued messages; wait for a turn to finish")
	r.emit(st.TurnID, baton.AgentMessage, `,"content":[{"type":"text","text":"one"}]`)
	r.emit(st.TurnID, baton.AgentStatusIdle, `,"turn_outcome":"completed"`)
	for _, turn := range []*baton.Turn{first, joined} {
		if s := text(t, result(t, turn)); s != "one" {
			t.Fatalf("reply %q", s)
		}
	}
	again := r.send(r.other, "after")
	next := got(t, r.b.starts)
	r.emit(next.TurnID, baton.AgentStatusIdle, `,"turn_outcome":"completed"`)
	if res := result(t, again); res.Err != nil {
		t.Fatal(res.Err)
	}
}

// TestSubscribeCap: a session takes at most MaxSubscribers live
// session.subscribe streams; closing one makes room for another.
func TestSubscribeCap(t *testing.T) {
	ctx := context.Background()
	e, _, s := feedEngineWith(t, engine.Options{MaxSubscribers: 3})
	key := &baton.Key{Name: s.ID, ClientID: "key_1"}
	var feeds []*baton.Feed
	for range 3 {
		f, err := e.Subscribe(ctx, key, "", false)
		if err != nil {
			t.Fatal(err)
		}
		feeds = append(feeds, f)
	}
	const full = "session has 3 subscribers; close one before subscribing again"
	_, err := e.Subscribe(ctx, key, "", false)
	wantCapError(t, err, full)
	feeds[0].Close()
	f, err := e.Subscribe(ctx, key, "", false)
	if err != nil {
		t.Fatalf("after a close: %v", err)
	}
	feeds[0] = f
	_, err = e.Subscribe(ctx, key, "", false)
	wantCapError(t, err, full)
	for _, f := range feeds {
		f.Close()
	}
}
