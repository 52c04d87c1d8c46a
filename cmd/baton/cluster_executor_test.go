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

// TestClusterExecutorOnAnotherNode: a session owned by node a calls a
// tool of an executor connected to node b.
func TestClusterExecutorOnAnotherNode(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2)
	a, b := c.nodes[0], c.nodes[1]
	r := call(t, "POST", a.adminURL+"/admin/v1/environments", c.adminKey, map[string]any{"name": "remote"})
	mustStatus(t, r, 201)
	env := r.json(t)["id"].(string)
	r = call(t, "POST", a.adminURL+"/admin/v1/environments/"+env+"/credentials", c.adminKey, nil)
	mustStatus(t, r, 201)
	secret := r.json(t)["secret"].(string)
	r = call(t, "POST", a.adminURL+"/admin/v1/profiles", c.adminKey, map[string]any{"name": "remote-tools", "primary_provider": "script", "executor_environments": []string{env}})
	mustStatus(t, r, 201)
	r = call(t, "POST", a.adminURL+"/admin/v1/keys", c.adminKey, map[string]any{"name": "rk", "profile_id": r.json(t)["id"]})
	mustStatus(t, r, 201)
	key := r.json(t)["key"].(string)

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
