package executor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
)

// fakeSink is a hand-written baton.AgentSink recording what it hears.
type fakeSink struct {
	events chan *baton.AgentEvent
	deltas chan *baton.AgentDelta
	ixs    chan *baton.Interaction
	ended  chan string // "<interaction id> <status> <reason>"
	lost   chan lostReport
	hands  chan handReport
	gate   chan struct{} // when set, HandEvent waits for it before it returns

	mu   sync.Mutex
	fail error // the next AgentEvent or HandEvent fails with it
}

// handReport is one HandEvent call.
type handReport struct {
	session string
	payload map[string]any
}

type lostReport struct {
	session string
	err     error
}

func newSink() *fakeSink {
	return &fakeSink{events: make(chan *baton.AgentEvent, 64), deltas: make(chan *baton.AgentDelta, 64),
		ixs: make(chan *baton.Interaction, 64), ended: make(chan string, 64), lost: make(chan lostReport, 64),
		hands: make(chan handReport, 64)}
}

var _ HandSink = (*fakeSink)(nil)

func (s *fakeSink) HandEvent(_ context.Context, sessionID string, payload json.RawMessage) error {
	s.mu.Lock()
	err, gate := s.fail, s.gate
	s.fail = nil
	s.mu.Unlock()
	if err != nil {
		return err
	}
	var p map[string]any
	if e := json.Unmarshal(payload, &p); e != nil {
		return e
	}
	s.hands <- handReport{sessionID, p}
	if gate != nil {
		<-gate
	}
	return nil
}

func (s *fakeSink) AgentEvent(_ context.Context, ev *baton.AgentEvent) error {
	s.mu.Lock()
	err := s.fail
	s.fail = nil
	s.mu.Unlock()
	if err != nil {
		return err
	}
	s.events <- ev
	return nil
}

func (s *fakeSink) AgentDelta(d *baton.AgentDelta) { s.deltas <- d }

func (s *fakeSink) Interaction(_ context.Context, in *baton.Interaction) error {
	s.ixs <- in
	return nil
}

func (s *fakeSink) InteractionEnded(_ context.Context, _, id, status, reason string) {
	s.ended <- id + " " + status + " " + reason
}

func (s *fakeSink) AgentLost(sessionID string, err error) { s.lost <- lostReport{sessionID, err} }

// none fails if ch holds anything.
func none[T any](t *testing.T, what string, ch <-chan T) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("unexpected %s: %+v", what, v)
	default:
	}
}

// fakeCreds issues fixed turn credentials and records what it was asked.
type fakeCreds struct{ asked chan string }

func (f fakeCreds) Issue(_ context.Context, sessionID, turnID, machineID string, epoch int64) (baton.TurnMetadata, error) {
	f.asked <- sessionID + " " + turnID + " " + machineID
	return baton.TurnMetadata{ModelBaseURL: "http://baton/v1/model", ModelToken: "bae_mdt_x", ModelTokenExpiresAt: t0.Add(time.Hour)}, nil
}

// brainEnv is a hub with a sink attached.
func brainEnv(t *testing.T) (*env, *fakeSink) {
	e := newEnv(t, longLeases)
	s := newSink()
	e.hub.Attach(s)
	return e, s
}

// agentExecutor registers a machine executor of mch_1 with the agent
// capability.
func (e *env) agentExecutor(t *testing.T, id string, ag proto.AgentCapability, resume *proto.Resume) *texec {
	t.Helper()
	x, _ := e.agentRegister(t, id, ag, resume)
	return x
}

// agentRegister is agentExecutor that also returns the register result.
func (e *env) agentRegister(t *testing.T, id string, ag proto.AgentCapability, resume *proto.Resume) (*texec, proto.RegisterResult) {
	t.Helper()
	x := e.dial(t, e.machineToken("mch_1", "cred_1"))
	res := x.register(proto.RegisterParams{ExecutorID: id, Capabilities: proto.Capabilities{Agent: &ag}, Resume: resume})
	return x, res
}

func (e *env) startAsync(turn baton.BrainTurn) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- e.hub.StartTurn(context.Background(), &turn) }()
	return ch
}

func turnOf(session, turn string) baton.BrainTurn {
	return baton.BrainTurn{SessionID: session, MachineID: "mch_1", TurnID: turn, Input: json.RawMessage(`[{"type":"text","text":"hi"}]`)}
}

// startOn starts a turn that x accepts and returns its turn.start params.
func (e *env) startOn(t *testing.T, x *texec, turn baton.BrainTurn) proto.TurnStartParams {
	t.Helper()
	done := e.startAsync(turn)
	var p proto.TurnStartParams
	x.reply(x.expect(proto.MethodTurnStart, &p), proto.TurnStartResult{Accepted: true, ExecutorSessionRef: "ref_" + turn.SessionID})
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	return p
}

func agentEvent(session string, epoch int64, turn, id string, seq int64, ev string) proto.SessionEventParams {
	return proto.SessionEventParams{SessionID: session, Epoch: epoch, TurnID: turn, EventID: id, Sequence: &seq, Event: json.RawMessage(ev)}
}

// acked sends an event and returns the acknowledged sequence.
func (x *texec) acked(p proto.SessionEventParams) int64 {
	x.t.Helper()
	var res proto.SessionEventResult
	x.ok(proto.MethodSessionEvent, p, &res)
	if res.AckedSequence == nil {
		x.t.Fatalf("no acked_sequence for %s", p.EventID)
	}
	return *res.AckedSequence
}

func TestAgentTurnStartAndEvents(t *testing.T) {
	e, sink := brainEnv(t)
	x := e.agentExecutor(t, "exe_a", proto.AgentCapability{CustomTools: true}, nil)
	creds := fakeCreds{asked: make(chan string, 4)}
	turn := turnOf("ses_1", "trn_1")
	turn.CustomTools = []baton.ToolDef{{Name: "lookup", InputSchema: json.RawMessage(`{"type":"object"}`)}}
	turn.Credentials = creds
	p := e.startOn(t, x, turn)
	if wait(t, creds.asked) != "ses_1 trn_1 mch_1" {
		t.Fatal("credentials asked for another turn")
	}
	md := p.Metadata
	if p.TurnID != "trn_1" || string(p.Input) != string(turn.Input) || md.Epoch <= 0 || md.ModelToken != "bae_mdt_x" ||
		md.ModelBaseURL != "http://baton/v1/model" || len(md.CustomTools) != 1 || md.CustomTools[0].Name != "lookup" || p.ExecutorSessionRef != "" ||
		md.WorkspacePath != "" { // no files without Options.Files
		t.Fatalf("turn.start %+v", p)
	}
	ep := md.Epoch
	if got := x.acked(agentEvent("ses_1", ep, "trn_1", "evt_1", 1, `{"type":"session.status_running"}`)); got != 1 {
		t.Fatalf("acked %d", got)
	}
	x.acked(agentEvent("ses_1", ep, "trn_1", "evt_2", 2, `{"type":"agent.message","content":[{"type":"text","text":"hello"}]}`))
	// A resend of an acknowledged sequence is a duplicate.
	if got := x.acked(agentEvent("ses_1", ep, "trn_1", "evt_2", 2, `{"type":"agent.message","content":[]}`)); got != 2 {
		t.Fatalf("duplicate acked %d", got)
	}
	// A gap is -32013 with the expected sequence.
	pe := x.fails(proto.MethodSessionEvent, agentEvent("ses_1", ep, "trn_1", "evt_4", 4, `{"type":"agent.thinking","text":"x"}`))
	if pe.Code != proto.CodeConflict || pe.Detail().ExpectedSequence == nil || *pe.Detail().ExpectedSequence != 3 {
		t.Fatalf("gap: %+v", pe)
	}
	// A known event_id under the next sequence is taken but not delivered.
	if got := x.acked(agentEvent("ses_1", ep, "trn_1", "evt_2", 3, `{"type":"agent.message","content":[]}`)); got != 3 {
		t.Fatalf("known event id acked %d", got)
	}
	// A failing sink leaves the event unacknowledged; the resend goes through.
	sink.mu.Lock()
	sink.fail = errors.New("store down")
	sink.mu.Unlock()
	if pe := x.fails(proto.MethodSessionEvent, agentEvent("ses_1", ep, "trn_1", "evt_4", 4, `{"type":"agent.error","message":"x"}`)); pe.Code != proto.CodeInternal {
		t.Fatalf("failing sink: %+v", pe)
	}
	x.acked(agentEvent("ses_1", ep, "trn_1", "evt_4", 4, `{"type":"agent.error","message":"x"}`))
	// Malformed, foreign and stale messages.
	if pe := x.fails(proto.MethodSessionEvent, agentEvent("ses_1", ep, "trn_1", "evt_5", 5, `{"text":"no type"}`)); pe.Code != proto.CodeInvalidParams {
		t.Fatalf("typeless event: %+v", pe)
	}
	if pe := x.fails(proto.MethodSessionEvent, agentEvent("ses_1", ep+100, "trn_1", "evt_5", 5, `{"type":"x"}`)); pe.Code != proto.CodeConflict {
		t.Fatalf("future epoch: %+v", pe)
	}
	y := e.agentExecutor(t, "exe_b", proto.AgentCapability{}, nil)
	if pe := y.fails(proto.MethodSessionEvent, agentEvent("ses_1", ep, "trn_1", "evt_5", 5, `{"type":"x"}`)); pe.Code != proto.CodeForbidden {
		t.Fatalf("foreign executor: %+v", pe)
	}

	var got []string
	for range 3 {
		ev := wait(t, sink.events)
		if ev.MachineID != "mch_1" || ev.ExecutorID != "exe_a" || ev.TurnID != "trn_1" {
			t.Fatalf("event %+v", ev)
		}
		got = append(got, ev.EventID+" "+ev.Type)
	}
	if want := []string{"evt_1 session.status_running", "evt_2 agent.message", "evt_4 agent.error"}; !cmp.Equal(got, want) {
		t.Fatalf("delivered %v, want %v", got, want)
	}
	none(t, "event", sink.events)

	x.notify(proto.MethodEventDelta, proto.EventDeltaParams{SessionID: "ses_1", TurnID: "trn_1", EventID: "evt_6", Delta: json.RawMessage(`{"text":"he"}`)})
	if d := wait(t, sink.deltas); d.EventID != "evt_6" || string(d.Delta) != `{"text":"he"}` {
		t.Fatalf("delta %+v", d)
	}

	// The next turn.start goes to the same executor, epoch and ref; the
	// executor's -32013 means a turn is running.
	done := e.startAsync(turnOf("ses_1", "trn_2"))
	var p2 proto.TurnStartParams
	x.replyErr(x.expect(proto.MethodTurnStart, &p2), proto.Conflict("turn_running", "a turn is running", nil))
	if err := wait(t, done); !errors.Is(err, ErrTurnRunning) || baton.ErrorCode(err) != baton.ECodeConflict {
		t.Fatalf("second turn: %v", err)
	}
	if p2.Metadata.Epoch != ep || p2.ExecutorSessionRef != "ref_ses_1" {
		t.Fatalf("second turn.start %+v", p2)
	}
}

func TestAgentStartTurnPicksExecutor(t *testing.T) {
	e, _ := brainEnv(t)
	if err := e.hub.StartTurn(context.Background(), ptr(turnOf("ses_1", "trn_1"))); !errors.Is(err, ErrNoExecutor) {
		t.Fatalf("no executor: %v", err)
	}
	shell := e.dial(t, e.machineToken("mch_1", "cred_1"))
	shell.register(proto.RegisterParams{ExecutorID: "exe_0", Capabilities: proto.Capabilities{Process: &proto.ProcessCapability{}}})
	other := e.dial(t, e.machineToken("mch_2", "cred_2"))
	other.register(proto.RegisterParams{ExecutorID: "exe_0b", Capabilities: proto.Capabilities{Agent: &proto.AgentCapability{}}})
	a := e.agentExecutor(t, "exe_a", proto.AgentCapability{}, nil)
	b := e.agentExecutor(t, "exe_b", proto.AgentCapability{MaxSessions: 1}, nil)

	// exe_a (least loaded, first by id) is over capacity: exe_b takes it.
	done := e.startAsync(turnOf("ses_1", "trn_1"))
	a.replyErr(a.expect(proto.MethodTurnStart, nil), proto.Errorf(proto.CodeOverCapacity, "full"))
	b.reply(b.expect(proto.MethodTurnStart, nil), proto.TurnStartResult{Accepted: true})
	if err := wait(t, done); err != nil {
		t.Fatal(err)
	}
	// exe_b is now at max_sessions: the next session goes to exe_a.
	e.startOn(t, a, turnOf("ses_2", "trn_2"))
	// Only agent executors of the machine count: none is left for ses_3
	// once exe_a refuses too.
	done = e.startAsync(turnOf("ses_3", "trn_3"))
	a.replyErr(a.expect(proto.MethodTurnStart, nil), proto.Errorf(proto.CodeOverCapacity, "full"))
	if err := wait(t, done); !errors.Is(err, ErrOverCapacity) {
		t.Fatalf("all full: %v", err)
	}
	none(t, "frame to the shell", shell.inbox)
	none(t, "frame to another machine", other.inbox)
}

func ptr[T any](v T) *T { return &v }

func TestAgentInputCancelClose(t *testing.T) {
	e, sink := brainEnv(t)
	x := e.agentExecutor(t, "exe_a", proto.AgentCapability{}, nil)
	p := e.startOn(t, x, turnOf("ses_1", "trn_1"))
	ctx := context.Background()

	errc := make(chan error, 1)
	go func() {
		errc <- e.hub.TurnInput(ctx, "ses_1", "trn_1", "inp_1", json.RawMessage(`[{"type":"text","text":"more"}]`))
	}()
	var in proto.TurnInputParams
	x.reply(x.expect(proto.MethodTurnInput, &in), proto.Ack{OK: true})
	if err := wait(t, errc); err != nil || in.InputID != "inp_1" || in.TurnID != "trn_1" || !strings.Contains(string(in.Input), "more") {
		t.Fatalf("turn.input %+v: %v", in, err)
	}
	go func() { errc <- e.hub.TurnInput(ctx, "ses_1", "trn_1", "inp_2", json.RawMessage(`[]`)) }()
	x.replyErr(x.expect(proto.MethodTurnInput, nil), proto.Conflict("turn_not_running", "turn is not running", nil))
	if err := wait(t, errc); !errors.Is(err, ErrTurnNotRunning) {
		t.Fatalf("input to an ended turn: %v", err)
	}
	if err := e.hub.TurnInput(ctx, "ses_9", "trn_9", "inp_9", nil); !errors.Is(err, ErrNoAgentSession) {
		t.Fatalf("input to an unknown session: %v", err)
	}

	canc := make(chan bool, 1)
	go func() {
		ok, err := e.hub.CancelTurn(ctx, "ses_1", "trn_1")
		if err != nil {
			t.Error(err)
		}
		canc <- ok
	}()
	x.reply(x.expect(proto.MethodTurnCancel, nil), proto.TurnCancelResult{Canceled: true})
	if !wait(t, canc) {
		t.Fatal("cancel not reported")
	}

	e.hub.CloseAgent("ses_1")
	var cp proto.SessionCloseParams
	x.reply(x.expect(proto.MethodSessionClose, &cp), proto.SessionCloseResult{Closed: true})
	if cp.SessionID != "ses_1" {
		t.Fatalf("session.close %+v", cp)
	}
	// Events still flow until the executor's session.ended.
	x.acked(agentEvent("ses_1", p.Metadata.Epoch, "trn_1", "evt_1", 1, `{"type":"session.status_idle","turn_outcome":"canceled"}`))
	if err := e.hub.StartTurn(ctx, ptr(turnOf("ses_1", "trn_2"))); !errors.Is(err, ErrAgentClosing) {
		t.Fatalf("turn on a closing session: %v", err)
	}
	x.ok(proto.MethodSessionEnded, proto.SessionEndedParams{SessionID: "ses_1", Epoch: p.Metadata.Epoch, Reason: "closed"}, nil)
	x.ok(proto.MethodSessionEnded, proto.SessionEndedParams{SessionID: "ses_1", Epoch: p.Metadata.Epoch, Reason: "closed"}, nil) // a retry
	wait(t, sink.events)
	none(t, "lost report of a closed session", sink.lost)
	// The session id starts afresh: a new epoch and no ref.
	p2 := e.startOn(t, x, turnOf("ses_1", "trn_2"))
	if p2.Metadata.Epoch <= p.Metadata.Epoch || p2.ExecutorSessionRef != "" {
		t.Fatalf("reopened turn.start %+v", p2)
	}
	// An unprompted session.ended is a lost session.
	x.ok(proto.MethodSessionEnded, proto.SessionEndedParams{SessionID: "ses_1", Epoch: p2.Metadata.Epoch, Reason: "crashed"}, nil)
	if l := wait(t, sink.lost); l.session != "ses_1" || !errors.Is(l.err, ErrSessionEnded) {
		t.Fatalf("lost %+v", l)
	}
}

func interactionReq(id, kind, toolUse string) proto.InteractionRequestParams {
	return proto.InteractionRequestParams{SessionID: "ses_1", TurnID: "trn_1", InteractionID: id, Kind: kind, ToolUseID: toolUse, Prompt: "Proceed?"}
}

func (x *texec) platformID(p proto.InteractionRequestParams) string {
	x.t.Helper()
	var res proto.InteractionRequestResult
	x.ok(proto.MethodInteractionRequest, p, &res)
	return res.PlatformInteractionID
}

func TestInteractions(t *testing.T) {
	e, sink := brainEnv(t)
	x := e.agentExecutor(t, "exe_a", proto.AgentCapability{}, nil)
	e.startOn(t, x, turnOf("ses_1", "trn_1"))

	q := x.platformID(interactionReq("ixn_1", "question", ""))
	if !strings.HasPrefix(q, "int_") {
		t.Fatalf("platform id %q", q)
	}
	if in := wait(t, sink.ixs); in.ID != q || in.Kind != "question" || in.Prompt != "Proceed?" || in.TurnID != "trn_1" {
		t.Fatalf("interaction %+v", in)
	}
	if again := x.platformID(interactionReq("ixn_1", "question", "")); again != q {
		t.Fatalf("repeat named %q, want %q", again, q)
	}
	if pe := x.fails(proto.MethodInteractionRequest, interactionReq("ixn_1", "permission", "")); pe.Code != proto.CodeConflict {
		t.Fatalf("other kind: %+v", pe)
	}
	appr := "appr_0123456789abcdef01234567"
	if got := x.platformID(interactionReq(appr, "permission", "toolu_1")); got != appr {
		t.Fatalf("approval id not adopted: %q", got)
	}
	if pe := x.fails(proto.MethodInteractionRequest, interactionReq(appr, "permission", "toolu_2")); pe.Code != proto.CodeConflict {
		t.Fatalf("other tool_use_id in the same epoch: %+v", pe)
	}
	wait(t, sink.ixs)
	none(t, "second interaction", sink.ixs)

	// The first answer wins and goes back under the executor's id.
	if err := e.hub.RespondInteraction("ses_1", q, baton.InteractionAnswer{Text: "blue"}); err != nil {
		t.Fatal(err)
	}
	var rp proto.InteractionResponseParams
	x.reply(x.expect(proto.MethodInteractionResponse, &rp), proto.Accepted{Accepted: true})
	if rp.InteractionID != "ixn_1" || rp.Status != "resolved" || rp.Answer == nil || rp.Answer.Text != "blue" {
		t.Fatalf("interaction.response %+v", rp)
	}
	if err := e.hub.RespondInteraction("ses_1", q, baton.InteractionAnswer{Text: "red"}); !errors.Is(err, ErrAnswered) {
		t.Fatalf("second answer: %v", err)
	}
	if err := e.hub.RespondInteraction("ses_2", appr, baton.InteractionAnswer{}); !errors.Is(err, ErrNoInteraction) {
		t.Fatalf("answer from another session: %v", err)
	}
	// The executor withdraws the approval; answering it is too late.
	x.ok(proto.MethodInteractionCancel, proto.InteractionCancelParams{InteractionID: appr, Reason: "resolved_locally"}, nil)
	if got := wait(t, sink.ended); got != appr+" canceled resolved_locally" {
		t.Fatalf("ended %q", got)
	}
	x.ok(proto.MethodInteractionCancel, proto.InteractionCancelParams{InteractionID: appr, Reason: "resolved_locally"}, nil)
	none(t, "second cancel", sink.ended)
	if err := e.hub.RespondInteraction("ses_1", appr, baton.InteractionAnswer{Decision: "allow"}); !errors.Is(err, ErrAnswered) {
		t.Fatalf("answer after cancel: %v", err)
	}
	// At expires_at the executor hears "expired".
	exp := interactionReq("ixn_2", "question", "")
	at := t0.Add(time.Minute)
	exp.ExpiresAt = &at
	id2 := x.platformID(exp)
	wait(t, sink.ixs)
	e.clock.Advance(time.Minute)
	rp = proto.InteractionResponseParams{}
	x.reply(x.expect(proto.MethodInteractionResponse, &rp), proto.Accepted{Accepted: false})
	if rp.InteractionID != "ixn_2" || rp.Status != "expired" || rp.Answer != nil {
		t.Fatalf("expiry response %+v", rp)
	}
	if got := wait(t, sink.ended); got != id2+" expired " {
		t.Fatalf("ended %q", got)
	}
	if err := e.hub.RespondInteraction("ses_1", id2, baton.InteractionAnswer{Text: "late"}); !errors.Is(err, ErrAnswered) {
		t.Fatalf("answer after expiry: %v", err)
	}
}

// TestAgentResume: the executor's connection dies mid-turn with an answer
// and a custom tool result unanswered and an event unacknowledged; it
// resumes, is told the session's new epoch, gets both again, and its
// resent event (under the new epoch) is a duplicate; the old epoch is
// fenced.
func TestAgentResume(t *testing.T) {
	e, sink := brainEnv(t)
	x := e.agentExecutor(t, "exe_a", proto.AgentCapability{CustomTools: true}, nil)
	p := e.startOn(t, x, turnOf("ses_1", "trn_1"))
	ep := p.Metadata.Epoch
	x.acked(agentEvent("ses_1", ep, "trn_1", "evt_1", 1, `{"type":"session.status_running"}`))
	x.acked(agentEvent("ses_1", ep, "trn_1", "toolu_1", 2, `{"type":"agent.custom_tool_use","name":"lookup","input":{}}`))
	appr := "appr_aaaaaaaaaaaaaaaaaaaaaaaa"
	id := x.platformID(interactionReq(appr, "permission", "toolu_0"))
	wait(t, sink.ixs)
	if err := e.hub.RespondInteraction("ses_1", id, baton.InteractionAnswer{Decision: "allow"}); err != nil {
		t.Fatal(err)
	}
	x.expect(proto.MethodInteractionResponse, nil) // never answered
	if err := e.hub.CustomToolResult("ses_1", "toolu_1", baton.ClientResult{Content: json.RawMessage(`"42"`)}); err != nil {
		t.Fatal(err)
	}
	x.expect(proto.MethodCustomToolResult, nil) // never answered
	x.kill()
	e.clock.WaitArmed(t, window)

	y, res := e.agentRegister(t, "exe_a", proto.AgentCapability{CustomTools: true},
		&proto.Resume{ExecutorID: "exe_a", ActiveSessions: []proto.SessionEpoch{{SessionID: "ses_1", Epoch: ep, AckedSequence: ptr(int64(2))}}})
	if len(res.Sessions) != 1 || res.Sessions[0].SessionID != "ses_1" || res.Sessions[0].Epoch <= ep ||
		res.Sessions[0].AckedSequence == nil || *res.Sessions[0].AckedSequence != 2 {
		t.Fatalf("register result sessions %+v: want ses_1 at a new epoch, acked 2", res.Sessions)
	}
	old := ep
	ep = res.Sessions[0].Epoch
	if got := e.hub.BrainEpoch("ses_1"); got != ep {
		t.Fatalf("brain epoch %d, told %d", got, ep)
	}
	got := map[string]*proto.Frame{}
	for range 2 {
		f := y.next()
		got[f.Method] = f
		y.reply(f, proto.Accepted{Accepted: true})
	}
	var rp proto.InteractionResponseParams
	var cr proto.CustomToolResultParams
	if got[proto.MethodInteractionResponse] == nil || got[proto.MethodCustomToolResult] == nil {
		t.Fatalf("re-sent %v", got)
	}
	_ = got[proto.MethodInteractionResponse].Bind(&rp)
	_ = got[proto.MethodCustomToolResult].Bind(&cr)
	if rp.InteractionID != appr || rp.Answer == nil || rp.Answer.Decision != "allow" ||
		cr.ToolUseID != "toolu_1" || string(cr.Content) != `[{"type":"text","text":"42"}]` {
		t.Fatalf("re-sent %+v %+v", rp, cr)
	}
	// Events of the epoch before the resume are a stale owner's, even a
	// duplicate.
	for _, ev := range []proto.SessionEventParams{
		agentEvent("ses_1", old, "trn_1", "toolu_1", 2, `{"type":"agent.custom_tool_use","name":"lookup","input":{}}`),
		agentEvent("ses_1", old, "trn_1", "evt_3", 3, `{"type":"agent.message","content":[]}`),
	} {
		if pe := y.fails(proto.MethodSessionEvent, ev); pe.Code != proto.CodeConflict || pe.Detail().Reason != proto.ReasonStaleEpoch {
			t.Fatalf("event %s of the old epoch: %+v", ev.EventID, pe)
		}
	}
	if got := y.acked(agentEvent("ses_1", ep, "trn_1", "toolu_1", 2, `{"type":"agent.custom_tool_use","name":"lookup","input":{}}`)); got != 2 {
		t.Fatalf("resent event acked %d", got)
	}
	y.acked(agentEvent("ses_1", ep, "trn_1", "evt_3", 3, `{"type":"agent.message","content":[]}`))
	// After the resume the approval id names the same interaction, even
	// for another tool_use_id (a new epoch), and it is answered again.
	if again := y.platformID(interactionReq(appr, "permission", "toolu_9")); again != appr {
		t.Fatalf("adopted id after resume: %q", again)
	}
	y.reply(y.expect(proto.MethodInteractionResponse, &rp), proto.Accepted{Accepted: false})
	// A repeated custom tool result is not sent again: the next frame is
	// the input.
	if err := e.hub.CustomToolResult("ses_1", "toolu_1", baton.ClientResult{Content: json.RawMessage(`"43"`)}); err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() {
		errc <- e.hub.TurnInput(context.Background(), "ses_1", "trn_1", "inp_1", json.RawMessage(`[]`))
	}()
	y.reply(y.expect(proto.MethodTurnInput, nil), proto.Ack{OK: true})
	if err := wait(t, errc); err != nil {
		t.Fatal(err)
	}
	var types []string
	for range 3 {
		types = append(types, wait(t, sink.events).EventID)
	}
	if !cmp.Equal(types, []string{"evt_1", "toolu_1", "evt_3"}) {
		t.Fatalf("delivered %v", types)
	}
	none(t, "duplicate event", sink.events)
	none(t, "second interaction", sink.ixs)
	none(t, "lost", sink.lost)
}

func TestAgentLost(t *testing.T) {
	e, sink := brainEnv(t)
	x := e.agentExecutor(t, "exe_a", proto.AgentCapability{}, nil)
	e.startOn(t, x, turnOf("ses_1", "trn_1"))
	e.startOn(t, x, turnOf("ses_2", "trn_2"))

	// Back without ses_2 in its resume: ses_2 is lost at once.
	x.kill()
	e.clock.WaitArmed(t, window)
	y := e.agentExecutor(t, "exe_a", proto.AgentCapability{},
		&proto.Resume{ExecutorID: "exe_a", ActiveSessions: []proto.SessionEpoch{{SessionID: "ses_1", Epoch: 1}}})
	if l := wait(t, sink.lost); l.session != "ses_2" || !errors.Is(l.err, ErrSessionLost) {
		t.Fatalf("lost %+v", l)
	}
	// Away for the whole resume window: ses_1 is lost.
	y.kill()
	e.clock.WaitArmed(t, window)
	e.clock.Advance(window)
	if l := wait(t, sink.lost); l.session != "ses_1" || !errors.Is(l.err, ErrResumeWindow) {
		t.Fatalf("lost %+v", l)
	}
	if err := e.hub.TurnInput(context.Background(), "ses_1", "trn_1", "inp_1", nil); !errors.Is(err, ErrNoAgentSession) {
		t.Fatalf("input after loss: %v", err)
	}
}

// TestAgentResumeAfterHarnessRestart: a hub that never saw the session
// takes it back from the resume's acked_sequence.
func TestAgentResumeAfterHarnessRestart(t *testing.T) {
	e, sink := brainEnv(t)
	x, res := e.agentRegister(t, "exe_a", proto.AgentCapability{},
		&proto.Resume{ExecutorID: "exe_a", ActiveSessions: []proto.SessionEpoch{{SessionID: "ses_9", Epoch: 7, AckedSequence: ptr(int64(4))}}})
	if len(res.Sessions) != 1 || res.Sessions[0].SessionID != "ses_9" || res.Sessions[0].Epoch <= 7 || *res.Sessions[0].AckedSequence != 4 {
		t.Fatalf("register result sessions %+v", res.Sessions)
	}
	ep := res.Sessions[0].Epoch
	if pe := x.fails(proto.MethodSessionEvent, agentEvent("ses_9", 7, "trn_9", "evt_5", 5, `{"type":"agent.message","content":[]}`)); pe.Code != proto.CodeConflict {
		t.Fatalf("event of the old epoch: %+v", pe)
	}
	if got := x.acked(agentEvent("ses_9", ep, "trn_9", "evt_4", 4, `{"type":"agent.message","content":[]}`)); got != 4 {
		t.Fatalf("acked %d", got)
	}
	x.acked(agentEvent("ses_9", ep, "trn_9", "evt_5", 5, `{"type":"session.status_idle","turn_outcome":"completed"}`))
	if ev := wait(t, sink.events); ev.EventID != "evt_5" || ev.SessionID != "ses_9" || ev.MachineID != "mch_1" {
		t.Fatalf("event %+v", ev)
	}
	none(t, "duplicate", sink.events)
}
