package proto

import (
	"encoding/json"
	"time"
)

// Shapes of every method's params and results (bma.executor.v1.1, "Method
// shapes"). Times are RFC 3339; content blocks and agent events travel as
// raw JSON.

// ToolDef is a tool an executor serves: a client tool's shape (the same
// fields as the harness's tool declarations, so the two convert). A nil
// Description is sent as null. Decoding accepts "parameters" as an alias
// of "input_schema".
type ToolDef struct {
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// MarshalJSON writes a missing input schema as {}.
func (d ToolDef) MarshalJSON() ([]byte, error) {
	type plain ToolDef
	if d.InputSchema == nil {
		d.InputSchema = json.RawMessage(`{}`)
	}
	return json.Marshal(plain(d))
}

// UnmarshalJSON reads "parameters" when "input_schema" is absent.
func (d *ToolDef) UnmarshalJSON(b []byte) error {
	var w struct {
		Name        string          `json:"name"`
		Description *string         `json:"description"`
		InputSchema json.RawMessage `json:"input_schema"`
		Parameters  json.RawMessage `json:"parameters"`
	}
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	*d = ToolDef{Name: w.Name, Description: w.Description, InputSchema: w.InputSchema}
	if d.InputSchema == nil {
		d.InputSchema = w.Parameters
	}
	return nil
}

// Capabilities is what an executor declares at register and in
// executor.capabilities.update.
type Capabilities struct {
	Tools   []ToolDef          `json:"tools,omitempty"`
	Process *ProcessCapability `json:"process,omitempty"`
	Agent   *AgentCapability   `json:"agent,omitempty"`
	FS      *FSCapability      `json:"fs,omitempty"`
}

// ProcessCapability declares a remote shell. MaxSessions 0 is no limit.
type ProcessCapability struct {
	MaxSessions int `json:"max_sessions"`
}

// AgentCapability declares a brain. MaxSessions 0 is no limit.
type AgentCapability struct {
	MaxSessions int      `json:"max_sessions"`
	CustomTools bool     `json:"custom_tools"`
	Harnesses   []string `json:"harnesses,omitempty"`
}

// FSCapability declares FUSE mounts of session file views.
type FSCapability struct {
	Fuse bool `json:"fuse"`
}

// Ack is the {ok:true} result.
type Ack struct {
	OK bool `json:"ok"`
}

// Reason is the params of executor.drain and executor.close.
type Reason struct {
	Reason string `json:"reason,omitempty"`
}

// SessionEpoch names one binding of a session.
type SessionEpoch struct {
	SessionID     string `json:"session_id"`
	Epoch         int64  `json:"epoch"`
	AckedSequence *int64 `json:"acked_sequence,omitempty"`
}

// --- executor → harness ---

// RegisterParams is executor.register. EnvironmentID is "" for a
// machine-scoped executor.
type RegisterParams struct {
	Protocol      string       `json:"protocol"`
	ExecutorID    string       `json:"executor_id,omitempty"`
	EnvironmentID string       `json:"environment_id"`
	Capabilities  Capabilities `json:"capabilities"`
	Resume        *Resume      `json:"resume,omitempty"`
}

// Resume reattaches sessions after a reconnect.
type Resume struct {
	ExecutorID     string         `json:"executor_id"`
	ActiveSessions []SessionEpoch `json:"active_sessions"`
}

// RegisterResult answers executor.register. Sessions (a Baton extension)
// lists the resumed sessions, sorted by id, with their new epochs: hand
// sessions (which also get session.assign with it) and agent sessions
// (with their acked_sequence), whose events, session.ended and
// tools_token.refresh must carry the new epoch from then on.
type RegisterResult struct {
	ExecutorID          string         `json:"executor_id"`
	ConnectionID        string         `json:"connection_id"`
	HeartbeatIntervalMS int64          `json:"heartbeat_interval_ms"`
	LeaseExpiresAt      time.Time      `json:"lease_expires_at"`
	TokenExpiresAt      time.Time      `json:"token_expires_at"`
	Sessions            []SessionEpoch `json:"sessions,omitempty"`
}

// HeartbeatParams is executor.heartbeat.
type HeartbeatParams struct {
	ActiveSessions []string `json:"active_sessions"`
	Load           *Load    `json:"load,omitempty"`
}

// Load is an executor's self-reported load.
type Load struct {
	RunningTools int `json:"running_tools"`
}

// HeartbeatResult answers executor.heartbeat.
type HeartbeatResult struct {
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	Drain          bool      `json:"drain"`
}

// TokenRefreshParams is executor.token.refresh.
type TokenRefreshParams struct {
	Token string `json:"token"`
}

// TokenRefreshResult answers executor.token.refresh.
type TokenRefreshResult struct {
	ExpiresAt time.Time `json:"expires_at"`
}

// CapabilitiesUpdateParams is the executor.capabilities.update
// notification.
type CapabilitiesUpdateParams struct {
	Capabilities Capabilities `json:"capabilities"`
}

// SessionEventParams is session.event. A tool executor sends Event as
// {type, data}; an agent executor also sends TurnID, EventID and Sequence,
// and Event is an AgentEvent.
type SessionEventParams struct {
	SessionID string          `json:"session_id"`
	Epoch     int64           `json:"epoch"`
	TurnID    string          `json:"turn_id,omitempty"`
	EventID   string          `json:"event_id,omitempty"`
	Sequence  *int64          `json:"sequence,omitempty"`
	Event     json.RawMessage `json:"event"`
}

// ToolEvent is a tool executor's event body.
type ToolEvent struct {
	Type string          `json:"type"`
	Data json.RawMessage `json:"data,omitempty"`
}

// AgentEvent is an agent executor's event body; which members are set
// depends on Type (agent.message, agent.thinking, agent.tool_use,
// agent.tool_result, agent.custom_tool_use, session.status_running,
// session.status_idle, agent.error).
type AgentEvent struct {
	Type                string          `json:"type"`
	Content             json.RawMessage `json:"content,omitempty"`
	Text                string          `json:"text,omitempty"`
	ToolUseID           string          `json:"tool_use_id,omitempty"`
	Name                string          `json:"name,omitempty"`
	Input               json.RawMessage `json:"input,omitempty"`
	EvaluatedPermission string          `json:"evaluated_permission,omitempty"`
	IsError             bool            `json:"is_error,omitempty"`
	TurnOutcome         string          `json:"turn_outcome,omitempty"`
	Message             string          `json:"message,omitempty"`
}

// SessionEventResult answers session.event.
type SessionEventResult struct {
	AckedSequence *int64 `json:"acked_sequence,omitempty"`
}

// Session statuses.
const (
	StatusIdle    = "idle"
	StatusRunning = "running"
	StatusError   = "error"
)

// SessionStatusParams is the session.status notification.
type SessionStatusParams struct {
	SessionID string `json:"session_id"`
	Status    string `json:"status"`
	Detail    string `json:"detail,omitempty"`
}

// SessionEndedParams is session.ended.
type SessionEndedParams struct {
	SessionID string `json:"session_id"`
	Epoch     int64  `json:"epoch"`
	Reason    string `json:"reason,omitempty"`
	Detail    string `json:"detail,omitempty"`
}

// ToolResultParams is tool.result. Content is an array of content blocks;
// large output comes as an ArtifactBlock.
type ToolResultParams struct {
	SessionID  string          `json:"session_id"`
	ToolCallID string          `json:"tool_call_id"`
	Content    json.RawMessage `json:"content"`
	IsError    bool            `json:"is_error"`
}

// ArtifactBlock references uploaded output.
type ArtifactBlock struct {
	Type       string `json:"type"` // "artifact"
	ArtifactID string `json:"artifact_id"`
	Name       string `json:"name"`
	MediaType  string `json:"media_type"`
	Size       int64  `json:"size"`
}

// ToolProgressParams is the tool.progress notification.
type ToolProgressParams struct {
	SessionID  string   `json:"session_id"`
	ToolCallID string   `json:"tool_call_id"`
	Message    string   `json:"message,omitempty"`
	Progress   *float64 `json:"progress,omitempty"`
	Total      *float64 `json:"total,omitempty"`
}

// InteractionRequestParams is interaction.request.
type InteractionRequestParams struct {
	SessionID     string          `json:"session_id"`
	TurnID        string          `json:"turn_id"`
	InteractionID string          `json:"interaction_id"`
	Kind          string          `json:"kind"` // "permission" | "question"
	ToolUseID     string          `json:"tool_use_id,omitempty"`
	Prompt        string          `json:"prompt"`
	Options       json.RawMessage `json:"options,omitempty"`
	ExpiresAt     *time.Time      `json:"expires_at,omitempty"`
}

// InteractionRequestResult answers interaction.request.
type InteractionRequestResult struct {
	PlatformInteractionID string `json:"platform_interaction_id"`
}

// InteractionCancelParams is interaction.cancel.
type InteractionCancelParams struct {
	InteractionID string `json:"interaction_id"`
	Reason        string `json:"reason"` // "resolved_locally" | "turn_canceled"
}

// ModelTokenRefreshParams is model_token.refresh.
type ModelTokenRefreshParams struct {
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
}

// ModelTokenRefreshResult answers model_token.refresh.
type ModelTokenRefreshResult struct {
	ModelToken string    `json:"model_token"`
	ExpiresAt  time.Time `json:"expires_at"`
}

// ToolsTokenRefreshParams is tools_token.refresh.
type ToolsTokenRefreshParams struct {
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
	Epoch     int64  `json:"epoch"`
}

// ToolsTokenRefreshResult answers tools_token.refresh.
type ToolsTokenRefreshResult struct {
	ToolsMCPToken string    `json:"tools_mcp_token"`
	ExpiresAt     time.Time `json:"expires_at"`
}

// EventDeltaParams is the session.event_delta notification.
type EventDeltaParams struct {
	SessionID string          `json:"session_id"`
	TurnID    string          `json:"turn_id"`
	EventID   string          `json:"event_id"`
	Delta     json.RawMessage `json:"delta"`
}

// --- harness → executor ---

// DrainResult answers executor.drain.
type DrainResult struct {
	ActiveSessions []string `json:"active_sessions"`
}

// Session sources in AssignMetadata.
const (
	SourceHarness = "harness" // long-lived
	SourceTool    = "tool"    // one-shot: ends after its tool call
)

// AssignParams is session.assign.
type AssignParams struct {
	SessionID string         `json:"session_id"`
	Epoch     int64          `json:"epoch"`
	Metadata  AssignMetadata `json:"metadata"`
	Tools     []ToolDef      `json:"tools,omitempty"`
}

// AssignMetadata says what a session is.
type AssignMetadata struct {
	Source    string `json:"source"`
	ProfileID string `json:"profile_id"`
}

// SessionStopParams is session.stop.
type SessionStopParams struct {
	SessionID string `json:"session_id"`
	Reason    string `json:"reason,omitempty"`
}

// SessionStopResult answers session.stop.
type SessionStopResult struct {
	Stopped bool `json:"stopped"`
}

// ToolCallParams is tool.call.
type ToolCallParams struct {
	SessionID  string          `json:"session_id"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
	Input      json.RawMessage `json:"input"`
	TimeoutMS  int64           `json:"timeout_ms,omitempty"`
}

// ToolCancelParams is tool.cancel.
type ToolCancelParams struct {
	SessionID  string `json:"session_id"`
	ToolCallID string `json:"tool_call_id"`
}

// ToolCancelResult answers tool.cancel.
type ToolCancelResult struct {
	Canceled bool `json:"canceled"`
}

// FsMountParams is fs.mount.
type FsMountParams struct {
	SessionID string   `json:"session_id"`
	Epoch     int64    `json:"epoch"`
	Views     []FsView `json:"views"`
}

// FsView is one mounted view of a session's files.
type FsView struct {
	View       string `json:"view"`
	Path       string `json:"path"`
	ServiceURL string `json:"service_url"`
	Token      string `json:"token"`
	Readonly   bool   `json:"readonly"`
}

// FsMountResult answers fs.mount.
type FsMountResult struct {
	Mounted []string `json:"mounted"`
}

// FsUnmountParams is fs.unmount.
type FsUnmountParams struct {
	SessionID string `json:"session_id"`
	Flush     bool   `json:"flush"`
}

// FsUnmountResult answers fs.unmount.
type FsUnmountResult struct {
	Status string `json:"status"` // "unmounted"
}

// TurnStartParams is turn.start.
type TurnStartParams struct {
	SessionID          string          `json:"session_id"`
	TurnID             string          `json:"turn_id"`
	Input              json.RawMessage `json:"input"`
	ExecutorSessionRef string          `json:"executor_session_ref,omitempty"`
	Metadata           TurnMetadata    `json:"metadata"`
}

// TurnMetadata carries a turn's model and tools credentials.
type TurnMetadata struct {
	ModelBaseURL        string    `json:"model_base_url"`
	ModelToken          string    `json:"model_token"`
	ModelTokenExpiresAt time.Time `json:"model_token_expires_at"`
	ToolsMCPURL         string    `json:"tools_mcp_url,omitempty"`
	ToolsMCPToken       string    `json:"tools_mcp_token,omitempty"`
	CustomTools         []ToolDef `json:"custom_tools,omitempty"`
	Epoch               int64     `json:"epoch"`
	// WorkspacePath is a Baton extension: where the session's workspace
	// view is mounted (fs.mount follows the first turn.start), as
	// SessionViewPath names it; empty when no files are mounted.
	WorkspacePath string `json:"workspace_path,omitempty"`
}

// TurnStartResult answers turn.start.
type TurnStartResult struct {
	Accepted           bool   `json:"accepted"`
	ExecutorSessionRef string `json:"executor_session_ref"`
}

// TurnInputParams is turn.input.
type TurnInputParams struct {
	SessionID string          `json:"session_id"`
	TurnID    string          `json:"turn_id"`
	InputID   string          `json:"input_id"`
	Input     json.RawMessage `json:"input"`
}

// TurnCancelParams is turn.cancel.
type TurnCancelParams struct {
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
}

// TurnCancelResult answers turn.cancel.
type TurnCancelResult struct {
	Canceled bool `json:"canceled"`
}

// SessionCloseParams is session.close.
type SessionCloseParams struct {
	SessionID string `json:"session_id"`
}

// SessionCloseResult answers session.close.
type SessionCloseResult struct {
	Closed bool `json:"closed"`
}

// InteractionResponseParams is interaction.response.
type InteractionResponseParams struct {
	InteractionID string             `json:"interaction_id"`
	Status        string             `json:"status"` // "resolved" | "expired" | "canceled"
	Answer        *InteractionAnswer `json:"answer,omitempty"`
}

// InteractionAnswer is a resolved interaction's answer.
type InteractionAnswer struct {
	Decision string `json:"decision,omitempty"` // "allow" | "deny"
	Text     string `json:"text,omitempty"`
}

// Accepted is the {accepted:bool} result of session.assign, tool.call (an
// acknowledgement; the outcome comes as tool.result), interaction.response
// and agent.custom_tool_result.
type Accepted struct {
	Accepted bool `json:"accepted"`
}

// CustomToolResultParams is agent.custom_tool_result.
type CustomToolResultParams struct {
	SessionID string          `json:"session_id"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
}
