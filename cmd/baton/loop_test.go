package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/client"
)

// End-to-end tests of the session loop, driven through the Go SDK against
// an in-process server whose providers are the scripted model and
// mockProvider, a real Anthropic-wire server on loopback.

// TestLoopHarnessToolRoundTrip: a client tool call runs the harness's
// handler and its result reaches the model; two calls in one message run
// and both results go back in tool_use order.
func TestLoopHarnessToolRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	s := startServer(t)
	pro := loopProfile(t, s, map[string]any{"primary_provider": "script", "allowed_tools": []string{"get_time", "get_date"}})
	h, _ := loopHarness(t, s, pro)
	var mu sync.Mutex
	var ran []string
	tool := func(name, result string) {
		h.RegisterTool(client.ToolDef{Name: name, Description: "test"}, func(_ context.Context, in json.RawMessage) (any, error) {
			mu.Lock()
			defer mu.Unlock()
			ran = append(ran, name+string(in))
			return result, nil
		})
	}
	tool("get_time", "12:00")
	tool("get_date", "2025-01-31")
	sess, err := h.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}

	r, err := sess.Send(ctx, `call get_time {"tz":"UTC"}`)
	mustReply(t, sent{r, err}, "get_time returned: 12:00")
	want := []string{
		"client.message.send", "provider.request", "provider.response", "tool.call", "server.message.send",
		"client.message.send", "tool.result", "provider.request", "provider.response", "server.message.send",
	}
	if d := cmp.Diff(want, types(r.Events)); d != "" {
		t.Errorf("events (-want +got):\n%s", d)
	}
	if call := payload(t, ofType(r.Events, "tool.call")[0]); call["dispatch"] != "client" || call["name"] != "get_time" {
		t.Errorf("tool.call %v", call)
	}
	if d := cmp.Diff([]string{`get_time{"tz":"UTC"}`}, ran); d != "" {
		t.Errorf("handlers (-want +got):\n%s", d)
	}

	ran = nil
	r, err = sess.Send(ctx, "call get_time\ncall get_date")
	mustReply(t, sent{r, err}, "get_time returned: 12:00\nget_date returned: 2025-01-31")
	if len(ran) != 2 {
		t.Fatalf("handlers ran %v, want both", ran)
	}
	calls := ofType(r.Events, "tool.call")
	resume := ofType(r.Events, "client.message.send")[1]
	var msg client.Message
	json.Unmarshal(resume.Payload, &msg)
	wantBlocks := []string{
		fmt.Sprintf("tool_result:%s:error=false:12:00", payload(t, calls[0])["id"]),
		fmt.Sprintf("tool_result:%s:error=false:2025-01-31", payload(t, calls[1])["id"]),
	}
	if d := cmp.Diff(wantBlocks, blocksOf(t, msg.Content)); d != "" {
		t.Errorf("merged results (-want +got):\n%s", d)
	}
	if n := len(ofType(r.Events, "tool.result")); n != 2 {
		t.Errorf("%d tool.result events, want 2", n)
	}
}

// TestLoopFIFOQueue: while driver A's turn is held in the provider, B and
// then C send; B runs only after A's turn ended and C only after B's, and
// B's stream carries nothing but its own turn.
func TestLoopFIFOQueue(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	m := newMockProvider(t)
	s := startServer(t, loopConfig(t, m.entry("mock")))
	pro := loopProfile(t, s, map[string]any{"primary_provider": "mock"})
	ha, aID := loopHarness(t, s, pro)
	hb, bID := loopHarness(t, s, pro)
	hc, cID := loopHarness(t, s, pro)
	var mu sync.Mutex
	var bStream []client.Event
	hb.OnEvent(func(ev client.Event) {
		mu.Lock()
		defer mu.Unlock()
		bStream = append(bStream, ev)
	})
	sa, err := ha.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := hb.Join(ctx, sa.ID)
	if err != nil {
		t.Fatal(err)
	}
	sc, err := hc.Join(ctx, sa.ID)
	if err != nil {
		t.Fatal(err)
	}

	reply, gate := mockText("reply to A").gated()
	m.push(reply)
	aDone := goSend(ctx, sa, "from A")
	gate.wait(t)
	bDone := goSend(ctx, sb, "from B")
	waitQueued(t, 1)
	cDone := goSend(ctx, sc, "from C")
	waitQueued(t, 2)
	mu.Lock()
	early := len(bStream)
	mu.Unlock()
	if early != 0 {
		t.Errorf("B's stream got %d frame(s) while queued", early)
	}
	gate.open()

	mustReply(t, recv(t, aDone), "reply to A")
	mustReply(t, recv(t, bDone), "mock: from B")
	mustReply(t, recv(t, cDone), "mock: from C")

	reqs := m.requests()
	var order []string
	for _, r := range reqs {
		order = append(order, r.lastUserText())
	}
	if d := cmp.Diff([]string{"from A", "from B", "from C"}, order); d != "" {
		t.Errorf("provider request order (-want +got):\n%s", d)
	}
	if d := cmp.Diff([]string{"user", "assistant", "user"}, reqs[1].roles()); d != "" {
		t.Errorf("B's turn saw A's exchange? roles (-want +got):\n%s", d)
	}
	var turns []string
	names := map[string]string{aID: "A", bID: "B", cID: "C"}
	for _, ev := range loopEvents(t, s, sa.ID) {
		if ev.Type == "client.message.send" || ev.Type == "server.message.send" {
			turns = append(turns, names[ev.ClientKeyID]+" "+ev.Type)
		}
	}
	want := []string{
		"A client.message.send", "A server.message.send",
		"B client.message.send", "B server.message.send",
		"C client.message.send", "C server.message.send",
	}
	if d := cmp.Diff(want, turns); d != "" {
		t.Errorf("turn order in the log (-want +got):\n%s", d)
	}
	mu.Lock()
	defer mu.Unlock()
	if d := cmp.Diff([]string{"provider.request", "provider.response", "server.message.send"}, types(bStream)); d != "" {
		t.Errorf("B's stream (-want +got):\n%s", d)
	}
	for _, ev := range bStream {
		if ev.ClientKeyID != bID {
			t.Errorf("B's stream carried %s of %s", ev.Type, names[ev.ClientKeyID])
		}
	}
}

// TestLoopAbandonmentTimer: a non-owner queued behind a paused turn is
// woken by the deadline itself (BAE only checks when a message arrives),
// completes the abandoned exchange with synthesized error results, and the
// abandonment is logged against the old owner.
func TestLoopAbandonmentTimer(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	m := newMockProvider(t)
	s := startServer(t, loopConfig(t, m.entry("mock"), "BAE_TURN_TIMEOUT", "1"))
	pro := loopProfile(t, s, map[string]any{"primary_provider": "mock", "allowed_tools": []string{"a_tool"}})
	ha, aID := loopHarness(t, s, pro)
	ha.RegisterTool(client.ToolDef{Name: "a_tool"}, func(context.Context, json.RawMessage) (any, error) {
		return nil, errors.New("A's tool must never run: A sends through Session.Call")
	})
	hb, bID := loopHarness(t, s, pro)
	var mu sync.Mutex
	var bStream []client.Event
	hb.OnEvent(func(ev client.Event) {
		mu.Lock()
		defer mu.Unlock()
		bStream = append(bStream, ev)
	})
	sa, err := ha.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sb, err := hb.Join(ctx, sa.ID)
	if err != nil {
		t.Fatal(err)
	}

	m.push(mockTool(mockUse{ID: "toolu_a1", Name: "a_tool", Input: `{"n":1}`}))
	res := sendRaw(t, ctx, sa, "use your tool")
	if d := cmp.Diff([]string{`tool_use:toolu_a1:a_tool:{"n":1}:dispatch="client"`}, blocksOf(t, res.Message.Content)); d != "" {
		t.Fatalf("paused reply (-want +got):\n%s", d)
	}
	sms := ofType(res.Events, "server.message.send")
	deadline := sms[len(sms)-1].CreatedAt.Add(time.Second)

	bDone := goSend(ctx, sb, "hello B")
	waitQueued(t, 1)
	if queuedAt := time.Now(); !queuedAt.Before(deadline) {
		t.Fatalf("B was queued at %v, after the deadline %v: too slow to tell a timer from a lazy check", queuedAt, deadline)
	}
	rb := mustReply(t, recv(t, bDone), "mock: hello B")

	evs := loopEvents(t, s, sa.ID)
	ab := withReason(evs, "driver_turn_abandoned")
	if len(ab) != 1 {
		t.Fatalf("%d driver_turn_abandoned events", len(ab))
	}
	if ab[0].ClientKeyID != aID || payload(t, ab[0])["owner_client_key_id"] != aID {
		t.Errorf("abandonment attributed to %s, payload %s; want A (%s)", ab[0].ClientKeyID, ab[0].Payload, aID)
	}
	var bMsg client.Event
	for _, ev := range ofType(evs, "client.message.send") {
		if ev.ClientKeyID == bID {
			bMsg = ev
		}
	}
	if bMsg.CreatedAt.Before(deadline) {
		t.Errorf("B's turn started at %v, before the deadline %v", bMsg.CreatedAt, deadline)
	}
	if reqs := m.requests(); len(reqs) != 2 || reqs[1].At.Before(deadline) {
		t.Errorf("B's provider call came before the deadline (or is missing): %d requests", len(reqs))
	}
	var msg client.Message
	json.Unmarshal(bMsg.Payload, &msg)
	want := []string{"tool_result:toolu_a1:error=true:" + abandoned, "text:hello B"}
	if d := cmp.Diff(want, blocksOf(t, msg.Content)); d != "" {
		t.Errorf("B's recorded message (-want +got):\n%s", d)
	}
	if len(withReason(rb.Events, "driver_turn_abandoned")) != 0 {
		t.Error("driver_turn_abandoned is in B's result events")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(withReason(bStream, "driver_turn_abandoned")) != 0 {
		t.Error("driver_turn_abandoned is in B's stream")
	}
	if st := loopState(t, s, sa.ID); st != "open" {
		t.Errorf("session is %s after abandonment, want open", st)
	}
}

// TestLoopResumeMergeErrors: a resume the strict merge rejects answers
// -32000 "tool result merge invalid: …", logs tool_result_merge_invalid and
// moves the session to error, recording nothing else; so does a message
// that gives up a cancelled turn with content that is neither a string
// nor a block array (null included).
func TestLoopResumeMergeErrors(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	result := func(id string) map[string]any {
		return map[string]any{"type": "tool_result", "tool_use_id": id, "content": "ok"}
	}
	tests := []struct {
		name    string
		role    string
		content func(id1, id2 string) any
		detail  func(id1, id2 string) string
		cancel  bool // cancelTurn first: the message abandons the calls
	}{
		{"missing id", "user",
			func(id1, _ string) any { return []any{result(id1)} },
			func(_, id2 string) string { return fmt.Sprintf("no tool_result for tool_use id %q", id2) }, false},
		{"duplicate id", "user",
			func(id1, id2 string) any { return []any{result(id1), result(id1), result(id2)} },
			func(id1, _ string) string {
				return fmt.Sprintf("client returned a duplicate tool_result for id %q", id1)
			}, false},
		{"unexpected id", "user",
			func(id1, id2 string) any { return []any{result(id1), result(id2), result("toolu_bogus")} },
			func(_, _ string) string { return `tool_result id "toolu_bogus" is not in the paused assistant turn` }, false},
		{"wrong role", "assistant",
			func(id1, id2 string) any { return []any{result(id1), result(id2)} },
			func(_, _ string) string { return `paused tool continuation must have role "user", got "assistant"` }, false},
		{"abandon with a number", "user",
			func(_, _ string) any { return 42 },
			func(_, _ string) string { return "abandonment message content must be a string or content-block array" }, true},
		{"abandon with null", "user",
			func(_, _ string) any { return nil },
			func(_, _ string) string { return "abandonment message content must be a string or content-block array" }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sid, sk, _ := s.scriptedSession(t, "get_time", "get_date")
			rpcResult(t, s, sid, sk, "session.registerDriver", map[string]any{})
			res, _ := rpcResult(t, s, sid, sk, "session.sendMessage", map[string]any{"message": map[string]any{"content": "call get_time\ncall get_date"}})
			var paused turnResult
			json.Unmarshal(res, &paused)
			calls := paused.Message.ToolCalls()
			if len(calls) != 2 {
				t.Fatalf("paused reply %s", res)
			}
			if tc.cancel {
				rpcResult(t, s, sid, sk, "session.cancelTurn", map[string]any{})
			}
			before := len(loopEvents(t, s, sid))

			body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 7, "method": "session.sendMessage",
				"params": map[string]any{"message": map[string]any{"role": tc.role, "content": tc.content(calls[0].ID, calls[1].ID)}}})
			frames := rpcAll(t, s, sid, sk, string(body))
			last := frames[len(frames)-1]
			detail := tc.detail(calls[0].ID, calls[1].ID)
			if last.Error == nil || last.Error.Code != -32000 || last.Error.Message != "tool result merge invalid: "+detail {
				t.Fatalf("terminal frame %s, want -32000 %q", last.raw, "tool result merge invalid: "+detail)
			}
			if len(frames) != 1 { // as BAE: the session.error is not on the sender's stream
				t.Errorf("%d frames, want only the error: %s", len(frames), frames[0].raw)
			}
			if st := loopState(t, s, sid); st != "error" {
				t.Errorf("session is %s, want error", st)
			}
			added := loopEvents(t, s, sid)[before:]
			if d := cmp.Diff([]string{"session.error"}, types(added)); d != "" {
				t.Fatalf("events after the bad resume (-want +got):\n%s", d)
			}
			p := payload(t, added[0])
			if p["reason"] != "tool_result_merge_invalid" || p["detail"] != detail {
				t.Errorf("session.error payload %v", p)
			}
		})
	}
}

// TestLoopClientDisconnectKeepsTurn: the sender goes away while its turn
// waits on the provider; the turn still finishes, a subscriber resuming
// from the last event it saw gets the reply, and the next turn's history
// holds it.
func TestLoopClientDisconnectKeepsTurn(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	m := newMockProvider(t)
	s := startServer(t, loopConfig(t, m.entry("mock")))
	pro := loopProfile(t, s, map[string]any{"primary_provider": "mock"})
	h, _ := loopHarness(t, s, pro)
	seen := make(chan client.Event, 64)
	h.OnEvent(func(ev client.Event) { seen <- ev })
	sess, err := h.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	reply, gate := mockText("finished without you").gated()
	m.push(reply)
	sctx, cancel := context.WithCancel(ctx)
	done := goSend(sctx, sess, "are you there?")
	gate.wait(t)
	last := ""
	for last == "" {
		select {
		case ev := <-seen:
			if ev.Type == "provider.request" {
				last = ev.ID
			}
		case <-time.After(loopWait):
			t.Fatal("provider.request never reached the sender's stream")
		}
	}
	cancel()
	if out := recv(t, done); !errors.Is(out.err, context.Canceled) {
		t.Fatalf("Send after cancel: %v, %v", out.reply, out.err)
	}
	waitGoroutines(t, "the sendMessage handler to end", func(st []string) bool {
		return !strings.Contains(strings.Join(st, "\n"), "httpapi.(*call).sendMessage(")
	})
	gate.open()

	sub, err := sess.Subscribe(ctx, client.SubscribeOptions{SinceEventID: last})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	var got []client.Event
	for len(got) == 0 || got[len(got)-1].Type != "server.message.send" {
		ev, err := sub.Next(ctx)
		if err != nil {
			t.Fatalf("subscription ended after %v: %v", types(got), err)
		}
		got = append(got, ev)
	}
	if d := cmp.Diff([]string{"provider.response", "server.message.send"}, types(got)); d != "" {
		t.Errorf("events after the disconnect (-want +got):\n%s", d)
	}
	var msg client.Message
	json.Unmarshal(got[len(got)-1].Payload, &msg)
	if msg.Text() != "finished without you" {
		t.Errorf("server.message.send %s", got[len(got)-1].Payload)
	}

	r, err := sess.Send(ctx, "and now?")
	mustReply(t, sent{r, err}, "mock: and now?")
	want := []string{"user text:are you there?", "assistant text:finished without you", "user text:and now?"}
	if d := cmp.Diff(want, messagesOf(t, m.requests()[1])); d != "" {
		t.Errorf("next turn's history (-want +got):\n%s", d)
	}
}

// TestLoopCancelTurn: cancelling a running turn aborts its provider call
// and answers the turn as cancelled, leaving the session usable;
// cancelling a paused turn makes the next message answer the pending client
// calls with error results.
func TestLoopCancelTurn(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	m := newMockProvider(t)
	s := startServer(t, loopConfig(t, m.entry("mock")))

	t.Run("running", func(t *testing.T) {
		pro := loopProfile(t, s, map[string]any{"primary_provider": "mock"})
		h, id := loopHarness(t, s, pro)
		sess, err := h.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		m.push(mockHang())
		done := goSend(ctx, sess, "take your time")
		req := m.next(t)
		if err := sess.CancelTurn(ctx); err != nil {
			t.Fatalf("CancelTurn: %v", err)
		}
		select {
		case <-req.Cancelled:
		case <-time.After(loopWait):
			t.Fatal("the provider call was not cancelled")
		}
		mustReply(t, recv(t, done), "The turn was cancelled.")
		cancels := ofType(loopEvents(t, s, sess.ID), "session.turn.cancel")
		if len(cancels) != 1 || cancels[0].ClientKeyID != id || payload(t, cancels[0])["state"] != "running" {
			t.Fatalf("session.turn.cancel events %v", cancels)
		}
		if st := loopState(t, s, sess.ID); st != "open" {
			t.Fatalf("session is %s after cancel, want open", st)
		}
		m.push(mockText("back"))
		r, err := sess.Send(ctx, "again")
		mustReply(t, sent{r, err}, "back")
		if d := cmp.Diff([]string{"user text:take your time | text:again"}, messagesOf(t, m.next(t))); d != "" {
			t.Errorf("history after the cancelled turn (-want +got):\n%s", d)
		}
	})

	t.Run("paused", func(t *testing.T) {
		pro := loopProfile(t, s, map[string]any{"primary_provider": "script", "allowed_tools": []string{"get_time"}})
		h, _ := loopHarness(t, s, pro)
		ran := make(chan struct{}, 1)
		h.RegisterTool(client.ToolDef{Name: "get_time"}, func(context.Context, json.RawMessage) (any, error) {
			ran <- struct{}{}
			return "12:00", nil
		})
		sess, err := h.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		paused := sendRaw(t, ctx, sess, "call get_time")
		calls := paused.Message.ToolCalls()
		if len(calls) != 1 || calls[0].Dispatch != client.DispatchClient {
			t.Fatalf("paused reply %s", paused.Message.Content)
		}
		if err := sess.CancelTurn(ctx); err != nil {
			t.Fatalf("CancelTurn: %v", err)
		}
		r, err := sess.Send(ctx, "never mind")
		r = mustReply(t, sent{r, err}, "get_time failed: "+abandoned)
		var msg client.Message
		json.Unmarshal(r.Events[0].Payload, &msg)
		want := []string{"tool_result:" + calls[0].ID + ":error=true:" + abandoned, "text:never mind"}
		if d := cmp.Diff(want, blocksOf(t, msg.Content)); d != "" {
			t.Errorf("recorded message (-want +got):\n%s", d)
		}
		evs := loopEvents(t, s, sess.ID)
		if c := ofType(evs, "session.turn.cancel"); len(c) != 1 || payload(t, c[0])["state"] != "paused" {
			t.Errorf("session.turn.cancel events %v", c)
		}
		if len(withReason(evs, "driver_turn_abandoned")) != 0 {
			t.Error("a cancel was logged as driver_turn_abandoned")
		}
		select {
		case <-ran:
			t.Error("the cancelled call's handler ran")
		default:
		}
	})
}

// TestLoopSubscribe: subscribers see the same events in the same order,
// a StreamDeltas subscriber also gets the streamed text, and closing the
// session ends every subscription cleanly — also one opened afterwards
// (BAE hangs).
func TestLoopSubscribe(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	m := newMockProvider(t)
	s := startServer(t, loopConfig(t, m.entry("mock")))
	pro := loopProfile(t, s, map[string]any{"primary_provider": "mock"})
	h, _ := loopHarness(t, s, pro)
	sess, err := h.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	page, err := sess.Events(ctx, "", 0)
	if err != nil {
		t.Fatal(err)
	}
	first, mark := page.Items[0].ID, page.Items[len(page.Items)-1].ID
	// Resuming from mark closes the gap between the stream's start and
	// its live feed, so the subscriptions are attached once the turn's
	// first event arrives on them.
	subs := make([]*client.Subscription, 3)
	for i := range subs {
		if subs[i], err = sess.Subscribe(ctx, client.SubscribeOptions{SinceEventID: mark, StreamDeltas: i == 2}); err != nil {
			t.Fatal(err)
		}
		defer subs[i].Close()
	}
	reply, gate := mockText("alpha ", "beta ", "gamma").gated()
	m.push(reply)
	done := goSend(ctx, sess, "stream please")
	gate.wait(t)
	got := make([][]client.Event, len(subs))
	for i, sub := range subs {
		got[i] = readUntil(t, ctx, sub, "provider.request")
	}
	gate.open()
	for i, sub := range subs {
		got[i] = append(got[i], readUntil(t, ctx, sub, "server.message.send")...)
	}
	mustReply(t, recv(t, done), "alpha beta gamma")

	var logged []string
	for _, ev := range loopEvents(t, s, sess.ID) {
		logged = append(logged, ev.ID+" "+ev.Type)
	}
	idx := len(logged) - 4 // client.message.send provider.request provider.response server.message.send
	for i, evs := range got {
		var ids []string
		var text string
		var order []string
		for _, ev := range evs {
			if ev.Type == client.DeltaType {
				text += ev.Delta
				order = append(order, "delta")
				continue
			}
			ids = append(ids, ev.ID+" "+ev.Type)
			order = append(order, ev.Type)
		}
		if d := cmp.Diff(logged[idx:], ids); d != "" {
			t.Errorf("subscriber %d events (-log +got):\n%s", i, d)
		}
		if i < 2 {
			if text != "" {
				t.Errorf("subscriber %d got deltas without asking", i)
			}
			continue
		}
		if text != "alpha beta gamma" {
			t.Errorf("deltas %q", text)
		}
		wantOrder := []string{"client.message.send", "provider.request", "delta", "delta", "delta", "provider.response", "server.message.send"}
		if d := cmp.Diff(wantOrder, order); d != "" {
			t.Errorf("delta subscriber order (-want +got):\n%s", d)
		}
	}

	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
	for i, sub := range subs {
		ev, err := sub.Next(ctx)
		if err != nil || ev.Type != "session.close" {
			t.Fatalf("subscriber %d: %v %v, want session.close", i, ev.Type, err)
		}
		if _, err := sub.Next(ctx); err != io.EOF || sub.EndReason() != "session_closed" {
			t.Errorf("subscriber %d ended with %v (%q), want io.EOF (session_closed)", i, err, sub.EndReason())
		}
	}
	late, err := sess.Subscribe(ctx, client.SubscribeOptions{SinceEventID: first})
	if err != nil {
		t.Fatal(err)
	}
	defer late.Close()
	var replayed []client.Event
	for {
		ev, err := late.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("late subscription: %v", err)
		}
		replayed = append(replayed, ev)
	}
	if len(replayed) != len(logged) || replayed[len(replayed)-1].Type != "session.close" || late.EndReason() != "session_closed" {
		t.Errorf("late subscription replayed %v and ended %q", types(replayed), late.EndReason())
	}
}

// TestLoopUpdateClientToolsNextTurn: new tool declarations are advertised
// from the next turn; the running turn keeps its snapshot.
func TestLoopUpdateClientToolsNextTurn(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	m := newMockProvider(t)
	s := startServer(t, loopConfig(t, m.entry("mock")))
	pro := loopProfile(t, s, map[string]any{"primary_provider": "mock", "allowed_tools": []string{"t1", "t2"}})
	h, _ := loopHarness(t, s, pro)
	noop := func(context.Context, json.RawMessage) (any, error) { return "", nil }
	h.RegisterTool(client.ToolDef{Name: "t1"}, noop)
	sess, err := h.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, gate := mockTool(mockUse{ID: "toolu_u1", Name: "lookup"}).gated()
	m.push(first, mockText("done"))
	done := goSend(ctx, sess, "first")
	gate.wait(t)
	h.RegisterTool(client.ToolDef{Name: "t2"}, noop)
	if err := sess.UpdateTools(ctx); err != nil {
		t.Fatalf("UpdateTools: %v", err)
	}
	gate.open()
	mustReply(t, recv(t, done), "done")
	r, err := sess.Send(ctx, "second")
	mustReply(t, sent{r, err}, "mock: second")
	h.RemoveTool("t1")
	if err := sess.UpdateTools(ctx); err != nil {
		t.Fatalf("UpdateTools: %v", err)
	}
	r, err = sess.Send(ctx, "third")
	mustReply(t, sent{r, err}, "mock: third")

	var got [][]string
	for _, r := range m.requests() {
		got = append(got, r.Tools)
	}
	want := [][]string{{"t1"}, {"t1"}, {"t1", "t2"}, {"t2"}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("advertised tools per provider call (-want +got):\n%s", d)
	}
}
