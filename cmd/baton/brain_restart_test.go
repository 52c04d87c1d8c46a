package main

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/baton-engine/baton/client"
)

// restart stops b's server and starts it again on the same database; the
// executors' network points at the new one, and they reconnect to it.
func (b *brainServer) restart(t *testing.T) {
	t.Helper()
	b.server.stop()
	b.server = runServer(t, b.server.dir, b.server.env)
	b.net.point(b.server)
}

// TestBrainRestartResumesCustomTool: a brain turn paused on a custom tool
// survives a restart: the owner's tool result, sent to the restarted
// server, reaches the agent (agent.custom_tool_result) once its executor
// is back, and the turn completes with the owner's call.
func TestBrainRestartResumesCustomTool(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "brains serve only the sessions of the node they are connected to")
	b := newBrainServer(t)
	b.executor(t)
	_, key := b.clientKey("k", b.profile)
	r := b.client("POST", "/api/v1/sessions", key, map[string]any{"tools": []any{map[string]any{"name": "lookup", "input_schema": map[string]any{"type": "object"}}}})
	mustStatus(t, r, 201)
	sid, sk := r.json(t)["session_id"].(string), r.json(t)["session_key"].(string)
	rpcResult(t, b.server, sid, sk, "session.registerDriver", map[string]any{})
	res, _ := rpcResult(t, b.server, sid, sk, "session.sendMessage", map[string]any{"message": map[string]any{"content": "tool lookup"}})
	var paused turnResult
	if err := json.Unmarshal(res, &paused); err != nil {
		t.Fatal(err)
	}
	var useID string
	for _, bl := range paused.Message.Blocks() {
		if bl.Type == "tool_use" && bl.Name == "lookup" {
			useID = bl.ID
		}
	}
	if useID == "" {
		t.Fatalf("paused reply %s", res)
	}

	b.restart(t)
	rpcResult(t, b.server, sid, sk, "session.registerDriver", map[string]any{})
	res, _ = rpcResult(t, b.server, sid, sk, "session.sendMessage", map[string]any{"message": map[string]any{"content": []any{
		map[string]any{"type": "tool_result", "tool_use_id": useID, "content": "42"},
	}}})
	var done turnResult
	if err := json.Unmarshal(res, &done); err != nil {
		t.Fatal(err)
	}
	if got := done.Message.Text(); got != "tool said: 42" {
		t.Fatalf("resumed reply %q (%s)", got, res)
	}
	if n := b.agent.runs.Load(); n != 1 {
		t.Fatalf("the agent ran %d turns, want the one resumed", n)
	}
	if n := strings.Count(b.net.read(), `"method":"agent.custom_tool_result"`); n != 1 {
		t.Fatalf("%d agent.custom_tool_result requests", n)
	}
}

// TestBrainRestartAnswersInteraction: an interaction open when the server
// restarts is answered on the restarted one: the executor gets
// interaction.response under its own interaction id, the first answer
// wins, and the turn ends with the answer.
func TestBrainRestartAnswersInteraction(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "brains serve only the sessions of the node they are connected to")
	b := newBrainServer(t)
	b.executor(t)
	sess, _ := b.driver(t, "", nil)
	ctx := loopCtx(t)
	sub, err := sess.Subscribe(ctx, client.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := goSend(ctx, sess, "ask")
	id, _ := payload(t, nextOf(t, sub, "interaction.request"))["interaction_id"].(string)
	sub.Close()

	b.restart(t)
	<-out // the call ended with the old server
	other, _ := b.driver(t, sess.ID, nil)
	sub, err = other.Subscribe(ctx, client.SubscribeOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := other.Call(ctx, "session.respondInteraction", map[string]any{"interaction_id": id, "answer": map[string]string{"text": "blue"}}, nil); err != nil {
		t.Fatalf("answer after the restart: %v", err)
	}
	var rpcErr *client.RPCError
	err = other.Call(ctx, "session.respondInteraction", map[string]any{"interaction_id": id, "answer": "red"}, nil)
	if !errors.As(err, &rpcErr) || !strings.Contains(rpcErr.Message, "first answer wins") {
		t.Fatalf("second answer: %v", err)
	}
	var msg struct {
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(nextOf(t, sub, "agent.message").Payload, &msg); err != nil {
		t.Fatal(err)
	}
	if text := inputText(msg.Content); text != "answer: resolved blue" {
		t.Fatalf("agent said %q", text)
	}
	if !strings.Contains(b.net.read(), `"method":"interaction.response"`) {
		t.Fatal("no interaction.response reached the executor")
	}
}
