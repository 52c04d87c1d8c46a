package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/client"
	exsdk "github.com/baton-engine/baton/client/executor"
)

// End-to-end tests of executors as brains (bma.executor.v1.1): a profile
// whose brain is a machine's agent executor runs its turns there. The
// executor is the real SDK (client/executor) with brainAgent, a tiny
// scripted agent; the drivers are the Go client SDK.

// brainAgent runs turns by the first word of their input: "hello" (a
// previewed message), "tool <name>" (a custom tool call), "ask" (an
// interaction), "wait" (answers the first input), "chunks" (four messages
// in steps the test releases), "fail".
type brainAgent struct {
	opens  atomic.Int32
	runs   atomic.Int32
	closed chan string
	steps  chan string   // agent → test
	gate   chan struct{} // test → agent

	mu sync.Mutex
	md exsdk.TurnMetadata // the last turn's
}

func newBrainAgent() *brainAgent {
	return &brainAgent{closed: make(chan string, 8), steps: make(chan string, 8), gate: make(chan struct{})}
}

func (a *brainAgent) Open(_ context.Context, sessionID, _ string) (string, error) {
	a.opens.Add(1)
	return "ref-" + sessionID, nil
}

func (a *brainAgent) Close(_ context.Context, sessionID string) error {
	a.closed <- sessionID
	return nil
}

func (a *brainAgent) Run(ctx context.Context, t *exsdk.Turn) error {
	a.runs.Add(1)
	a.mu.Lock()
	a.md = t.Metadata
	a.mu.Unlock()
	say := func(text string) error {
		_, err := t.Emit(exsdk.TextMessageEvent(text))
		return err
	}
	wait := func() error {
		select {
		case <-a.gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	cmd, arg, _ := strings.Cut(inputText(t.Input), " ")
	switch cmd {
	case "hello":
		ev := exsdk.TextMessageEvent("hi there")
		ev.ID = "evt_hello_" + t.ID
		_ = t.Delta(ev.ID, map[string]string{"type": "text_delta", "text": "hi "})
		_ = t.Delta(ev.ID, map[string]string{"type": "text_delta", "text": "there"})
		_, err := t.Emit(ev)
		return err
	case "tool":
		r, err := t.CustomTool(ctx, arg, json.RawMessage(`{"q":"life"}`))
		if err != nil {
			return err
		}
		text := inputText(r.Content)
		if r.IsError {
			text = "error: " + text
		}
		return say("tool said: " + text)
	case "ask":
		ans, err := t.RequestInteraction(ctx, exsdk.Interaction{Kind: exsdk.KindQuestion, Prompt: "Which color?", Options: []string{"red", "blue"}})
		if err != nil {
			return err
		}
		return say("answer: " + ans.Status + " " + ans.Text)
	case "wait":
		a.steps <- "waiting"
		for {
			select {
			case <-t.InputReady():
				if ins := t.Inputs(); len(ins) > 0 {
					return say("got: " + inputText(ins[0].Content))
				}
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	case "chunks":
		if err := say("part 1"); err != nil {
			return err
		}
		a.steps <- "part 1"
		if err := wait(); err != nil {
			return err
		}
		_ = say("part 2")
		_ = say("part 3")
		a.steps <- "part 3"
		if err := wait(); err != nil {
			return err
		}
		return say("part 4")
	case "fail":
		return errors.New("boom")
	}
	return say("unknown " + cmd)
}

// inputText joins the text of content blocks (or a JSON string).
func inputText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var bs []struct{ Type, Text string }
	_ = json.Unmarshal(raw, &bs)
	var parts []string
	for _, b := range bs {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, " ")
}

// brainServer is a server with a machine, a profile whose brain it is,
// and the executors' network.
type brainServer struct {
	*server
	net     *execNet
	machine string
	secret  string
	profile string
	agent   *brainAgent
}

func newBrainServer(t *testing.T) *brainServer {
	t.Helper()
	s := startServer(t, func(env map[string]string) { env["BAE_SHUTDOWN_TIMEOUT"] = "5" })
	b := &brainServer{server: s, net: newExecNet(t, s), agent: newBrainAgent()}
	b.machine, b.secret = s.machine(fmt.Sprintf("brain-%d", profileSeq.Add(1)))
	b.profile = loopProfile(t, s, map[string]any{"primary_provider": "script", "allowed_tools": []string{"lookup"},
		"brain": map[string]any{"type": "executor", "machine_id": b.machine}})
	return b
}

func (b *brainServer) config() exsdk.Config {
	return exsdk.Config{Credential: b.secret, Scope: exsdk.Machine(b.machine), ExecutorID: "exe_brain",
		Capabilities: exsdk.Capabilities{Agent: &exsdk.AgentCapability{MaxSessions: 4, CustomTools: true}}, Agent: b.agent}
}

// executor starts the machine's agent executor.
func (b *brainServer) executor(t *testing.T) *exsdk.Executor {
	t.Helper()
	return startSDKExecutor(t, b.net, b.config())
}

// driver opens (or, with sid, joins) a session; tools are registered on
// the harness first, so that they are declared.
func (b *brainServer) driver(t *testing.T, sid string, tools map[string]client.ToolHandler) (*client.Session, string) {
	t.Helper()
	h, keyID := loopHarness(t, b.server, b.profile)
	for name, fn := range tools {
		h.RegisterTool(client.ToolDef{Name: name, InputSchema: json.RawMessage(`{"type":"object"}`)}, fn)
	}
	var sess *client.Session
	var err error
	if sid == "" {
		sess, err = h.Connect(loopCtx(t))
	} else {
		sess, err = h.Join(loopCtx(t), sid)
	}
	if err != nil {
		t.Fatal(err)
	}
	return sess, keyID
}

func (b *brainServer) step(t *testing.T, want string) {
	t.Helper()
	select {
	case got := <-b.agent.steps:
		if got != want {
			t.Fatalf("agent step %q, want %q", got, want)
		}
	case <-time.After(loopWait):
		t.Fatalf("agent never reached %q", want)
	}
}

// nextOf reads sub until an event of one of the types, failing on time.
func nextOf(t *testing.T, sub *client.Subscription, types ...string) client.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), loopWait)
	defer cancel()
	for {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("waiting for %v: %v", types, err)
		}
		for _, typ := range types {
			if ev.Type == typ {
				return ev
			}
		}
	}
}

// TestBrainTurns: two turns run on the agent executor (one agent session,
// opened once); the agent's events are stored under their own types,
// attributed to the driver, and form the reply; a subscriber that asked
// for deltas gets the previews, one that did not never does.
func TestBrainTurns(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "brains serve only the sessions of the node they are connected to")
	b := newBrainServer(t)
	b.executor(t)
	sess, keyID := b.driver(t, "", nil)
	ctx := loopCtx(t)
	plain, err := sess.Subscribe(ctx, client.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	live, err := sess.Subscribe(ctx, client.SubscribeOptions{StreamDeltas: true})
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()

	var streamed []string
	reply, err := sess.SendStream(ctx, "hello", func(ev client.Event) {
		if ev.Type == client.DeltaType {
			streamed = append(streamed, ev.Delta)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := reply.Message.Text(); got != "hi there" {
		t.Fatalf("reply %q", got)
	}
	if !cmp.Equal(streamed, []string{"hi ", "there"}) {
		t.Fatalf("deltas on the caller's stream %q", streamed)
	}
	wantTypes := []string{"client.message.send", "session.status_running", "agent.message", "session.status_idle"}
	if got := types(reply.Events); !cmp.Equal(got, wantTypes) {
		t.Fatalf("result events %v, want %v", got, wantTypes)
	}
	for _, ev := range reply.Events {
		if ev.ClientKeyID != keyID {
			t.Errorf("%s attributed to %q, want %q", ev.Type, ev.ClientKeyID, keyID)
		}
	}
	msg := payload(t, reply.Events[2])
	if msg["event_id"] == "" || msg["turn_id"] == "" || msg["type"] != nil {
		t.Fatalf("agent.message payload %v", msg)
	}
	if idle := payload(t, reply.Events[3]); idle["turn_outcome"] != "completed" || idle["turn_id"] != msg["turn_id"] {
		t.Fatalf("status_idle payload %v", idle)
	}

	// The subscribers: deltas only for the one that asked.
	var sawDelta []string
	for {
		ev := nextOf(t, live, client.DeltaType, "agent.message")
		if ev.Type == "agent.message" {
			break
		}
		sawDelta = append(sawDelta, ev.Delta)
	}
	if !cmp.Equal(sawDelta, []string{"hi ", "there"}) {
		t.Fatalf("deltas of the subscriber that asked %q", sawDelta)
	}
	if ev := nextOf(t, plain, client.DeltaType, "agent.message"); ev.Type != "agent.message" {
		t.Fatalf("a subscriber without stream_deltas got %s", ev.Type)
	}
	// Without stream_deltas the raw stream has no delta frame at all.
	_, frames := rpcResult(t, b.server, sess.ID, sess.Key, "session.sendMessage", map[string]any{"message": map[string]any{"content": "hello"}})
	for _, f := range frames {
		if f.Method != "session.event" {
			t.Fatalf("frame %s on a stream without stream_deltas", f.raw)
		}
	}
	b.agent.mu.Lock()
	md := b.agent.md
	b.agent.mu.Unlock()
	if md.Epoch <= 0 || md.ModelToken == "" || !strings.HasSuffix(md.ModelBaseURL, "/v1/model") {
		t.Fatalf("turn metadata %+v", md)
	}
	if n := b.agent.opens.Load(); n != 1 {
		t.Fatalf("agent session opened %d times", n)
	}
	if n := b.agent.runs.Load(); n != 2 {
		t.Fatalf("%d turns ran", n)
	}
	// A failed turn is a result, and the session stays open.
	reply, err = sess.Send(ctx, "fail")
	if err != nil || reply.Message.Text() != "The agent turn failed: boom" {
		t.Fatalf("failed turn: %v %+v", err, reply)
	}
	mustReply(t, recv(t, goSend(ctx, sess, "hello")), "hi there")

	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case sid := <-b.agent.closed:
		if sid != sess.ID {
			t.Fatalf("agent closed %s", sid)
		}
	case <-time.After(loopWait):
		t.Fatal("session.close never reached the agent")
	}
}

// TestBrainInputJoinsTurn: a message sent while a turn runs is the
// turn's input, not a second turn; both calls end with the turn.
func TestBrainInputJoinsTurn(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "brains serve only the sessions of the node they are connected to")
	b := newBrainServer(t)
	b.executor(t)
	sess, _ := b.driver(t, "", nil)
	other, otherKey := b.driver(t, sess.ID, nil)
	ctx := loopCtx(t)
	first := goSend(ctx, sess, "wait")
	b.step(t, "waiting")
	second := goSend(ctx, other, "more please")
	r1 := mustReply(t, recv(t, first), "got: more please")
	r2 := mustReply(t, recv(t, second), "got: more please")
	if n := b.agent.runs.Load(); n != 1 {
		t.Fatalf("%d turns ran", n)
	}
	if r2.Events[0].Type != "client.message.send" || r2.Events[0].ClientKeyID != otherKey {
		t.Fatalf("joined call's first event %+v", r2.Events[0])
	}
	if got := types(r1.Events); got[len(got)-1] != "session.status_idle" {
		t.Fatalf("first call's events %v", got)
	}
}

// TestBrainCancel: cancelTurn stops the running agent turn; the reply
// says so and the session takes the next turn.
func TestBrainCancel(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "brains serve only the sessions of the node they are connected to")
	b := newBrainServer(t)
	b.executor(t)
	sess, _ := b.driver(t, "", nil)
	ctx := loopCtx(t)
	out := goSend(ctx, sess, "wait")
	b.step(t, "waiting")
	if err := sess.CancelTurn(ctx); err != nil {
		t.Fatal(err)
	}
	r := mustReply(t, recv(t, out), "The turn was cancelled.")
	idle := ofType(r.Events, "session.status_idle")
	if len(idle) != 1 || payload(t, idle[0])["turn_outcome"] != "canceled" {
		t.Fatalf("events %v", types(r.Events))
	}
	if len(ofType(loopEvents(t, b.server, sess.ID), "session.turn.cancel")) != 1 {
		t.Fatal("no session.turn.cancel event")
	}
	var rpcErr *client.RPCError
	if err := sess.CancelTurn(ctx); !errors.As(err, &rpcErr) || rpcErr.Code != -32000 {
		t.Fatalf("cancel with no turn: %v", err)
	}
	mustReply(t, recv(t, goSend(ctx, sess, "hello")), "hi there")
}

// TestBrainCustomTool: the agent calls the driver's declared tool; the
// turn pauses for it exactly like a client tool, the Go SDK's harness
// runs it and its result resumes the agent. An undeclared tool gets an
// error result without a pause.
func TestBrainCustomTool(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "brains serve only the sessions of the node they are connected to")
	b := newBrainServer(t)
	b.executor(t)
	var calls atomic.Int32
	sess, keyID := b.driver(t, "", map[string]client.ToolHandler{
		"lookup": func(_ context.Context, input json.RawMessage) (any, error) {
			calls.Add(1)
			return "42 for " + string(input), nil
		},
	})
	ctx := loopCtx(t)
	r := mustReply(t, recv(t, goSend(ctx, sess, "tool lookup")), `tool said: 42 for {"q":"life"}`)
	if calls.Load() != 1 {
		t.Fatalf("tool ran %d times", calls.Load())
	}
	uses := ofType(r.Events, "agent.custom_tool_use")
	results := ofType(r.Events, "tool.result")
	if len(uses) != 1 || len(results) != 1 {
		t.Fatalf("events %v", types(r.Events))
	}
	use, res := payload(t, uses[0]), payload(t, results[0])
	if use["name"] != "lookup" || res["tool_use_id"] != use["event_id"] || res["dispatch"] != "client" || results[0].ClientKeyID != keyID {
		t.Fatalf("custom_tool_use %v, tool.result %v", use, res)
	}
	// The harness answered the pause with one tool_result message.
	answered := 0
	for _, ev := range ofType(loopEvents(t, b.server, sess.ID), "client.message.send") {
		var m client.Message
		_ = json.Unmarshal(ev.Payload, &m)
		if bl := m.Blocks(); len(bl) == 1 && bl[0].Type == "tool_result" && bl[0].ToolUseID == use["event_id"] {
			answered++
		}
	}
	if answered != 1 {
		t.Fatalf("%d tool_result messages", answered)
	}

	mustReply(t, recv(t, goSend(ctx, sess, "tool nope")), "tool said: error: tool nope is not declared by the acting client")
	if calls.Load() != 1 {
		t.Fatal("an undeclared tool reached the driver")
	}
}

// TestBrainInteraction: the agent asks; two drivers answer at once; the
// first answer wins, the other is refused, and the agent gets the winner.
func TestBrainInteraction(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "brains serve only the sessions of the node they are connected to")
	b := newBrainServer(t)
	b.executor(t)
	sess, _ := b.driver(t, "", nil)
	other, _ := b.driver(t, sess.ID, nil)
	ctx := loopCtx(t)
	sub, err := sess.Subscribe(ctx, client.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	out := goSend(ctx, sess, "ask")
	req := payload(t, nextOf(t, sub, "interaction.request"))
	id, _ := req["interaction_id"].(string)
	if !strings.HasPrefix(id, "int_") || req["kind"] != "question" || req["prompt"] != "Which color?" || req["turn_id"] == "" {
		t.Fatalf("interaction.request %v", req)
	}
	if opts, _ := req["options"].([]any); len(opts) != 2 {
		t.Fatalf("options %v", req["options"])
	}
	answers := []string{"red", "blue"}
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i, s := range []*client.Session{sess, other} {
		wg.Go(func() {
			errs[i] = s.Call(ctx, "session.respondInteraction", map[string]any{"interaction_id": id, "answer": map[string]string{"text": answers[i]}}, nil)
		})
	}
	wg.Wait()
	winner := -1
	for i, err := range errs {
		var rpcErr *client.RPCError
		switch {
		case err == nil && winner < 0:
			winner = i
		case errors.As(err, &rpcErr) && rpcErr.Code == -32000 && strings.Contains(rpcErr.Message, "first answer wins"):
		default:
			t.Fatalf("answers: %v", errs)
		}
	}
	if winner < 0 {
		t.Fatalf("no answer won: %v", errs)
	}
	mustReply(t, recv(t, out), "answer: resolved "+answers[winner])
	resp := ofType(loopEvents(t, b.server, sess.ID), "interaction.response")
	if len(resp) != 1 || payload(t, resp[0])["interaction_id"] != id {
		t.Fatalf("interaction.response events %v", resp)
	}
	var rpcErr *client.RPCError
	err = sess.Call(ctx, "session.respondInteraction", map[string]any{"interaction_id": "int_nope", "answer": "x"}, nil)
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32000 {
		t.Fatalf("unknown interaction: %v", err)
	}
	err = sess.Call(ctx, "session.respondInteraction", map[string]any{"interaction_id": id}, nil)
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32602 {
		t.Fatalf("missing answer: %v", err)
	}
}

// TestBrainNoExecutor: without a connected agent executor a message is a
// clear error, and the session still takes the next one.
func TestBrainNoExecutor(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "brains serve only the sessions of the node they are connected to")
	b := newBrainServer(t)
	sess, _ := b.driver(t, "", nil)
	ctx := loopCtx(t)
	_, err := sess.Send(ctx, "hello")
	var rpcErr *client.RPCError
	if !errors.As(err, &rpcErr) || rpcErr.Code != -32000 || !strings.Contains(rpcErr.Message, b.machine) {
		t.Fatalf("send without executor: %v", err)
	}
	b.executor(t)
	mustReply(t, recv(t, goSend(ctx, sess, "hello")), "hi there")
}

// TestBrainExecutorReconnectMidTurn: the executor stops hearing the
// harness mid-turn (its events arrive, their acknowledgements do not),
// then its connection drops; it reconnects, resumes and re-sends the
// events the harness already has. Each is stored once and the turn ends
// normally.
func TestBrainExecutorReconnectMidTurn(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "brains serve only the sessions of the node they are connected to")
	b := newBrainServer(t)
	deaf := &deafNet{execNet: b.net, changed: make(chan struct{})}
	openExecutor(t, deaf, b.config())
	sess, _ := b.driver(t, "", nil)
	ctx := loopCtx(t)
	sub, err := sess.Subscribe(ctx, client.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	out := goSend(ctx, sess, "chunks")
	b.step(t, "part 1")
	nextOf(t, sub, "agent.message")
	deaf.set(true)
	b.agent.gate <- struct{}{}
	b.step(t, "part 3")
	for range 2 { // parts 2 and 3 are stored, unacknowledged
		nextOf(t, sub, "agent.message")
	}
	dials := b.net.dialCount()
	b.net.kill()
	deaf.set(false)
	b.net.waitFor(t, "a reconnect", func() bool { return b.net.dialCount() > dials })
	b.agent.gate <- struct{}{}
	r := mustReply(t, recv(t, out), "part 1part 2part 3part 4")
	msgs := ofType(loopEvents(t, b.server, sess.ID), "agent.message")
	ids := map[string]bool{}
	for _, ev := range msgs {
		ids[payload(t, ev)["event_id"].(string)] = true
	}
	if len(msgs) != 4 || len(ids) != 4 {
		t.Fatalf("%d agent.message events, %d event ids", len(msgs), len(ids))
	}
	if n := len(ofType(r.Events, "agent.message")); n != 4 {
		t.Fatalf("result has %d agent.message events", n)
	}
}

// deafNet is an execNet whose connections, while deaf, deliver nothing to
// the executor (its writes still go out).
type deafNet struct {
	*execNet
	mu      sync.Mutex
	deaf    bool
	changed chan struct{}
}

func (d *deafNet) set(v bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.deaf = v
	close(d.changed)
	d.changed = make(chan struct{})
}

func (d *deafNet) state() (bool, <-chan struct{}) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.deaf, d.changed
}

func (d *deafNet) client() *http.Client {
	return &http.Client{Transport: &http.Transport{DialContext: d.dial, DisableKeepAlives: true}}
}

func (d *deafNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := d.execNet.dial(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &deafConn{execConn: c.(*execConn), net: d}, nil
}

type deafConn struct {
	*execConn
	net *deafNet
}

func (c *deafConn) Read(p []byte) (int, error) {
	for {
		deaf, changed := c.net.state()
		if !deaf {
			return c.execConn.Read(p)
		}
		select {
		case <-changed:
		case <-c.closed:
			return 0, net.ErrClosed
		}
	}
}

// openExecutor opens an SDK executor on d; Close runs at cleanup.
func openExecutor(t *testing.T, d *deafNet, cfg exsdk.Config) {
	t.Helper()
	cfg.BaseURL, cfg.HTTPClient = execBase, d.client()
	cfg.ReconnectMin, cfg.ReconnectMax = 5*time.Millisecond, 50*time.Millisecond
	e, err := exsdk.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Open(loopCtx(t)); err != nil {
		t.Fatalf("executor open: %v", err)
	}
	t.Cleanup(func() {
		d.set(false)
		ctx, cancel := context.WithTimeout(context.Background(), loopWait)
		defer cancel()
		_ = e.Close(ctx)
	})
}
