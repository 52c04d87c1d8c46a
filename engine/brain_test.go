package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.uber.org/goleak"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/engine"
	"github.com/baton-engine/baton/hub"
	"github.com/baton-engine/baton/internal/clocktest"
	"github.com/baton-engine/baton/store"
)

// fakeBrains is a hand-written baton.Brains: it records what the engine
// asks and lets the test speak for the executor through the sink.
type fakeBrains struct {
	sink     baton.AgentSink
	starts   chan *baton.BrainTurn
	inputs   chan string // input text
	results  chan string // "<tool_use_id> <is_error> <content>"
	cancels  chan string
	mu       sync.Mutex
	inputErr error // the next TurnInput's answer
}

func newFakeBrains() *fakeBrains {
	return &fakeBrains{starts: make(chan *baton.BrainTurn, 8), inputs: make(chan string, 8),
		results: make(chan string, 8), cancels: make(chan string, 8)}
}

func (f *fakeBrains) Attach(s baton.AgentSink) { f.sink = s }

func (f *fakeBrains) StartTurn(_ context.Context, t *baton.BrainTurn) error {
	f.starts <- t
	return nil
}

func (f *fakeBrains) TurnInput(_ context.Context, _, _, _ string, input json.RawMessage) error {
	f.mu.Lock()
	err := f.inputErr
	f.inputErr = nil
	f.mu.Unlock()
	if err == nil {
		f.inputs <- string(input)
	}
	return err
}

func (f *fakeBrains) CancelTurn(_ context.Context, _, turnID string) (bool, error) {
	f.cancels <- turnID
	return true, nil
}

func (f *fakeBrains) CloseAgent(string) {}

func (f *fakeBrains) RespondInteraction(string, string, baton.InteractionAnswer) error { return nil }

func (f *fakeBrains) CustomToolResult(_, toolUseID string, r baton.ClientResult) error {
	f.results <- toolUseID + " " + map[bool]string{true: "error", false: "ok"}[r.IsError] + " " + string(r.Content)
	return nil
}

func got[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(10 * time.Second):
		t.Fatal("nothing arrived")
	}
	var zero T
	return zero
}

// brainRig is an engine on a real store whose profile's brain is mch_1,
// with one open session (its creator declared "lookup") and two drivers.
type brainRig struct {
	t       *testing.T
	ctx     context.Context
	e       *engine.Engine
	db      *store.DB
	b       *fakeBrains
	feed    *hub.Hub
	sid     string
	machine string
	owner   *baton.Key
	other   *baton.Key
	now     time.Time
	nowMu   sync.Mutex
	events  int64 // sequence of the fake executor
}

// newBrainRig opens a brain session with two registered drivers; mods
// adjust the engine's options.
func newBrainRig(t *testing.T, mods ...func(*engine.Options)) *brainRig {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t) }) // runs last
	r := &brainRig{t: t, ctx: context.Background(), b: newFakeBrains(), now: time.Now()}
	feed := hub.New(0)
	r.feed = feed
	db, err := store.Open(r.ctx, store.Options{URL: filepath.Join(t.TempDir(), "b.db"), OnCommit: func(evs []*baton.Event) {
		for _, ev := range evs {
			feed.Publish(baton.Notice{Event: ev})
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	r.db = db
	m := &baton.Machine{Name: "m"}
	if err := db.CreateMachine(r.ctx, m); err != nil {
		t.Fatal(err)
	}
	r.machine = m.ID
	p := &baton.Profile{Name: "p", PrimaryProvider: "script", AllowedTools: []json.RawMessage{json.RawMessage(`"lookup"`)},
		Brain: baton.Brain{Type: baton.BrainExecutor, MachineID: m.ID}}
	if err := db.CreateProfile(r.ctx, p); err != nil {
		t.Fatal(err)
	}
	opts := engine.Options{Store: db, Hub: feed, Brains: r.b, TurnTimeout: time.Hour, Clock: clocktest.NowFunc(r.clock),
		Registry: &baton.Registry{Providers: []baton.ProviderEntry{{Name: "script", Provider: baton.ProviderScripted}}}}
	for _, m := range mods {
		m(&opts)
	}
	r.e = engine.New(opts)
	t.Cleanup(func() { r.e.Close() })
	keys := make([]*baton.Key, 2)
	for i := range keys {
		ck, _ := baton.MintKey(baton.RoleClient, "c", p.ID, "")
		if err := db.CreateKey(r.ctx, ck); err != nil {
			t.Fatal(err)
		}
		req := &baton.OpenRequest{Tools: []baton.ToolDef{{Name: "lookup", InputSchema: json.RawMessage(`{}`)}}}
		var res *baton.OpenResult
		if i == 0 {
			res, err = r.e.Open(r.ctx, ck, req)
			r.sid = res.SessionID
		} else {
			_, err = r.e.Join(r.ctx, ck, r.sid, &baton.OpenRequest{})
		}
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = &baton.Key{Name: r.sid, ClientID: ck.ID, Role: baton.RoleSession, ProfileID: p.ID}
		if err := r.e.RegisterDriver(r.ctx, keys[i]); err != nil {
			t.Fatal(err)
		}
	}
	r.owner, r.other = keys[0], keys[1]
	return r
}

func (r *brainRig) clock() time.Time {
	r.nowMu.Lock()
	defer r.nowMu.Unlock()
	return r.now
}

func (r *brainRig) advance(d time.Duration) {
	r.nowMu.Lock()
	r.now = r.now.Add(d)
	r.nowMu.Unlock()
}

func (r *brainRig) send(key *baton.Key, content any) *baton.Turn {
	r.t.Helper()
	turn, err := r.sendErr(key, content)
	if err != nil {
		r.t.Fatal(err)
	}
	return turn
}

func (r *brainRig) sendErr(key *baton.Key, content any) (*baton.Turn, error) {
	msg, _ := json.Marshal(map[string]any{"role": "user", "content": content})
	return r.e.SendMessage(r.ctx, key, msg, baton.SendOptions{})
}

// emit speaks for the executor: one agent event of turn.
func (r *brainRig) emit(turn, typ, fields string) string {
	r.t.Helper()
	r.events++
	id := "evt_" + strings.Repeat("x", int(r.events))
	ev := `{"type":"` + typ + `"` + fields + `}`
	if err := r.b.sink.AgentEvent(r.ctx, &baton.AgentEvent{SessionID: r.sid, MachineID: r.machine, TurnID: turn,
		EventID: id, Sequence: r.events, Type: typ, Event: json.RawMessage(ev)}); err != nil {
		r.t.Fatal(err)
	}
	return id
}

func result(t *testing.T, turn *baton.Turn) *baton.TurnResult {
	t.Helper()
	got(t, turn.Done)
	if sub := turn.Sub(); sub != nil {
		sub.Close()
	}
	return turn.Result()
}

func text(t *testing.T, res *baton.TurnResult) string {
	t.Helper()
	if res.Err != nil {
		t.Fatal(res.Err)
	}
	var bs []struct{ Type, Text, ID, Dispatch string }
	_ = json.Unmarshal(res.Message.Content, &bs)
	var parts []string
	for _, b := range bs {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "tool_use":
			parts = append(parts, "use:"+b.ID+":"+b.Dispatch)
		}
	}
	return strings.Join(parts, "|")
}

// TestBrainInputAfterTurnEnded: a message joining a turn the executor has
// already ended (turn.input answered conflict) waits for the turn's end
// and starts the next turn.
func TestBrainInputAfterTurnEnded(t *testing.T) {
	r := newBrainRig(t)
	first := r.send(r.owner, "go")
	st := got(t, r.b.starts)
	if st.MachineID != r.machine || st.SessionID != r.sid || st.Input == nil || len(st.CustomTools) != 1 {
		t.Fatalf("turn.start %+v", st)
	}
	if ok, _ := r.e.TurnActive(r.ctx, r.sid, st.TurnID); !ok {
		t.Fatal("started turn not active")
	}
	r.b.mu.Lock()
	r.b.inputErr = baton.Errorf(baton.ECodeConflict, "not running")
	r.b.mu.Unlock()
	second := r.send(r.other, "late")
	got(t, second.Started)
	r.emit(st.TurnID, baton.AgentMessage, `,"content":[{"type":"text","text":"one"}]`)
	r.emit(st.TurnID, baton.AgentStatusIdle, `,"turn_outcome":"completed"`)
	if s := text(t, result(t, first)); s != "one" {
		t.Fatalf("first reply %q", s)
	}
	if ok, _ := r.e.TurnActive(r.ctx, r.sid, st.TurnID); ok {
		t.Fatal("ended turn still active")
	}
	next := got(t, r.b.starts)
	if next.TurnID == st.TurnID || !strings.Contains(string(next.Input), "late") {
		t.Fatalf("next turn.start %+v", next)
	}
	r.emit(next.TurnID, baton.AgentError, `,"message":"bad"`)
	r.emit(next.TurnID, baton.AgentStatusIdle, `,"turn_outcome":"failed"`)
	res := result(t, second)
	if s := text(t, res); s != "The agent turn failed: bad" {
		t.Fatalf("second reply %q", s)
	}
	if res.Events[0].Type != baton.EventClientMessage || res.Events[0].ClientKeyID != r.other.ClientID {
		t.Fatalf("second call's events start with %+v", res.Events[0])
	}
}

// TestBrainPause: a declared custom tool pauses the turn for its owner;
// a bad answer is refused and keeps the pause; a right one goes back as
// agent.custom_tool_result; past the deadline another driver takes the
// pause over; an undeclared tool is refused at once.
func TestBrainPause(t *testing.T) {
	r := newBrainRig(t)
	first := r.send(r.owner, "go")
	st := got(t, r.b.starts)
	r.emit(st.TurnID, baton.AgentMessage, `,"content":[{"type":"text","text":"looking"}]`)
	use := r.emit(st.TurnID, baton.AgentCustomToolUse, `,"name":"lookup","input":{"q":1}`)
	if s := text(t, result(t, first)); s != "looking|use:"+use+":client" {
		t.Fatalf("paused reply %q", s)
	}
	if _, err := r.sendErr(r.owner, []map[string]any{{"type": "tool_result", "tool_use_id": "toolu_other", "content": "x"}}); baton.ErrorCode(err) != baton.ECodeMergeInvalid {
		t.Fatalf("wrong id: %v", err)
	}
	resumed := r.send(r.owner, []map[string]any{{"type": "tool_result", "tool_use_id": use, "content": "42"}})
	if got := got(t, r.b.results); got != use+` ok "42"` {
		t.Fatalf("custom tool result %q", got)
	}
	// A second call while nobody holds the pause: it goes to the owner's
	// attached call at once.
	use2 := r.emit(st.TurnID, baton.AgentCustomToolUse, `,"name":"lookup","input":{}`)
	if s := text(t, result(t, resumed)); s != "use:"+use2+":client" {
		t.Fatalf("second pause %q", s)
	}
	// The other driver queues behind the pause until its deadline.
	queued := r.send(r.other, "mine now")
	select {
	case <-queued.Started:
		t.Fatal("a queued call started during the pause")
	default:
	}
	// Past the deadline, the first queued call takes the pause over, even
	// when a newer message is what finds it expired.
	r.advance(2 * time.Hour)
	later := r.send(r.other, "later")
	if got := got(t, r.b.results); !strings.HasPrefix(got, use2+" error ") {
		t.Fatalf("abandoned result %q", got)
	}
	if in := got(t, r.b.inputs); !strings.Contains(in, "mine now") {
		t.Fatalf("input %q", in)
	}
	r.emit(st.TurnID, baton.AgentCustomToolUse, `,"name":"nope","input":{}`)
	if got := got(t, r.b.results); !strings.Contains(got, "not declared") {
		t.Fatalf("undeclared tool result %q", got)
	}
	r.emit(st.TurnID, baton.AgentMessage, `,"content":[{"type":"text","text":"done"}]`)
	r.emit(st.TurnID, baton.AgentStatusIdle, `,"turn_outcome":"completed"`)
	res := result(t, queued)
	if s := text(t, res); s != "done" {
		t.Fatalf("taker reply %q", s)
	}
	errs, err := r.db.EventsOfType(r.ctx, r.sid, []string{baton.EventSessionError})
	if err != nil || len(errs) != 1 || !strings.Contains(string(errs[0].Payload), `"owner_client_key_id":"`+r.owner.ClientID+`"`) {
		t.Fatalf("session.error events %v (%v)", errs, err)
	}
	next := got(t, r.b.starts) // the later message starts the next turn
	if !strings.Contains(string(next.Input), "later") {
		t.Fatalf("queued turn.start %+v", next)
	}
	r.b.sink.AgentLost(r.sid, errors.New("gone"))
	if res := result(t, later); baton.ErrorCode(res.Err) != baton.ECodeSessionFailed {
		t.Fatalf("lost turn: %+v", res)
	}
	// Cancelling with nothing running is an error; the session is open.
	if err := r.e.CancelTurn(r.ctx, r.owner); baton.ErrorCode(err) != baton.ECodeNoTurn {
		t.Fatalf("cancel: %v", err)
	}
	again := r.send(r.owner, "again")
	st3 := got(t, r.b.starts)
	if err := r.e.CancelTurn(r.ctx, r.owner); err != nil {
		t.Fatal(err)
	}
	if c := got(t, r.b.cancels); c != st3.TurnID {
		t.Fatalf("turn.cancel %s", c)
	}
	r.emit(st3.TurnID, baton.AgentStatusIdle, `,"turn_outcome":"canceled"`)
	if s := text(t, result(t, again)); s != "The turn was cancelled." {
		t.Fatalf("cancelled reply %q", s)
	}
}

// TestBrainEventChecks: an event for a session routed to another machine
// is refused; a repeated event id is stored once.
func TestBrainEventChecks(t *testing.T) {
	r := newBrainRig(t)
	err := r.b.sink.AgentEvent(r.ctx, &baton.AgentEvent{SessionID: r.sid, MachineID: "mch_2", TurnID: "trn_x", EventID: "evt_1",
		Sequence: 1, Type: "agent.message", Event: json.RawMessage(`{"type":"agent.message","content":[]}`)})
	if baton.ErrorCode(err) != baton.ECodeForbidden {
		t.Fatalf("foreign machine: %v", err)
	}
	turn := r.send(r.owner, "go")
	st := got(t, r.b.starts)
	for range 2 {
		if err := r.b.sink.AgentEvent(r.ctx, &baton.AgentEvent{SessionID: r.sid, MachineID: r.machine, TurnID: st.TurnID, EventID: "evt_same",
			Sequence: 1, Type: "agent.message", Event: json.RawMessage(`{"type":"agent.message","content":[{"type":"text","text":"x"}]}`)}); err != nil {
			t.Fatal(err)
		}
	}
	r.emit(st.TurnID, "session.open", `,"sneaky":true`)
	r.emit(st.TurnID, baton.AgentStatusIdle, "")
	res := result(t, turn)
	if s := text(t, res); s != "x" {
		t.Fatalf("reply %q", s)
	}
	var typesSeen []string
	for _, ev := range res.Events {
		typesSeen = append(typesSeen, ev.Type)
	}
	want := "client.message.send agent.message agent.event session.status_idle"
	if strings.Join(typesSeen, " ") != want {
		t.Fatalf("events %v, want %s", typesSeen, want)
	}
}

// TestBrainDeltas: a brain's previews go out live named by their turn and
// event: text previews as text, as the provider loop's deltas do, others
// (tool input, thinking) as they came; an empty text is dropped.
func TestBrainDeltas(t *testing.T) {
	r := newBrainRig(t)
	turn := r.send(r.owner, "go")
	st := got(t, r.b.starts)
	sub := r.feed.Subscribe(r.sid, baton.SubObserver)
	defer sub.Close()
	sent := []string{
		`{"type":"text_delta","text":"Hel"}`,
		`"lo"`,
		`""`,
		`{"type":"input_json_delta","partial_json":"{\"path\":"}`,
		`{"type":"thinking_delta","thinking":"hm"}`,
		`{"text":"!"}`,
	}
	for _, d := range sent {
		r.b.sink.AgentDelta(&baton.AgentDelta{SessionID: r.sid, TurnID: st.TurnID, EventID: "evt_1", Delta: json.RawMessage(d)})
	}
	mk := func(text, preview string) baton.Delta {
		d := baton.Delta{SessionID: r.sid, ClientKeyID: r.owner.ClientID, Text: text, TurnID: st.TurnID, EventID: "evt_1"}
		if preview != "" {
			d.Preview = json.RawMessage(preview)
		}
		return d
	}
	want := []baton.Delta{mk("Hel", ""), mk("lo", ""), mk("", sent[3]), mk("", sent[4]), mk("!", "")}
	var deltas []baton.Delta
	for len(deltas) < len(want) {
		n := got(t, sub.C())
		if n.Delta != nil {
			deltas = append(deltas, *n.Delta)
		}
	}
	if d := cmp.Diff(want, deltas); d != "" {
		t.Errorf("relayed deltas (-want +got):\n%s", d)
	}
	r.emit(st.TurnID, baton.AgentMessage, `,"content":[{"type":"text","text":"Hello!"}]`)
	r.emit(st.TurnID, baton.AgentStatusIdle, `,"turn_outcome":"completed"`)
	if s := text(t, result(t, turn)); s != "Hello!" {
		t.Fatalf("reply %q", s)
	}
}

// TestHandEvent: a tool or shell executor's durable session.event (the
// executor hub's HandSink, on the same sink as agent events) is
// committed as executor.event with the hub's payload before HandEvent
// returns, reaches the session's subscribers, and is attributed to the
// acting client of the running turn (none between turns). An unknown
// session is forbidden; a closed one takes nothing.
func TestHandEvent(t *testing.T) {
	r := newBrainRig(t)
	hs, ok := r.b.sink.(interface {
		HandEvent(ctx context.Context, sessionID string, payload json.RawMessage) error
	})
	if !ok {
		t.Fatal("the engine's sink records no hand events")
	}
	sub := r.feed.Subscribe(r.sid, baton.SubObserver)
	defer sub.Close()
	payload := `{"type":"build.log","data":{"line":"a"},"executor_id":"exe_a","environment_id":"env_1"}`
	if err := hs.HandEvent(r.ctx, r.sid, json.RawMessage(payload)); err != nil {
		t.Fatal(err)
	}
	stored, err := r.db.EventsOfType(r.ctx, r.sid, []string{"executor.event"})
	if err != nil || len(stored) != 1 || string(stored[0].Payload) != payload || stored[0].ClientKeyID != "" {
		t.Fatalf("stored before HandEvent returned: %+v %v", stored, err)
	}
	if n := got(t, sub.C()); n.Event == nil || n.Event.ID != stored[0].ID {
		t.Fatalf("subscriber got %+v", n)
	}

	turn := r.send(r.owner, "go")
	st := got(t, r.b.starts)
	if err := hs.HandEvent(r.ctx, r.sid, json.RawMessage(`{"type":"x","data":null}`)); err != nil {
		t.Fatal(err)
	}
	for {
		n := got(t, sub.C())
		if n.Event != nil && n.Event.Type == "executor.event" {
			if n.Event.ClientKeyID != r.owner.ClientID {
				t.Errorf("during a turn attributed to %q, want the acting client %q", n.Event.ClientKeyID, r.owner.ClientID)
			}
			break
		}
	}
	r.emit(st.TurnID, baton.AgentStatusIdle, `,"turn_outcome":"completed"`)
	result(t, turn)

	if err := hs.HandEvent(r.ctx, "ses_nope", json.RawMessage(payload)); baton.ErrorCode(err) != baton.ECodeForbidden {
		t.Errorf("unknown session: %v", err)
	}
	if err := r.e.CloseSession(r.ctx, r.owner); err != nil {
		t.Fatal(err)
	}
	if err := hs.HandEvent(r.ctx, r.sid, json.RawMessage(payload)); err != nil {
		t.Fatalf("closed session: %v", err)
	}
	if stored, _ := r.db.EventsOfType(r.ctx, r.sid, []string{"executor.event"}); len(stored) != 2 {
		t.Errorf("%d executor.event events, want 2 (none after close)", len(stored))
	}
}
