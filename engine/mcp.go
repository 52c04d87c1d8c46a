package engine

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/baton-engine/baton"
)

// mcpServers resolves a profile's mcp_servers names in the registry, in
// the profile's order; a name the registry lacks is logged and skipped.
func (e *Engine) mcpServers(sessionID string, names []string) []baton.MCPServer {
	var out []baton.MCPServer
	for _, n := range names {
		found := false
		for _, s := range e.registry.MCPServers {
			if s.Name == n {
				out = append(out, s)
				found = true
				break
			}
		}
		if !found {
			e.log.Error("MCP server not in the registry", "session_id", sessionID, "server", n)
		}
	}
	return out
}

// mcpTools connects the profile's MCP servers for the session (once per
// process; after a restart the first turn connects again) and returns
// their tools. Failures are logged by the pool and never fail the caller.
func (e *Engine) mcpTools(ctx context.Context, sessionID string, prof *baton.Profile) []baton.MCPTool {
	if e.mcp == nil || len(prof.MCPServers) == 0 {
		return nil
	}
	tools, err := e.mcp.Tools(ctx, sessionID, e.mcpServers(sessionID, prof.MCPServers))
	if err != nil {
		e.log.Error("MCP tools", "session_id", sessionID, "err", err)
	}
	return tools
}

// dispatchMCP runs a call routed to MCP on the server that owns the name
// (BAE's engine). Without a route the result is the documented error.
// Failures are error results; the turn continues.
func (tc *turnCtx) dispatchMCP(u toolUse, ts *toolset) (json.RawMessage, error) {
	id, actor := tc.a.id, tc.t.actor
	server := ts.mcp[u.Name]
	if server == "" || tc.e.mcp == nil {
		msg := fmt.Sprintf("no MCP server is configured for tool '%s'", u.Name)
		content := textContent("MCP error: " + msg)
		err := tc.emit(
			baton.NewEvent(id, actor, baton.EventMCPRequest, map[string]any{
				"method": "tools/call", "server_name": nil, "tool": u.Name, "input": u.Input,
			}),
			baton.NewEvent(id, actor, baton.EventMCPResponse, map[string]any{"server_name": nil, "ok": false, "error": msg}),
			baton.NewEvent(id, actor, baton.EventToolResult, map[string]any{
				"tool_use_id": u.ID, "dispatch": baton.DispatchMCP, "server_name": nil, "is_error": true, "content": content,
			}),
		)
		return toolResult(u.ID, content, true), err
	}
	if err := tc.emitBehind(baton.NewEvent(id, actor, baton.EventMCPRequest, map[string]any{
		"method": "tools/call", "server_name": server, "tool": u.Name, "input": u.Input,
	})); err != nil {
		return nil, err
	}
	var (
		resp    map[string]any
		content json.RawMessage
		isErr   bool
	)
	raw, isErr, err := tc.e.mcp.Call(tc.t.ctx, id, server, u.Name, u.Input)
	if err != nil {
		isErr = true
		resp = map[string]any{"server_name": server, "ok": false, "error": err.Error()}
		content = textContent("MCP error: " + err.Error())
	} else {
		resp = map[string]any{"server_name": server, "ok": !isErr, "result": raw}
		var r struct {
			Content json.RawMessage `json:"content"`
		}
		_ = json.Unmarshal(raw, &r)
		content = r.Content
		if len(content) == 0 || string(content) == "null" {
			content = json.RawMessage(`[]`)
		}
	}
	err = tc.emit(
		baton.NewEvent(id, actor, baton.EventMCPResponse, resp),
		baton.NewEvent(id, actor, baton.EventToolResult, map[string]any{
			"tool_use_id": u.ID, "dispatch": baton.DispatchMCP, "server_name": server, "is_error": isErr, "content": content,
		}),
	)
	return toolResult(u.ID, content, isErr), err
}
