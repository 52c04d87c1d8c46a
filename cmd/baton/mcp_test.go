package main

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/baton-engine/baton/internal/testkit"
	"github.com/baton-engine/baton/mcp/mcptest"
	"github.com/google/go-cmp/cmp"
)

// TestMCPStdioTool: a profile naming a stdio MCP server advertises its
// tools, a model call runs on the server with the documented events, and
// after a restart the next turn connects again (BAE loses MCP instead).
func TestMCPStdioTool(t *testing.T) {
	t.Parallel()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := testConfig + `
[[mcp.servers]]
name = "local"
transport = "stdio"
command = "/usr/bin/env"
args = ["` + mcptest.EnvServe + `=1", "${TEST_MCP_EXE}"]
`
	dir, env := prepare(t, testkit.Config{ConfigFile: cfg, Env: map[string]string{"TEST_MCP_EXE": exe}})
	s := runServer(t, dir, env)
	pro := loopProfile(t, s, map[string]any{"primary_provider": "script", "mcp_servers": []string{"local", "missing"}})
	_, key := s.clientKey("k", pro)
	r := s.client("POST", "/api/v1/sessions", key, map[string]any{})
	mustStatus(t, r, 201)
	sid, sk := r.json(t)["session_id"].(string), r.json(t)["session_key"].(string)

	send := func(s *server, text string) turnResult {
		t.Helper()
		rpcResult(t, s, sid, sk, "session.registerDriver", map[string]any{})
		res, _ := rpcResult(t, s, sid, sk, "session.sendMessage", map[string]any{"message": map[string]any{"content": text}})
		var tr turnResult
		if err := json.Unmarshal(res, &tr); err != nil {
			t.Fatal(err)
		}
		return tr
	}
	check := func(tr turnResult) {
		t.Helper()
		if got := tr.Message.Text(); got != "echo returned: echo: hi" {
			t.Fatalf("reply %q", got)
		}
		want := []string{
			"client.message.send", "provider.request", "provider.response", "tool.call",
			"mcp.request", "mcp.response", "tool.result", "provider.request", "provider.response", "server.message.send",
		}
		if d := cmp.Diff(want, types(tr.Events)); d != "" {
			t.Fatalf("events (-want +got):\n%s", d)
		}
		call := payload(t, ofType(tr.Events, "tool.call")[0])
		if call["dispatch"] != "mcp" || call["server_name"] != "local" || call["name"] != "echo" {
			t.Errorf("tool.call %v", call)
		}
		req := payload(t, ofType(tr.Events, "mcp.request")[0])
		if d := cmp.Diff(map[string]any{"method": "tools/call", "server_name": "local", "tool": "echo", "input": map[string]any{"text": "hi"}}, req); d != "" {
			t.Errorf("mcp.request (-want +got):\n%s", d)
		}
		resp := payload(t, ofType(tr.Events, "mcp.response")[0])
		if resp["server_name"] != "local" || resp["ok"] != true || resp["result"] == nil {
			t.Errorf("mcp.response %v", resp)
		}
		res := payload(t, ofType(tr.Events, "tool.result")[0])
		wantRes := map[string]any{
			"tool_use_id": call["id"], "dispatch": "mcp", "server_name": "local", "is_error": false,
			"content": []any{map[string]any{"type": "text", "text": "echo: hi"}},
		}
		if d := cmp.Diff(wantRes, res); d != "" {
			t.Errorf("tool.result (-want +got):\n%s", d)
		}
	}
	check(send(s, `call echo {"text":"hi"}`))

	// A failing MCP tool is an error result; the turn goes on.
	tr := send(s, `call fail`)
	if got := tr.Message.Text(); got != "fail failed: it failed" {
		t.Fatalf("fail reply %q", got)
	}

	s.stop()
	s2 := runServer(t, dir, env)
	check(send(s2, `call echo {"text":"hi"}`))
	s2.client("DELETE", "/api/v1/sessions/"+sid, sk, nil)
}
