package main

import (
	"bytes"
	"testing"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-engine/baton/client"
)

// TestBrainResumedTurnKeepsWorking: the brain's connection drops in the
// middle of a turn; the executor (the real SDK) reconnects and resumes
// the agent session, which the register result puts in a new epoch. The
// turn goes on: a model token is refreshed and calls the gateway, the
// turn's tools token of the old epoch is refused as superseded while a
// refreshed one calls the session's tools over MCP, and the turn's later
// events are stored and end it.
func TestBrainResumedTurnKeepsWorking(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "brains serve only the sessions of the node they are connected to")
	g := newGatewayServer(t, nil)
	sess, keyID, tr, done := g.turn(t)
	md := tr.Metadata
	ctx := loopCtx(t)
	sub, err := sess.Subscribe(ctx, client.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := connectSessionTools(t, md.ToolsMCPURL, md.ToolsMCPToken).ListTools(ctx, nil); err != nil {
		t.Fatalf("tools token before the reconnect: %v", err)
	}
	old := tr.Epoch()
	if old != md.Epoch || old <= 0 {
		t.Fatalf("epoch %d, turn.start said %d", old, md.Epoch)
	}

	dials := g.net.dialCount()
	g.net.kill()
	g.net.waitFor(t, "a reconnect", func() bool { return g.net.dialCount() > dials })
	// A call goes out on a registered connection only: once it is
	// answered, the resume is done.
	model, err := tr.RefreshModelToken(ctx)
	if err != nil {
		t.Fatalf("model token after the reconnect: %v", err)
	}
	if status, body := gwPost(t, md.ModelBaseURL+"/v1/messages", model.Token, `{"messages":[{"role":"user","content":"after"}]}`); status != 200 {
		t.Fatalf("model call after the reconnect: %d %s", status, body)
	}
	if tr.Epoch() <= old {
		t.Fatalf("epoch %d after the resume, was %d", tr.Epoch(), old)
	}

	status, body := gwPost(t, md.ToolsMCPURL, md.ToolsMCPToken, `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`)
	if status != 403 || !bytes.Contains(body, []byte("superseded")) {
		t.Errorf("tools token of the old epoch: %d %s", status, body)
	}
	tools, err := tr.RefreshToolsToken(ctx)
	if err != nil {
		t.Fatalf("tools token after the resume: %v", err)
	}
	res, err := connectSessionTools(t, md.ToolsMCPURL, tools.Token).CallTool(ctx, &sdk.CallToolParams{Name: "echo", Arguments: map[string]any{"text": "back"}})
	if err != nil || res.IsError || res.Content[0].(*sdk.TextContent).Text != "echo: back" {
		t.Fatalf("session tool after the resume: %+v %v", res, err)
	}

	g.agent.release <- "done after the resume"
	r := mustReply(t, recv(t, done), "done after the resume")
	msg := ofType(r.Events, "agent.message")
	if len(msg) != 1 || msg[0].ClientKeyID != keyID {
		t.Fatalf("agent.message events %+v", msg)
	}
	if ev := nextOf(t, sub, "session.status_idle"); payload(t, ev)["turn_outcome"] != "completed" {
		t.Fatalf("status_idle %v", payload(t, ev))
	}
	var running int
	for _, ev := range allEvents(t, sess) {
		if ev.Type == "session.status_running" {
			running++
		}
	}
	if running != 1 {
		t.Errorf("%d session.status_running events, want 1 (stored once across the resume)", running)
	}
}
