package engine

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
)

// fakeMCP is a hand-written baton.MCPPool serving fixed tools.
type fakeMCP struct{ tools []baton.MCPTool }

func (f *fakeMCP) Tools(context.Context, string, []baton.MCPServer) ([]baton.MCPTool, error) {
	return f.tools, nil
}

func (f *fakeMCP) Call(_ context.Context, _, server, tool string, _ json.RawMessage) (json.RawMessage, bool, error) {
	return json.RawMessage(`{"content":[{"type":"text","text":"` + server + "/" + tool + `"}]}`), false, nil
}

func (f *fakeMCP) CloseSession(string) {}

const rigClientCallTimeout = 3 * time.Minute

// TestToolRouting: one assistant message calls a name of every kind;
// each tool.call is dispatched to the owner the precedence gives: the
// acting driver's client tools, then its sandbox tools, then its subagent
// tools (and remote_subagent_status), then MCP (the first server in the
// profile's order), then registered clients (client__{name}__{tool}),
// then executors; an unknown name, another driver's tool included, goes
// to MCP with no server. Each name is advertised once, to its owner.
func TestToolRouting(t *testing.T) {
	def := func(names ...string) []baton.ToolDef {
		var ds []baton.ToolDef
		for _, n := range names {
			ds = append(ds, baton.ToolDef{Name: n, InputSchema: json.RawMessage(`{}`)})
		}
		return ds
	}
	mcp := &fakeMCP{tools: []baton.MCPTool{
		{Server: "srv1", Name: "search"},
		{Server: "srv1", Name: "lookup"}, // the client tool keeps it
		{Server: "srv1", Name: "shell"},  // the sandbox tool keeps it
		{Server: "srv2", Name: "search"}, // srv1 listed it first
		{Server: "srv2", Name: "fetch"},
		{Server: "srv2", Name: "client__laptop__rm"}, // MCP before a registered client
	}}
	hands := &fakeHands{}
	r := newGateRig(t, func(s *rigSetup) {
		env := &baton.Environment{Name: "env"}
		if err := s.db.CreateEnvironment(context.Background(), env); err != nil {
			t.Fatal(err)
		}
		for _, n := range []string{
			"run",
			"lookup",              // client
			"launch",              // subagent
			"search",              // MCP
			reservedToolName,      // reserved
			"client__laptop__cat", // the registered prefix
			"client__other__x",    // the prefix, even unclaimed
		} {
			hands.tools = append(hands.tools, etool(env.ID, n))
		}
		s.opts.MCP, s.opts.Executors = mcp, hands
		s.opts.Clients, s.opts.ClientCallTimeout = s.db, rigClientCallTimeout
		s.opts.Registry.MCPServers = []baton.MCPServer{{Name: "srv1"}, {Name: "srv2"}}
		s.prof.MCPServers = []string{"srv1", "srv2"}
		s.prof.ExecutorEnvironments = []string{env.ID}
		s.prof.AllowedTools = append(s.prof.AllowedTools, json.RawMessage(`"client__laptop__ls"`), json.RawMessage(`"b_only"`))
		s.reqs[0] = &baton.OpenRequest{
			Tools:        def("lookup", "client__laptop__ls"),
			SandboxTools: def("shell"),
			SubagentTools: []baton.SubagentToolDef{{Name: "launch", Image: "img", InputSchema: json.RawMessage(`{}`),
				Subagents: []baton.SubagentDef{{Harness: "h", CommandTemplate: "run {model}", PromptVia: "stdin"}}}},
		}
		s.reqs[1] = &baton.OpenRequest{Tools: def("b_only")}
	})
	a := r.keys[0]
	if _, err := r.e.RegisterClient(r.ctx, r.sid, a.ClientID, &baton.ClientRegistration{Name: "laptop",
		Tools: []baton.ClientTool{{Name: "ls"}, {Name: "cat"}, {Name: "rm"}}}); err != nil {
		t.Fatal(err)
	}

	turn := r.send(a, "call everything", false)
	c := r.call("call everything")
	wantAdvertised := []string{"lookup", "client__laptop__ls", "shell", "launch", "search", "fetch", "client__laptop__rm",
		"run", "client__laptop__cat"}
	if diff := cmp.Diff(wantAdvertised, c.tools); diff != "" {
		t.Fatalf("advertised tools (-want +got):\n%s", diff)
	}
	want := map[string]string{ // name → dispatch [server]
		"lookup":                 "client",
		"client__laptop__ls":     "client",
		"shell":                  "sandbox",
		"launch":                 "subagent",
		reservedToolName:         "subagent",
		"search":                 "mcp srv1",
		"fetch":                  "mcp srv2",
		"client__laptop__rm":     "mcp srv2",
		"client__laptop__cat":    "registered",
		"run":                    "executor",
		"b_only":                 "mcp <nil>",
		"nobody_serves_this_one": "mcp <nil>",
	}
	var uses []string
	for name := range want {
		uses = append(uses, `{"type":"tool_use","id":"toolu_`+name+`","name":"`+name+`","input":{}}`)
	}
	c.answer("[" + strings.Join(uses, ",") + "]")
	// The registered client never answers: its call ends at its timeout.
	r.clk.WaitTimer(t, "client call", func(d time.Duration) bool { return d == rigClientCallTimeout })
	r.clk.Advance(rigClientCallTimeout)
	res := r.resultOf(turn) // paused on the client tools
	if res.Err != nil {
		t.Fatal(res.Err)
	}

	evs, err := r.db.EventsOfType(r.ctx, r.sid, []string{baton.EventToolCall, baton.EventToolResult})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	results := map[string]string{}
	for _, ev := range evs {
		var p struct {
			ID, Name, Dispatch string
			ToolUseID          string          `json:"tool_use_id"`
			Server             *string         `json:"server_name"`
			Content            json.RawMessage `json:"content"`
		}
		if err := json.Unmarshal(ev.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if ev.Type == baton.EventToolResult {
			results[strings.TrimPrefix(p.ToolUseID, "toolu_")] = p.Dispatch + " " + string(p.Content)
			continue
		}
		got[p.Name] = p.Dispatch
		if p.Dispatch == string(baton.DispatchMCP) {
			server := "<nil>"
			if p.Server != nil {
				server = *p.Server
			}
			got[p.Name] += " " + server
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("dispatch by name (-want +got):\n%s", diff)
	}
	// The server-side calls reached their owners.
	for name, part := range map[string]string{
		"search": "srv1/search", "fetch": "srv2/fetch", "client__laptop__rm": "srv2/client__laptop__rm",
		"client__laptop__cat": "did not answer within 3m0s", "shell": "no remote sandbox is running",
		"b_only": "no MCP server is configured",
	} {
		if !strings.Contains(results[name], part) {
			t.Errorf("result of %s: %s; want it to hold %q", name, results[name], part)
		}
	}
	if r, ok := results["lookup"]; ok {
		t.Errorf("the client tool got a server result: %s", r)
	}
}
