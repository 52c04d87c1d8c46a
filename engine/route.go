package engine

import (
	"encoding/json"
	"strings"

	"github.com/baton-engine/baton"
)

// Tool routing: what a turn advertises to the model and which dispatcher
// runs each name it calls. A server turn snapshots the acting client's
// declared tools (toolsFor) and the profile's MCP tools (withMCP) when it
// starts; before every model call it adds the live executors' tools
// (withExecutors), remote_subagent_status and the live registered
// clients' tools (withRegistered). A brain turn's server-side tools are
// built the same way (brainTools). The first owner of a name keeps it,
// so every advertised name belongs to exactly one dispatcher:
//
//	client → sandbox → subagent (and remote_subagent_status) → MCP
//	→ registered client (client__{name}__{tool}) → executor
//
// A called name nobody advertises goes to MCP, which answers with an
// error result. classify applies the precedence to a called name and
// dispatch hands a server-side call to its dispatcher; the dispatchers
// live with their features (doc.go lists them).

// toolset is what one turn advertises and how it routes each name: the
// acting driver's client, sandbox and subagent tools (BAE's engine).
// Every advertised name belongs to exactly one dispatcher.
type toolset struct {
	defs     []json.RawMessage
	client   map[string]bool
	sandbox  map[string]bool
	subagent map[string]bool
	// agents are the acting client's subagent declarations, for launches.
	agents []baton.SubagentToolDef
	// registered routes client__{name}__{tool} names to live registered
	// clients; rebuilt before every model call (withRegistered).
	registered map[string]regTarget
	// mcp routes MCP tool names to their server (withMCP).
	mcp map[string]string
	// executor routes executor tool names to their environment; rebuilt
	// before every model call (withExecutors).
	executor map[string]execTarget
}

// registeredPrefix starts every model-visible registered tool name:
// client__{name}__{tool}.
const registeredPrefix = "client__"

// regTarget is where a registered tool name routes.
type regTarget struct {
	clientID string
	tool     string
}

// RegisteredToolName is the model-visible name of a registered client's
// tool.
func RegisteredToolName(client, tool string) string {
	return registeredPrefix + client + "__" + tool
}

// execTarget is where an executor tool name routes.
type execTarget struct {
	env     string // environment id
	profile string // the session's profile, sent with session.assign
}

// toolsFor snapshots the acting client key's tools at the start of a turn.
func toolsFor(s *baton.Session, acting string) *toolset {
	ts := &toolset{client: map[string]bool{}, sandbox: map[string]bool{}, subagent: map[string]bool{}}
	add := func(name string, desc *string, schema json.RawMessage) {
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{}`)
		}
		ts.defs = append(ts.defs, mustJSON(struct {
			Name        string          `json:"name"`
			Description *string         `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}{name, desc, schema}))
	}
	for _, t := range s.ClientTools[acting] {
		ts.client[t.Name] = true
		add(t.Name, t.Description, t.InputSchema)
	}
	for _, t := range s.SandboxTools[acting] {
		ts.sandbox[t.Name] = true
		add(t.Name, t.Description, t.InputSchema)
	}
	ts.agents = s.SubagentTools[acting]
	for _, t := range s.SubagentTools[acting] {
		ts.subagent[t.Name] = true
		add(t.Name, t.Description, t.InputSchema)
	}
	return ts
}

// withMCP adds the session's MCP tools to ts after its client, sandbox and
// subagent tools. A name already advertised keeps its owner: a declared
// tool wins over MCP, and between MCP servers the first in the profile's
// order wins, so no name is sent twice (BAE sends both).
func (tc *turnCtx) withMCP(prof *baton.Profile, ts *toolset) *toolset {
	if tc.e.mcp != nil && len(prof.MCPServers) > 0 {
		_ = tc.emitBehind() // connecting may take a while: what is held goes out first
	}
	tools := tc.e.mcpTools(tc.t.ctx, tc.a.id, prof)
	if len(tools) == 0 {
		return ts
	}
	ts.mcp = map[string]string{}
	for _, t := range tools {
		if ts.client[t.Name] || ts.sandbox[t.Name] || ts.subagent[t.Name] || t.Name == reservedToolName || ts.mcp[t.Name] != "" {
			continue
		}
		ts.mcp[t.Name] = t.Server
		schema := t.InputSchema
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		ts.defs = append(ts.defs, mustJSON(struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}{t.Name, t.Description, schema}))
	}
	return ts
}

// withExecutors returns base plus the tools of the live executors of the
// profile's environments, read now: it runs before every model call, so
// an executor that connects during a turn is seen by its next call.
//
// A name is advertised once. Names the acting client declared (client,
// sandbox and subagent tools), remote_subagent_status, MCP tools and the
// client__ prefix of registered clients keep their owners; between
// environments the first in the profile's order wins, and within one the
// executor with the smallest id defines the tool.
func (tc *turnCtx) withExecutors(prof *baton.Profile, base *toolset) *toolset {
	x := tc.e.executors
	if x == nil || len(prof.ExecutorEnvironments) == 0 {
		return base
	}
	tools := x.Tools(prof.ExecutorEnvironments)
	if len(tools) == 0 {
		return base
	}
	ts := *base
	ts.defs = append(make([]json.RawMessage, 0, len(base.defs)+len(tools)), base.defs...)
	ts.executor = make(map[string]execTarget, len(tools))
	for _, t := range tools {
		n := t.Name
		if ts.client[n] || ts.sandbox[n] || ts.subagent[n] || n == reservedToolName || ts.mcp[n] != "" ||
			strings.HasPrefix(n, registeredPrefix) {
			continue
		}
		if _, dup := ts.executor[n]; dup {
			continue
		}
		ts.executor[n] = execTarget{env: t.EnvironmentID, profile: prof.ID}
		schema := t.InputSchema
		if len(schema) == 0 || string(schema) == "null" || string(schema) == "{}" {
			schema = json.RawMessage(`{"type":"object"}`) // what providers require at least
		}
		ts.defs = append(ts.defs, mustJSON(struct {
			Name        string          `json:"name"`
			Description *string         `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		}{n, t.Description, schema}))
	}
	return &ts
}

// withRegistered returns base plus the tools of the session's live
// registered clients, read now: it is called before every model call, so
// a client registered during a running turn is seen by the next one.
func (tc *turnCtx) withRegistered(base *toolset) (*toolset, error) {
	base = tc.withStatus(base) // remote_subagent_status, while it has something to report
	if tc.e.clients == nil {
		return base, nil
	}
	live, err := tc.e.Clients(tc.wctx, tc.a.id)
	if err != nil {
		tc.e.log.Error("load registered clients", "session_id", tc.a.id, "err", err)
		return nil, errLoop
	}
	if len(live) == 0 {
		return base, nil
	}
	ts := *base
	ts.defs = append([]json.RawMessage(nil), base.defs...)
	ts.registered = map[string]regTarget{}
	for _, c := range live {
		for _, t := range c.Tools {
			name := RegisteredToolName(c.Name, t.Name)
			if ts.client[name] || ts.sandbox[name] || ts.subagent[name] || ts.mcp[name] != "" {
				continue // a declared tool of that exact name wins
			}
			ts.registered[name] = regTarget{clientID: c.ID, tool: t.Name}
			desc := t.Description
			ts.defs = append(ts.defs, mustJSON(struct {
				Name        string          `json:"name"`
				Description *string         `json:"description"`
				InputSchema json.RawMessage `json:"input_schema"`
			}{name, &desc, t.Parameters}))
		}
	}
	return &ts, nil
}

// withStatus adds the status tool to ts while the session has subagents
// to report; it is called before every provider iteration.
func (tc *turnCtx) withStatus(ts *toolset) *toolset {
	if !tc.e.subs.tracked(tc.a.id) {
		return ts
	}
	out := *ts
	out.defs = append(append(make([]json.RawMessage, 0, len(ts.defs)+1), ts.defs...), statusToolDef)
	return &out
}

// brainTools is the set of server-side tools the session offers actor's
// brain: the acting client's Auto-mode sandbox tools while a remote
// sandbox runs, the profile's MCP tools (connected on first use) and the
// tools of the executors of its executor_environments, with the
// precedence of a server turn — the first owner of a name keeps it.
// Client tools are the brain's own (custom tools); subagent and
// registered-client tools are not offered.
func (tc *turnCtx) brainTools(s *baton.Session, prof *baton.Profile) *toolset {
	ts := &toolset{client: map[string]bool{}, sandbox: map[string]bool{}, subagent: map[string]bool{}}
	if tc.a.runningSandbox() != nil {
		for _, t := range s.SandboxTools[tc.t.actor] {
			if ts.sandbox[t.Name] {
				continue
			}
			ts.sandbox[t.Name] = true
			schema := t.InputSchema
			if len(schema) == 0 || string(schema) == "null" {
				schema = json.RawMessage(`{}`)
			}
			ts.defs = append(ts.defs, mustJSON(baton.ToolDef{Name: t.Name, Description: t.Description, InputSchema: schema}))
		}
	}
	return tc.withExecutors(prof, tc.withMCP(prof, ts))
}

// classify routes a tool name; the first match wins, and anything unknown
// goes to MCP, which answers with an error result when nobody serves it.
func (ts *toolset) classify(name string) baton.Dispatch {
	switch {
	case ts.client[name]:
		return baton.DispatchClient
	case ts.sandbox[name]:
		return baton.DispatchSandbox
	case ts.subagent[name] || name == reservedToolName:
		return baton.DispatchSubagent
	}
	if _, ok := ts.registered[name]; ok {
		return baton.DispatchRegistered
	}
	if _, ok := ts.executor[name]; ok {
		return baton.DispatchExecutor
	}
	return baton.DispatchMCP
}

// offers reports which dispatcher serves name in ts, if any.
func (ts *toolset) offers(name string) (baton.Dispatch, bool) {
	_, exec := ts.executor[name]
	if !ts.sandbox[name] && ts.mcp[name] == "" && !exec {
		return "", false
	}
	return ts.classify(name), true
}

// dispatch runs one server-side tool call and returns its tool_result
// block. Tool failures are results, never turn errors; only a failure to
// persist events stops the turn.
func (tc *turnCtx) dispatch(kind baton.Dispatch, u toolUse, ts *toolset) (json.RawMessage, error) {
	switch kind {
	case baton.DispatchRegistered:
		return tc.dispatchRegisteredCall(u, ts.registered[u.Name])
	case baton.DispatchSandbox:
		return tc.dispatchSandbox(u)
	case baton.DispatchSubagent:
		return tc.dispatchSubagent(u, ts)
	case baton.DispatchExecutor:
		return tc.dispatchExecutor(u, ts.executor[u.Name])
	default:
		return tc.dispatchMCP(u, ts)
	}
}
