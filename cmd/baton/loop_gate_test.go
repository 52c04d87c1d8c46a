package main

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/client"
)

// TestLoopGateQueuedOwner: a message the owner sent while its turn was
// still running, queued when that turn pauses, resumes the pause at once
// (architecture.md "Admission" rule 1) rather than waiting out
// BAE_TURN_TIMEOUT — also ahead of another driver's message queued before
// it — while a non-owner's queued message keeps waiting behind the pause.
// The timeout is an hour, so only an immediate admission finishes within
// the tests' bound.
func TestLoopGateQueuedOwner(t *testing.T) {
	t.Parallel()
	ctx := loopCtx(t)
	m := newMockProvider(t)
	s := startServer(t, loopConfig(t, m.entry("mock"), "BAE_TURN_TIMEOUT", "3600"))
	pro := loopProfile(t, s, map[string]any{"primary_provider": "mock", "allowed_tools": []string{"a_tool"}})
	owner := func(t *testing.T) (*client.Session, string) {
		t.Helper()
		h, id := loopHarness(t, s, pro)
		h.RegisterTool(client.ToolDef{Name: "a_tool"}, func(context.Context, json.RawMessage) (any, error) {
			return nil, errors.New("a_tool must never run: the test sends through Session.Call")
		})
		sess, err := h.Connect(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return sess, id
	}
	joiner := func(t *testing.T, sid string) (*client.Session, string) {
		t.Helper()
		h, id := loopHarness(t, s, pro)
		sess, err := h.Join(ctx, sid)
		if err != nil {
			t.Fatal(err)
		}
		return sess, id
	}
	// paused checks r is a pause on toolu_<id>.
	paused := func(t *testing.T, r turnResult, id string) {
		t.Helper()
		want := []string{"tool_use:" + id + ":a_tool:{}:dispatch=\"client\""}
		if d := cmp.Diff(want, blocksOf(t, r.Message.Content)); d != "" {
			t.Fatalf("paused reply (-want +got):\n%s", d)
		}
	}

	t.Run("owner queued twice", func(t *testing.T) {
		sa, _ := owner(t)
		first, gate := mockTool(mockUse{ID: "toolu_o1", Name: "a_tool"}).gated()
		m.push(first, mockTool(mockUse{ID: "toolu_o2", Name: "a_tool"}), mockText("done"))
		r1 := goCall(ctx, sa, "use your tool")
		gate.wait(t)
		r2 := goCall(ctx, sa, "hi")
		waitQueued(t, 1)
		r3 := goCall(ctx, sa, "again")
		waitQueued(t, 2)
		gate.open()

		paused(t, recvCall(t, r1), "toolu_o1")
		res2 := recvCall(t, r2) // resumed the first pause, and paused again
		paused(t, res2, "toolu_o2")
		if d := cmp.Diff([]string{"tool_result:toolu_o1:error=true:" + abandoned, "text:hi"}, sentBlocks(t, res2)); d != "" {
			t.Errorf("the first queued message as recorded (-want +got):\n%s", d)
		}
		res3 := recvCall(t, r3)
		if got := res3.Message.Text(); got != "done" {
			t.Errorf("third reply %q, want done", got)
		}
		if d := cmp.Diff([]string{"tool_result:toolu_o2:error=true:" + abandoned, "text:again"}, sentBlocks(t, res3)); d != "" {
			t.Errorf("the second queued message as recorded (-want +got):\n%s", d)
		}
		if ab := withReason(loopEvents(t, s, sa.ID), "driver_turn_abandoned"); len(ab) != 0 {
			t.Errorf("the owner's own resume was logged as driver_turn_abandoned: %v", ab)
		}
	})

	t.Run("owner queued behind another driver", func(t *testing.T) {
		sa, aID := owner(t)
		sb, bID := joiner(t, sa.ID)
		first, gate := mockTool(mockUse{ID: "toolu_b1", Name: "a_tool"}).gated()
		m.push(first, mockText("after hi")) // B's turn, last, gets the echo
		ra := goCall(ctx, sa, "use your tool")
		gate.wait(t)
		rb := goCall(ctx, sb, "from B")
		waitQueued(t, 1)
		ra2 := goCall(ctx, sa, "hi")
		waitQueued(t, 2)
		gate.open()

		paused(t, recvCall(t, ra), "toolu_b1")
		res := recvCall(t, ra2)
		if got := res.Message.Text(); got != "after hi" {
			t.Errorf("owner's reply %q, want after hi", got)
		}
		if d := cmp.Diff([]string{"tool_result:toolu_b1:error=true:" + abandoned, "text:hi"}, sentBlocks(t, res)); d != "" {
			t.Errorf("the owner's queued message as recorded (-want +got):\n%s", d)
		}
		resB := recvCall(t, rb)
		if got := resB.Message.Text(); got != "mock: from B" {
			t.Errorf("B's reply %q, want mock: from B", got)
		}
		if d := cmp.Diff([]string{"text:from B"}, sentBlocks(t, resB)); d != "" {
			t.Errorf("B's message as recorded (-want +got):\n%s", d)
		}
		want := []string{
			"A text:use your tool", "A pause",
			"A tool_result:toolu_b1:error=true:" + abandoned + " | text:hi", "A after hi",
			"B text:from B", "B mock: from B",
		}
		if d := cmp.Diff(want, turnLog(t, s, sa.ID, map[string]string{aID: "A", bID: "B"})); d != "" {
			t.Errorf("turns in the log (-want +got):\n%s", d)
		}
	})

	t.Run("other driver waits", func(t *testing.T) {
		sa, aID := owner(t)
		sb, bID := joiner(t, sa.ID)
		first, gate := mockTool(mockUse{ID: "toolu_w1", Name: "a_tool"}).gated()
		m.push(first, mockText("answered"))
		ra := goCall(ctx, sa, "use your tool")
		gate.wait(t)
		rb := goCall(ctx, sb, "from B")
		waitQueued(t, 1)
		gate.open()

		paused(t, recvCall(t, ra), "toolu_w1")
		// B stays queued behind the pause: the owner's answer, sent after
		// the pause, still finds the turn parked for it.
		res := sendRaw(t, ctx, sa, []map[string]any{{"type": "tool_result", "tool_use_id": "toolu_w1", "content": "12:00"}})
		if got := res.Message.Text(); got != "answered" {
			t.Errorf("owner's reply %q, want answered", got)
		}
		resB := recvCall(t, rb)
		if got := resB.Message.Text(); got != "mock: from B" {
			t.Errorf("B's reply %q, want mock: from B", got)
		}
		want := []string{
			"A text:use your tool", "A pause",
			"A tool_result:toolu_w1:error=false:12:00", "A answered",
			"B text:from B", "B mock: from B",
		}
		if d := cmp.Diff(want, turnLog(t, s, sa.ID, map[string]string{aID: "A", bID: "B"})); d != "" {
			t.Errorf("turns in the log (-want +got):\n%s", d)
		}
	})
}

// called is the outcome of a Session.Call of sendMessage run on another
// goroutine.
type called struct {
	res turnResult
	err error
}

// goCall sends content through Session.Call, which does not run the
// harness's tool loop, so a paused reply comes back as it is.
func goCall(ctx context.Context, sess *client.Session, content any) <-chan called {
	ch := make(chan called, 1)
	go func() {
		var out called
		out.err = sess.Call(ctx, "session.sendMessage", map[string]any{"message": map[string]any{"content": content}}, &out.res)
		ch <- out
	}()
	return ch
}

func recvCall(t testing.TB, ch <-chan called) turnResult {
	t.Helper()
	select {
	case out := <-ch:
		if out.err != nil {
			t.Fatalf("sendMessage: %v", out.err)
		}
		return out.res
	case <-time.After(loopWait):
		t.Fatal("sendMessage did not return")
		return turnResult{}
	}
}

// sentBlocks summarizes the caller's message as the turn recorded it: the
// content of the first event of its result.
func sentBlocks(t testing.TB, r turnResult) []string {
	t.Helper()
	if len(r.Events) == 0 || r.Events[0].Type != "client.message.send" {
		t.Fatalf("result events %v do not start with client.message.send", types(r.Events))
	}
	var msg client.Message
	if err := json.Unmarshal(r.Events[0].Payload, &msg); err != nil {
		t.Fatal(err)
	}
	return blocksOf(t, msg.Content)
}

// turnLog lists the session's messages and errors in log order, each as
// "<driver> <what>": a client message by its blocks, a reply by its text or
// as "pause".
func turnLog(t testing.TB, s *server, sid string, names map[string]string) []string {
	t.Helper()
	var out []string
	for _, ev := range loopEvents(t, s, sid) {
		if ev.Type == "session.error" {
			out = append(out, names[ev.ClientKeyID]+" session.error "+ev.Reason())
			continue
		}
		if ev.Type != "client.message.send" && ev.Type != "server.message.send" {
			continue
		}
		var msg client.Message
		if err := json.Unmarshal(ev.Payload, &msg); err != nil {
			t.Fatal(err)
		}
		line := strings.Join(blocksOf(t, msg.Content), " | ")
		if ev.Type == "server.message.send" {
			line = msg.Text()
			if len(msg.ToolCalls()) > 0 {
				line = "pause"
			}
		}
		out = append(out, names[ev.ClientKeyID]+" "+line)
	}
	return out
}
