package baton

import "encoding/json"

// Block is one content block of a conversation message, decoded just far
// enough to route it: the fields the engine, the providers and the model
// gateway act on, plus Raw, the block's original bytes, so that fields
// Baton does not know travel untouched. A Message's Content is a JSON
// string or an array of these blocks.
type Block struct {
	Type      string          `json:"type"`
	ID        *string         `json:"id,omitempty"` // nil when absent, as BAE distinguishes
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Dispatch  Dispatch        `json:"dispatch,omitempty"`
	Raw       json.RawMessage `json:"-"`
}

// Block types of the canonical (Anthropic Messages) content form.
const (
	BlockText       = "text"
	BlockImage      = "image"
	BlockToolUse    = "tool_use"
	BlockToolResult = "tool_result"
)

// TextBlock is a text block as Baton builds one ({"type":"text","text":…},
// in that order), for content it writes rather than routes.
type TextBlock struct {
	Type string `json:"type"` // BlockText
	Text string `json:"text"`
}

// Dispatch is the routing tag Baton adds to a tool_use block and to its
// tool.call and tool.result events: where the call is executed. It is
// stripped before content reaches a model.
type Dispatch string

// The dispatch targets (docs/api.md, tool routing).
const (
	DispatchClient     Dispatch = "client"     // the acting driver
	DispatchRegistered Dispatch = "registered" // a registered session client
	DispatchMCP        Dispatch = "mcp"        // the profile's MCP servers, and anything unknown
	DispatchSandbox    Dispatch = "sandbox"    // an Auto-mode tool in the session's remote sandbox
	DispatchSubagent   Dispatch = "subagent"   // a remote subagent launch or its status tool
	DispatchExecutor   Dispatch = "executor"   // an executor of the profile's executor_environments
)
