package baton

import (
	"context"
	"encoding/json"
	"time"
)

// DefaultExecutorCallTimeout bounds one executor tool call
// (BATON_EXECUTOR_CALL_TIMEOUT).
const DefaultExecutorCallTimeout = 120 * time.Second

// ExecutorTool is a tool a live executor of an environment serves.
type ExecutorTool struct {
	EnvironmentID string
	ToolDef
}

// ExecutorCall is one tool call the engine sends to an environment's
// executors on behalf of a session.
type ExecutorCall struct {
	SessionID     string
	ProfileID     string
	EnvironmentID string
	ToolCallID    string // unique per call; the executor deduplicates by it
	Name          string
	Input         json.RawMessage
	Timeout       time.Duration // sent as timeout_ms and bounding the wait; 0 is none
	// OnProgress, when set, receives the executor's tool.progress reports
	// while the call is pending. It must not block for long.
	OnProgress func(ExecutorProgress)
}

// ExecutorProgress is one tool.progress report.
type ExecutorProgress struct {
	Message  string   `json:"message,omitempty"`
	Progress *float64 `json:"progress,omitempty"`
	Total    *float64 `json:"total,omitempty"`
}

// ExecutorResult is the executor's tool.result: Content is what it sent
// (a content block array, or any JSON value).
type ExecutorResult struct {
	ExecutorID string
	Content    json.RawMessage
	IsError    bool
}

// ExecutorHands serves sessions' tools on executors (hands): environment-
// scoped executors connected to this server. The engine uses it without
// knowing the protocol.
type ExecutorHands interface {
	// Tools lists the tools of the connected executors of the given
	// environments, each name once: the first environment in envIDs that
	// serves a name owns it, and within one environment the executor
	// with the smallest id supplies its definition.
	Tools(envIDs []string) []ExecutorTool
	// Call runs a tool call on an executor of c.EnvironmentID serving
	// c.Name, binding the session to one on its first call and reusing
	// that binding (or binding again once it ended). An error means the
	// call got no result; its message says why, for the model to read.
	Call(ctx context.Context, c ExecutorCall) (ExecutorResult, error)
	// Release ends the session's bindings (session.stop); it returns
	// without waiting for the executors.
	Release(sessionID string)
}

// NodeTools is what another node of a cluster serves of executor tools:
// the tools of the environment-scoped executors connected to it, by
// environment (each environment's list as that node's ExecutorHands
// lists it for that environment alone). A node that is Draining is
// shutting down and takes no new calls.
type NodeTools struct {
	NodeID       string
	AdvertiseURL string
	Draining     bool
	Tools        map[string][]ToolDef // by environment id
}
