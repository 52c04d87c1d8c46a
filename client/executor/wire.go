package executor

import (
	"bytes"
	"encoding/json"
	"time"
)

// ToolDef declares a tool: the same shape as a Baton client tool. A nil
// InputSchema is sent as an empty object schema; "parameters" is read
// as an alias of "input_schema".
type ToolDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// MarshalJSON fills in the empty object schema.
func (d ToolDef) MarshalJSON() ([]byte, error) {
	type plain ToolDef
	if len(d.InputSchema) == 0 {
		d.InputSchema = json.RawMessage(`{"type":"object","properties":{}}`)
	}
	return json.Marshal(plain(d))
}

// UnmarshalJSON accepts "parameters" as an alias of "input_schema".
func (d *ToolDef) UnmarshalJSON(b []byte) error {
	var w struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	d.Name, d.Description, d.InputSchema = w.Name, w.Description, w.InputSchema
	if len(d.InputSchema) == 0 {
		d.InputSchema = w.Parameters
	}
	return nil
}

// Capabilities is what the executor offers beyond its tools (those come
// from Config.Tools). Nil members are not declared.
type Capabilities struct {
	Process *ProcessCapability `json:"process,omitempty"`
	Agent   *AgentCapability   `json:"agent,omitempty"`
}

// ProcessCapability declares a remote shell. MaxSessions 0 means no
// limit.
type ProcessCapability struct {
	MaxSessions int `json:"max_sessions"`
}

// AgentCapability declares a brain. MaxSessions 0 means no limit.
type AgentCapability struct {
	MaxSessions int      `json:"max_sessions"`
	CustomTools bool     `json:"custom_tools"`
	Harnesses   []string `json:"harnesses,omitempty"`
}

// wireCaps is capabilities as executor.register sends them.
type wireCaps struct {
	Tools   []ToolDef          `json:"tools,omitempty"`
	Process *ProcessCapability `json:"process,omitempty"`
	Agent   *AgentCapability   `json:"agent,omitempty"`
	FS      *fsCapability      `json:"fs,omitempty"`
}

type registerParams struct {
	Protocol      string   `json:"protocol"`
	ExecutorID    string   `json:"executor_id,omitempty"`
	EnvironmentID string   `json:"environment_id"`
	Capabilities  wireCaps `json:"capabilities"`
	Resume        *resume  `json:"resume,omitempty"`
}

type resume struct {
	ExecutorID     string          `json:"executor_id"`
	ActiveSessions []activeSession `json:"active_sessions"`
}

type activeSession struct {
	SessionID     string `json:"session_id"`
	Epoch         int64  `json:"epoch"`
	AckedSequence *int64 `json:"acked_sequence,omitempty"`
}

// registerResult answers executor.register; Sessions (Baton) lists the
// resumed sessions with their new epochs.
type registerResult struct {
	ExecutorID          string          `json:"executor_id"`
	ConnectionID        string          `json:"connection_id"`
	HeartbeatIntervalMS int64           `json:"heartbeat_interval_ms"`
	LeaseExpiresAt      time.Time       `json:"lease_expires_at"`
	TokenExpiresAt      time.Time       `json:"token_expires_at"`
	Sessions            []activeSession `json:"sessions,omitempty"`
}

type heartbeatParams struct {
	ActiveSessions []string `json:"active_sessions"`
	Load           *load    `json:"load,omitempty"`
}

type load struct {
	RunningTools int `json:"running_tools"`
}

type heartbeatResult struct {
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	Drain          bool      `json:"drain"`
}

type tokenRefreshResult struct {
	ExpiresAt time.Time `json:"expires_at"`
}

type reasonParams struct {
	Reason string `json:"reason,omitempty"`
}

type sessionRef struct {
	SessionID string `json:"session_id"`
	Epoch     int64  `json:"epoch"`
}

type sessionEnded struct {
	SessionID string `json:"session_id"`
	Epoch     int64  `json:"epoch"`
	Reason    string `json:"reason,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

type assignParams struct {
	SessionID string `json:"session_id"`
	Epoch     int64  `json:"epoch"`
	Metadata  struct {
		Source    string `json:"source"`
		ProfileID string `json:"profile_id"`
	} `json:"metadata"`
	Tools []ToolDef `json:"tools,omitempty"`
}

type stopParams struct {
	SessionID string `json:"session_id"`
	Reason    string `json:"reason,omitempty"`
}

type toolCallParams struct {
	SessionID  string          `json:"session_id"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	Input      json.RawMessage `json:"input"`
	TimeoutMS  int64           `json:"timeout_ms,omitempty"`
}

type toolCancelParams struct {
	SessionID  string `json:"session_id"`
	ToolCallID string `json:"tool_call_id"`
}

type toolResultParams struct {
	SessionID  string          `json:"session_id"`
	ToolCallID string          `json:"tool_call_id"`
	Content    json.RawMessage `json:"content"`
	IsError    bool            `json:"is_error"`
}

type toolProgressParams struct {
	SessionID  string   `json:"session_id"`
	ToolCallID string   `json:"tool_call_id"`
	Message    string   `json:"message,omitempty"`
	Progress   *float64 `json:"progress,omitempty"`
	Total      *float64 `json:"total,omitempty"`
}

type turnStartParams struct {
	SessionID          string          `json:"session_id"`
	TurnID             string          `json:"turn_id"`
	Input              json.RawMessage `json:"input"`
	ExecutorSessionRef string          `json:"executor_session_ref,omitempty"`
	Metadata           TurnMetadata    `json:"metadata"`
}

type turnStartResult struct {
	Accepted           bool   `json:"accepted"`
	ExecutorSessionRef string `json:"executor_session_ref"`
}

type turnInputParams struct {
	SessionID string          `json:"session_id"`
	TurnID    string          `json:"turn_id"`
	InputID   string          `json:"input_id"`
	Input     json.RawMessage `json:"input"`
}

type turnRef struct {
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
}

type agentEventParams struct {
	SessionID string     `json:"session_id"`
	Epoch     int64      `json:"epoch"`
	TurnID    string     `json:"turn_id"`
	EventID   string     `json:"event_id"`
	Sequence  int64      `json:"sequence"`
	Event     AgentEvent `json:"event"`
}

// handEventParams is a tool or shell executor's session.event.
type handEventParams struct {
	SessionID string    `json:"session_id"`
	Epoch     int64     `json:"epoch"`
	Event     toolEvent `json:"event"`
}

type toolEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data"`
}

type sessionEventResult struct {
	AckedSequence *int64 `json:"acked_sequence,omitempty"`
}

type deltaParams struct {
	SessionID string          `json:"session_id"`
	TurnID    string          `json:"turn_id"`
	EventID   string          `json:"event_id"`
	Delta     json.RawMessage `json:"delta"`
}

type interactionRequest struct {
	SessionID     string     `json:"session_id"`
	TurnID        string     `json:"turn_id"`
	InteractionID string     `json:"interaction_id"`
	Kind          string     `json:"kind"`
	ToolUseID     string     `json:"tool_use_id,omitempty"`
	Prompt        string     `json:"prompt"`
	Options       []string   `json:"options,omitempty"`
	ExpiresAt     *time.Time `json:"expires_at,omitempty"`
}

type interactionRequestResult struct {
	PlatformInteractionID string `json:"platform_interaction_id"`
}

type interactionCancel struct {
	InteractionID string `json:"interaction_id"`
	Reason        string `json:"reason"`
}

type interactionResponse struct {
	InteractionID string `json:"interaction_id"`
	Status        string `json:"status"`
	Answer        *struct {
		Decision string `json:"decision,omitempty"`
		Text     string `json:"text,omitempty"`
	} `json:"answer,omitempty"`
}

type customToolResultParams struct {
	SessionID string          `json:"session_id"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}

type sessionIDParams struct {
	SessionID string `json:"session_id"`
}

type tokenRefreshParams struct {
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
	Epoch     int64  `json:"epoch,omitempty"`
}

// decodeParams unmarshals request params, answering -32602 when they do
// not fit.
func decodeParams(raw json.RawMessage, v any) *RPCError {
	if len(bytes.TrimSpace(raw)) == 0 || isNull(raw) {
		raw = json.RawMessage("{}")
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return rpcErr(CodeInvalidParams, "invalid params: "+err.Error(), nil)
	}
	return nil
}

// require answers -32602 for the first empty value of name/value pairs.
func require(pairs ...string) *RPCError {
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			return rpcErr(CodeInvalidParams, "invalid params: "+pairs[i]+" is required", nil)
		}
	}
	return nil
}
