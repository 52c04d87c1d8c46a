package baton

import (
	"context"
	"encoding/json"
)

// MCPTool is one tool an MCP server listed for a session.
type MCPTool struct {
	Server      string // the registry name of the server that lists it
	Name        string
	Description string
	InputSchema json.RawMessage // the tool's inputSchema; empty when the server sent none
}

// MCPPool holds the MCP client connections of open sessions. Connections
// live in memory only: after a restart a session's next Tools call
// connects again.
type MCPPool interface {
	// Tools connects, once per session, every server of servers that is
	// not yet connected, and returns the tools of the connected ones in
	// servers' order. A server that cannot be resolved or reached is
	// logged and left out; it never fails the call.
	Tools(ctx context.Context, sessionID string, servers []MCPServer) ([]MCPTool, error)
	// Call runs tools/call on the named server of the session. result is
	// the raw CallToolResult; isError is its isError flag. err is a
	// connection, transport, timeout or protocol failure.
	Call(ctx context.Context, sessionID, server, tool string, input json.RawMessage) (result json.RawMessage, isError bool, err error)
	// CloseSession closes the session's connections and stops its stdio
	// servers. It is idempotent.
	CloseSession(sessionID string)
}
