package engine

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/hub"
	"github.com/baton-engine/baton/internal/clocktest"
	"github.com/baton-engine/baton/store"
)

// The turn gate and a pause's abandonment, driven on a clocktest.Clock: the
// engine runs on a real SQLite store and hub with a provider the test
// answers call by call.

// guard bounds every wait of a test so that a broken feature fails it
// instead of hanging; nothing waits for it to pass.
const guard = 10 * time.Second

// t0 is where the rigs' fake clocks start.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

const (
	rigTurnTimeout     = 2 * time.Minute
	rigProviderTimeout = 7 * time.Minute // distinct from every other timer
)

// recv returns the next value of ch, failing the test after guard.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(guard):
		t.Fatal("timed out waiting")
	}
	var zero T
	return zero
}

// isClosed reports whether ch is closed now.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// stampStore stamps the events the engine writes with the fake clock's
// time, as the store does with real time, so a pause's deadline (its
// event's time + the turn timeout) is on the fake clock.
type stampStore struct {
	baton.Store
	clk *clocktest.Clock
}

func (s stampStore) stamp(evs ...*baton.Event) {
	for _, ev := range evs {
		if ev != nil && ev.CreatedAt.IsZero() {
			ev.CreatedAt = s.clk.Now()
		}
	}
}

func (s stampStore) Append(ctx context.Context, evs ...*baton.Event) error {
	s.stamp(evs...)
	return s.Store.Append(ctx, evs...)
}

func (s stampStore) AppendQueued(ctx context.Context, evs ...*baton.Event) func() error {
	s.stamp(evs...)
	return s.Store.AppendQueued(ctx, evs...)
}

func (s stampStore) CreateSession(ctx context.Context, sess *baton.Session, key *baton.Key, evs ...*baton.Event) error {
	s.stamp(evs...)
	return s.Store.CreateSession(ctx, sess, key, evs...)
}

func (s stampStore) JoinSession(ctx context.Context, id string, p baton.Participant, key *baton.Key, ev *baton.Event) error {
	s.stamp(ev)
	return s.Store.JoinSession(ctx, id, p, key, ev)
}

func (s stampStore) EndSession(ctx context.Context, id string, state baton.SessionState, ev *baton.Event) (bool, error) {
	s.stamp(ev)
	return s.Store.EndSession(ctx, id, state, ev)
}

// stepProvider hands every call to the test, which answers it.
type stepProvider struct{ calls chan *providerCall }

type providerCall struct {
	ctx   context.Context
	entry string // the registry entry's name
	last  string // the request's last message content, read at the call
	tools []string
	reply chan providerReply
}

type providerReply struct {
	resp *baton.ProviderResponse
	err  error
}

func (p *stepProvider) Call(ctx context.Context, entry *baton.ProviderEntry, _ string, req *baton.ProviderRequest) (*baton.ProviderResponse, error) {
	c := &providerCall{ctx: ctx, entry: entry.Name, reply: make(chan providerReply, 1)}
	if n := len(req.Messages); n > 0 {
		c.last = string(req.Messages[n-1].Content)
	}
	for _, d := range req.Tools {
		var x struct{ Name string }
		_ = json.Unmarshal(d, &x)
		c.tools = append(c.tools, x.Name)
	}
	p.calls <- c
	select {
	case r := <-c.reply:
		return r.resp, r.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// answer replies with content (a JSON block array).
func (c *providerCall) answer(content string) {
	c.reply <- providerReply{resp: &baton.ProviderResponse{Content: json.RawMessage(content)}}
}

func (c *providerCall) text(s string) { c.answer(`[{"type":"text","text":"` + s + `"}]`) }

// use replies with a call of the client tool "lookup".
func (c *providerCall) use(id string) {
	c.answer(`[{"type":"tool_use","id":"` + id + `","name":"lookup","input":{}}]`)
}

func (c *providerCall) fail(pe *baton.ProviderError) { c.reply <- providerReply{err: pe} }

// gateRig is an engine with one session and drivers A, B, C (keys[0..2]),
// each declaring the client tool "lookup".
type gateRig struct {
	t    *testing.T
	ctx  context.Context
	e    *Engine
	db   *store.DB
	clk  *clocktest.Clock
	p    *stepProvider
	sid  string
	keys []*baton.Key
}

// rigSetup is what a rig's mods may change before the engine opens: its
// options, the session's profile, and each driver's open (or join)
// request.
type rigSetup struct {
	db   *store.DB
	opts *Options
	prof *baton.Profile
	reqs [3]*baton.OpenRequest
}

func newGateRig(t *testing.T, mods ...func(*rigSetup)) *gateRig {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) }) // runs last
	r := &gateRig{t: t, ctx: context.Background(), clk: clocktest.New(t0), p: &stepProvider{calls: make(chan *providerCall, 16)}}
	db, err := store.Open(r.ctx, store.Options{URL: filepath.Join(t.TempDir(), "b.db")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r.db = db
	prof := &baton.Profile{Name: "p", PrimaryProvider: "a", AllowedTools: []json.RawMessage{json.RawMessage(`"lookup"`)}}
	opts := Options{
		Store: stampStore{db, r.clk}, Hub: hub.New(0), Clock: r.clk, ClientSweep: -1,
		TurnTimeout: rigTurnTimeout, ProviderTimeout: rigProviderTimeout,
		Registry: &baton.Registry{Providers: []baton.ProviderEntry{
			{Name: "a", Provider: "step", Model: "ma"}, {Name: "b", Provider: "step", Model: "mb"},
		}},
		Providers: map[string]baton.Provider{"step": r.p},
	}
	setup := &rigSetup{db: db, opts: &opts, prof: prof}
	for i := range setup.reqs {
		setup.reqs[i] = &baton.OpenRequest{Tools: []baton.ToolDef{{Name: "lookup", InputSchema: json.RawMessage(`{}`)}}}
	}
	for _, m := range mods {
		m(setup)
	}
	if err := db.CreateProfile(r.ctx, prof); err != nil {
		t.Fatal(err)
	}
	r.e = New(opts)
	t.Cleanup(func() { r.e.Close() })
	for i, req := range setup.reqs {
		ck, _ := baton.MintKey(baton.RoleClient, "c", prof.ID, "")
		if err := db.CreateKey(r.ctx, ck); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			res, err := r.e.Open(r.ctx, ck, req)
			if err != nil {
				t.Fatal(err)
			}
			r.sid = res.SessionID
		} else if _, err := r.e.Join(r.ctx, ck, r.sid, req); err != nil {
			t.Fatal(err)
		}
		k := &baton.Key{Name: r.sid, ClientID: ck.ID, Role: baton.RoleSession, ProfileID: prof.ID}
		if err := r.e.RegisterDriver(r.ctx, k); err != nil {
			t.Fatal(err)
		}
		r.keys = append(r.keys, k)
	}
	return r
}

// sendErr sends a message of content (a string or blocks) as key.
func (r *gateRig) sendErr(key *baton.Key, content any) (*baton.Turn, error) {
	msg, _ := json.Marshal(map[string]any{"role": "user", "content": content})
	return r.e.SendMessage(r.ctx, key, msg, baton.SendOptions{})
}

// send sends and checks whether the turn was queued.
func (r *gateRig) send(key *baton.Key, content any, queued bool) *baton.Turn {
	r.t.Helper()
	turn, err := r.sendErr(key, content)
	if err != nil {
		r.t.Fatal(err)
	}
	if turn.Queued != queued {
		r.t.Fatalf("Queued = %v; want %v", turn.Queued, queued)
	}
	return turn
}

// resultOf waits for turn's end and returns its result.
func (r *gateRig) resultOf(turn *baton.Turn) *baton.TurnResult {
	r.t.Helper()
	recv(r.t, turn.Done)
	if sub := turn.Sub(); sub != nil {
		sub.Close()
	}
	return turn.Result()
}

// call returns the next provider call, whose last message must hold want.
func (r *gateRig) call(want string) *providerCall {
	r.t.Helper()
	c := recv(r.t, r.p.calls)
	if !strings.Contains(c.last, want) {
		r.t.Fatalf("provider call for %q; want one for %q", c.last, want)
	}
	return c
}

// pause runs a turn of key to a pause on the client tool call id and
// returns the pause's time.
func (r *gateRig) pause(key *baton.Key, id string) time.Time {
	r.t.Helper()
	turn := r.send(key, "start "+id, false)
	r.call("start " + id).use(id)
	if res := r.resultOf(turn); res.Err != nil || !strings.Contains(string(res.Message.Content), `"dispatch":"client"`) {
		r.t.Fatalf("paused reply %+v", res)
	}
	return r.clk.Now()
}

// resultsOf is the content that answers the client tool call id.
func resultsOf(id, text string) []map[string]any {
	return []map[string]any{{"type": "tool_result", "tool_use_id": id, "content": text}}
}

// gate returns the session actor's parked turn and whether a turn runs.
func (r *gateRig) gate() (p *parked, running bool, queued int) {
	r.e.mu.Lock()
	a := r.e.actors[r.sid]
	r.e.mu.Unlock()
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.parked, a.running != nil, len(a.queue)
}

func (r *gateRig) wantDone(turn *baton.Turn, text string) {
	r.t.Helper()
	res := r.resultOf(turn)
	if res.Err != nil || !strings.Contains(string(res.Message.Content), text) {
		r.t.Fatalf("result %+v; want the reply %q", res, text)
	}
}

// TestGateQueuesInOrder: while a turn runs, the other drivers' messages
// queue and run one at a time in the order they arrived.
func TestGateQueuesInOrder(t *testing.T) {
	r := newGateRig(t)
	a, b, c := r.keys[0], r.keys[1], r.keys[2]
	first := r.send(a, "from A", false)
	held := r.call("from A")
	second := r.send(b, "from B", true)
	third := r.send(c, "from C", true)
	if isClosed(second.Started) || isClosed(third.Started) {
		t.Fatal("a queued turn started while the first one runs")
	}
	held.text("one")
	r.wantDone(first, "one")
	r.call("from B").text("two")
	r.wantDone(second, "two")
	if !isClosed(second.Started) {
		t.Fatal("a turn ended without starting")
	}
	r.call("from C").text("three")
	r.wantDone(third, "three")
}

// TestGatePauseKeptForOwner: a paused turn holds the gate for its owner:
// another driver queues behind it although nothing runs, the owner's
// results resume it at once, and the queued turn runs after.
func TestGatePauseKeptForOwner(t *testing.T) {
	r := newGateRig(t)
	a, b := r.keys[0], r.keys[1]
	r.pause(a, "toolu_1")
	other := r.send(b, "from B", true)
	if p, running, _ := r.gate(); p == nil || p.owner != a.ClientID || running {
		t.Fatalf("gate: parked %+v, running %v", p, running)
	}
	resumed := r.send(a, resultsOf("toolu_1", "42"), false)
	r.call(`"content":"42"`).text("resumed")
	r.wantDone(resumed, "resumed")
	r.call("from B").text("B's turn")
	r.wantDone(other, "B's turn")
}

// TestGateOwnerQueuedResumesFirst: the owner's results sent while its
// turn still ran take the pause as soon as it pauses, ahead of a driver
// that queued earlier.
func TestGateOwnerQueuedResumesFirst(t *testing.T) {
	r := newGateRig(t)
	a, b := r.keys[0], r.keys[1]
	first := r.send(a, "start", false)
	held := r.call("start")
	other := r.send(b, "from B", true)
	results := r.send(a, resultsOf("toolu_1", "42"), true)
	held.use("toolu_1")
	r.resultOf(first)
	r.call(`"content":"42"`).text("resumed")
	r.wantDone(results, "resumed")
	r.call("from B").text("B's turn")
	r.wantDone(other, "B's turn")
}

// TestGateQueueCap: past MaxQueuedTurns waiting messages, one more is
// refused while a turn is paused, but never the owner's resume.
func TestGateQueueCap(t *testing.T) {
	r := newGateRig(t, func(s *rigSetup) { s.opts.MaxQueuedTurns = 1 })
	a, b, c := r.keys[0], r.keys[1], r.keys[2]
	r.pause(a, "toolu_1")
	other := r.send(b, "from B", true)
	for _, k := range []*baton.Key{b, c} {
		_, err := r.sendErr(k, "one too many")
		if baton.ErrorCode(err) != baton.ECodeTooManyRequests || !strings.Contains(err.Error(), "session has 1 queued messages") {
			t.Fatalf("past the cap: %v", err)
		}
	}
	resumed := r.send(a, resultsOf("toolu_1", "42"), false)
	r.call(`"content":"42"`).text("resumed")
	r.wantDone(resumed, "resumed")
	r.call("from B").text("B's turn")
	r.wantDone(other, "B's turn")
	if _, _, n := r.gate(); n != 0 {
		t.Fatalf("%d turns still queued", n)
	}
}

// TestPauseAbandonedAtDeadline: a paused turn whose owner does not come
// back is taken over by the first queued driver exactly at the deadline
// (pause time + TurnTimeout), not a tick before; the pending call gets an
// error result and the abandonment is logged against the owner.
func TestPauseAbandonedAtDeadline(t *testing.T) {
	r := newGateRig(t)
	a, b, c := r.keys[0], r.keys[1], r.keys[2]
	since := r.pause(a, "toolu_1")
	taker := r.send(b, "from B", true)
	next := r.send(c, "from C", true)
	deadline := since.Add(rigTurnTimeout)
	// Armed; when it fires is what the rest checks.
	r.clk.WaitTimer(t, "abandonment", func(d time.Duration) bool { return d > rigTurnTimeout/2 && d < 2*rigTurnTimeout })

	r.clk.AdvanceTo(deadline.Add(-time.Nanosecond))
	if p, running, n := r.gate(); p == nil || running || n != 2 {
		t.Fatalf("a tick before the deadline: parked %v, running %v, queued %d", p != nil, running, n)
	}
	if isClosed(taker.Started) {
		t.Fatal("the queued turn started before the deadline")
	}

	r.clk.Advance(time.Nanosecond)
	if p, running, n := r.gate(); p != nil || !running || n != 1 {
		t.Fatalf("at the deadline: parked %v, running %v, queued %d", p != nil, running, n)
	}
	call := r.call("from B")
	if !strings.Contains(call.last, `"tool_use_id":"toolu_1"`) || !strings.Contains(call.last, `"is_error":true`) ||
		!strings.Contains(call.last, abandonedText) {
		t.Fatalf("the taker's message %s lacks the abandoned call's error result", call.last)
	}
	call.text("B took over")
	r.wantDone(taker, "B took over")
	r.call("from C").text("C's turn")
	r.wantDone(next, "C's turn")

	evs, err := r.db.EventsOfType(r.ctx, r.sid, []string{baton.EventSessionError})
	if err != nil {
		t.Fatal(err)
	}
	if len(evs) != 1 || evs[0].ClientKeyID != a.ClientID ||
		!strings.Contains(string(evs[0].Payload), `"reason":"driver_turn_abandoned"`) || !evs[0].CreatedAt.Equal(deadline) {
		t.Fatalf("session.error events %v", evs)
	}
}

// TestPauseOwnerBackBeforeDeadline: the owner resuming a tick before the
// deadline keeps its turn; the deadline then passes without effect and
// the queued driver runs after the owner's turn.
func TestPauseOwnerBackBeforeDeadline(t *testing.T) {
	r := newGateRig(t)
	a, b := r.keys[0], r.keys[1]
	since := r.pause(a, "toolu_1")
	other := r.send(b, "from B", true)
	deadline := since.Add(rigTurnTimeout)
	r.clk.WaitTimer(t, "abandonment", func(d time.Duration) bool { return d == rigTurnTimeout })
	r.clk.AdvanceTo(deadline.Add(-time.Nanosecond))
	resumed := r.send(a, resultsOf("toolu_1", "42"), false)
	held := r.call(`"content":"42"`)
	r.clk.AdvanceTo(deadline.Add(time.Minute)) // within the provider call's timeout
	if _, running, n := r.gate(); !running || n != 1 {
		t.Fatalf("after the deadline: running %v, queued %d", running, n)
	}
	held.text("resumed")
	r.wantDone(resumed, "resumed")
	r.call("from B").text("B's turn")
	r.wantDone(other, "B's turn")
	if evs, _ := r.db.EventsOfType(r.ctx, r.sid, []string{baton.EventSessionError}); len(evs) != 0 {
		t.Fatalf("session.error events %v", evs)
	}
}

// TestPauseExpiredWithoutQueue: with nobody queued the deadline passes
// and the pause stays; the next driver to arrive takes it over at once.
func TestPauseExpiredWithoutQueue(t *testing.T) {
	r := newGateRig(t)
	a, b := r.keys[0], r.keys[1]
	since := r.pause(a, "toolu_1")
	r.clk.WaitTimer(t, "abandonment", func(d time.Duration) bool { return d == rigTurnTimeout })
	r.clk.AdvanceTo(since.Add(rigTurnTimeout))
	if p, _, _ := r.gate(); p == nil {
		t.Fatal("the pause was dropped with nobody to take it")
	}
	taker := r.send(b, "from B", false)
	r.call("from B").text("B took over")
	r.wantDone(taker, "B took over")
	if evs, _ := r.db.EventsOfType(r.ctx, r.sid, []string{baton.EventSessionError}); len(evs) != 1 || evs[0].ClientKeyID != a.ClientID {
		t.Fatalf("session.error events %v", evs)
	}
}
