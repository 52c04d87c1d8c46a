package main

import (
	"context"
	"fmt"
	"testing"

	"github.com/baton-engine/baton/client"
	exsdk "github.com/baton-engine/baton/client/executor"
)

// TestExecutorToolEvent: a tool's durable session event (Call.Event, a
// session.event of the tool executor) is in the session's log as
// executor.event, attributed to the turn's driver, before the call's
// result, and live subscribers see it.
func TestExecutorToolEvent(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "an executor's durable events are recorded by its own node, which may not own the session")
	h := newHandsServer(t)
	h.executor(t, "exe_events", textTool("build", func(ctx context.Context, c exsdk.Call) (exsdk.Result, error) {
		if err := c.Event("build.log", map[string]string{"line": "compiling"}); err != nil {
			return exsdk.Result{}, err
		}
		return exsdk.TextResult("built"), nil
	}))
	hn, keyID := loopHarness(t, h.server, h.profile)
	sess, err := hn.Connect(loopCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	sub, err := sess.Subscribe(loopCtx(t), client.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	h.m.push(mockTool(mockUse{ID: "toolu_1", Name: "build", Input: `{}`}), mockText("done"))
	mustReply(t, recv(t, goSend(loopCtx(t), sess, "go")), "done")

	live := nextOf(t, sub, "executor.event")
	var seq []string
	for _, ev := range loopEvents(t, h.server, sess.ID) {
		switch ev.Type {
		case "executor.tool.call", "executor.event", "executor.tool.result":
			seq = append(seq, ev.Type)
		}
		if ev.Type != "executor.event" {
			continue
		}
		p := payload(t, ev)
		want := fmt.Sprint(map[string]any{"type": "build.log", "data": map[string]any{"line": "compiling"}, "executor_id": "exe_events",
			"environment_id": h.env})
		if fmt.Sprint(p) != want || ev.ClientKeyID != keyID || ev.ID != live.ID {
			t.Errorf("executor.event %v by %q (live %s), want %s by %q", p, ev.ClientKeyID, live.ID, want, keyID)
		}
	}
	if fmt.Sprint(seq) != "[executor.tool.call executor.event executor.tool.result]" {
		t.Errorf("events %v", seq)
	}
}
