package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton/client"
	exsdk "github.com/baton-engine/baton/client/executor"
)

// executorProfile creates, through node at, an environment with a
// credential and a scripted profile whose tools are that environment's
// executors', and a client key for it.
func (c *testCluster) executorProfile(t *testing.T, at *child) (env, secret, key string) {
	t.Helper()
	r := call(t, "POST", at.adminURL+"/admin/v1/environments", c.adminKey, map[string]any{"name": "remote"})
	mustStatus(t, r, 201)
	env = r.json(t)["id"].(string)
	r = call(t, "POST", at.adminURL+"/admin/v1/environments/"+env+"/credentials", c.adminKey, nil)
	mustStatus(t, r, 201)
	secret = r.json(t)["secret"].(string)
	r = call(t, "POST", at.adminURL+"/admin/v1/profiles", c.adminKey, map[string]any{"name": "remote-tools", "primary_provider": "script", "executor_environments": []string{env}})
	mustStatus(t, r, 201)
	r = call(t, "POST", at.adminURL+"/admin/v1/keys", c.adminKey, map[string]any{"name": "rk", "profile_id": r.json(t)["id"]})
	mustStatus(t, r, 201)
	return env, secret, r.json(t)["key"].(string)
}

// TestClusterExecutorOnAnotherNode: a session owned by node a calls a
// tool of an executor connected to node b.
func TestClusterExecutorOnAnotherNode(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	env, secret, key := c.executorProfile(t, a)

	ctx := loopCtx(t)
	e, err := exsdk.New(exsdk.Config{BaseURL: b.clientURL, Credential: secret, Scope: exsdk.Environment(env), ExecutorID: "exe_b",
		Tools: []exsdk.Tool{{Def: exsdk.ToolDef{Name: "lookup", Description: "look up", InputSchema: json.RawMessage(`{"type":"object"}`)},
			Handle: func(ctx context.Context, call exsdk.Call) (exsdk.Result, error) {
				_ = call.Progress("looking", 1, 2)
				return exsdk.TextResult("found " + string(call.Input)), nil
			}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })

	h := client.NewHarness(client.Config{BaseURL: a.clientURL, ClientKey: key})
	sess, err := h.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The nodes publish and read their executors' tools every third of a
	// lease TTL: a's model sees lookup once a's loop has read what b
	// published after the executor connected. Until then the scripted
	// model answers that it has no such tool; ask again on each of a's
	// rounds.
	var text string
	for {
		rep, err := sess.Send(ctx, `call lookup {"q":"w"}`)
		if err != nil {
			t.Fatal(err)
		}
		if text = rep.Message.Text(); !strings.Contains(text, "I don't have a tool") {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("a never listed b's executor tool: %q", text)
		case <-time.After(100 * time.Millisecond):
		}
	}
	if text != `lookup returned: found {"q":"w"}` {
		t.Fatalf("reply %q, want the result of b's executor", text)
	}
	if owners := c.owners(0); owners[a.clientURL] != 1 || owners[b.clientURL] != 0 {
		t.Errorf("owners %v; want the session on a, the executor on b", owners)
	}
	if err := sess.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestClusterExecutorNodeKilledMidCall: the node an executor is
// connected to is killed with SIGKILL while the executor runs a call for
// a session another node owns. The call ends with an error result the
// model reads, once; the turn ends, and the session goes on.
func TestClusterExecutorNodeKilledMidCall(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	env, secret, key := c.executorProfile(t, a)

	ctx := loopCtx(t)
	started := make(chan struct{}, 8)
	e, err := exsdk.New(exsdk.Config{BaseURL: b.clientURL, Credential: secret, Scope: exsdk.Environment(env), ExecutorID: "exe_b",
		Tools: []exsdk.Tool{{Def: exsdk.ToolDef{Name: "slow", Description: "slow", InputSchema: json.RawMessage(`{"type":"object"}`)},
			Handle: func(ctx context.Context, call exsdk.Call) (exsdk.Result, error) {
				if string(call.Input) == `{"probe":true}` {
					return exsdk.TextResult("ready"), nil
				}
				started <- struct{}{}
				<-ctx.Done() // until its connection dies with the node
				return exsdk.Result{}, ctx.Err()
			}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Open(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Close(context.Background()) })

	sess, err := client.NewHarness(client.Config{BaseURL: a.clientURL, ClientKey: key}).Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for { // until a lists b's tool (see TestClusterExecutorOnAnotherNode)
		rep, err := sess.Send(ctx, `call slow {"probe":true}`)
		if err != nil {
			t.Fatal(err)
		}
		if rep.Message.Text() == "slow returned: ready" {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("a never listed b's executor tool: %q", rep.Message.Text())
		case <-time.After(100 * time.Millisecond):
		}
	}
	ch := goSend(ctx, sess, `call slow {"n":1}`)
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the executor never got the call")
	}
	b.kill()
	out := recv(t, ch)
	if out.err != nil {
		t.Fatalf("Send after the executor's node died: %v, want the model's answer to the failed call", out.err)
	}
	if got := out.reply.Message.Text(); !strings.HasPrefix(got, "slow failed:") {
		t.Errorf("reply %q, want the model reading the failed call", got)
	}
	n := countTypes(c.storeLog(ctx, sess.ID))
	if n["tool.call"] != 2 || n["tool.result"] != 2 {
		t.Errorf("log %v: want one tool call and one result per call (probe and the failed one)", n)
	}
	rep, err := sess.Send(ctx, "still there?")
	mustReply(t, sent{rep, err}, "You said: still there?")
}
