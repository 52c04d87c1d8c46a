package engine

import (
	"encoding/json"

	"github.com/baton-engine/baton"
)

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
