package baton

import (
	"context"
	"encoding/json"
	"time"
)

// SessionState is the lifecycle state of a session. open → closed and
// open → error are the only transitions; terminal states never change.
type SessionState string

const (
	StateOpen   SessionState = "open"
	StateClosed SessionState = "closed"
	StateError  SessionState = "error"
)

// Valid reports whether s is one of the three states.
func (s SessionState) Valid() bool {
	return s == StateOpen || s == StateClosed || s == StateError
}

// ToolDef is a tool declared by a client (or an Auto-mode sandbox tool).
// Description is null when absent; InputSchema defaults to {}.
type ToolDef struct {
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// SubagentDef is one harness a subagent launch tool can run.
type SubagentDef struct {
	Harness         string  `json:"harness"`
	CommandTemplate string  `json:"command_template"`
	PromptVia       string  `json:"prompt_via"`
	TimeoutSecs     *uint64 `json:"timeout_secs"`
}

// SubagentToolDef declares a remote subagent launch tool.
type SubagentToolDef struct {
	Name        string          `json:"name"`
	Description *string         `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Image       string          `json:"image"`
	Subagents   []SubagentDef   `json:"subagents"`
}

// Session is one durable agent session. Tool declarations are kept per
// participating client key id.
type Session struct {
	ID            string
	ClientKeyID   string // the creator
	ProfileID     string
	State         SessionState
	ClientVersion *string
	ClientTools   map[string][]ToolDef
	SandboxTools  map[string][]ToolDef
	SubagentTools map[string][]SubagentToolDef
	CreatedAt     time.Time
	ClosedAt      *time.Time
}

// Participant is one client key's declarations on a session, written when
// it opens or joins.
type Participant struct {
	ClientKeyID   string
	ClientVersion *string
	Tools         []ToolDef
	SandboxTools  []ToolDef
	SubagentTools []SubagentToolDef
}

// SessionStore persists sessions.
type SessionStore interface {
	// CreateSession inserts s and, in the same transaction, the session key
	// (nil for failed-open audit rows) and the events.
	CreateSession(ctx context.Context, s *Session, key *Key, events ...*Event) error
	// Session returns a session in any state, or ECodeNotFound.
	Session(ctx context.Context, id string) (*Session, error)
	// ListSessions returns sessions in creation order, filtered by state
	// when state is not empty.
	ListSessions(ctx context.Context, state SessionState, page Page) (items []*Session, next string, err error)
	// JoinSession upserts p's declarations on the open session id, inserts
	// key and appends ev in one transaction. A session that is not open
	// fails with ECodeSessionClosed; a missing one with ECodeNotFound.
	JoinSession(ctx context.Context, id string, p Participant, key *Key, ev *Event) error
	// EndSession moves an open session to state (closed or error) and
	// appends ev in the same transaction. It reports false, and appends
	// nothing, when the session was not open.
	EndSession(ctx context.Context, id string, state SessionState, ev *Event) (bool, error)
	// SetClientTools replaces one participant's client tools.
	SetClientTools(ctx context.Context, id, clientKeyID string, tools []ToolDef) error
}

// OpenRequest is the body of POST /api/v1/sessions and …/join.
type OpenRequest struct {
	ClientVersion *string           `json:"client_version"`
	Tools         []ToolDef         `json:"tools"`
	SandboxTools  []ToolDef         `json:"sandbox_tools"`
	SubagentTools []SubagentToolDef `json:"subagent_tools"`
}

// OpenResult is returned by a successful open or join.
type OpenResult struct {
	SessionID  string         `json:"session_id"`
	SessionKey string         `json:"session_key"`
	Profile    ProfileSummary `json:"profile"`
}

// ProfileSummary is the sanitized profile a client sees: never the registry
// name or the provider's token.
type ProfileSummary struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	AllowedTools []json.RawMessage `json:"allowed_tools"`
	MCPServers   []string          `json:"mcp_servers"`
	Provider     ProviderSummary   `json:"provider"`
}

// ProviderSummary names a provider's kind and model.
type ProviderSummary struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
}

// SessionService runs the session lifecycle for the client port and the
// admin port.
type SessionService interface {
	// Open creates a session for clientKey (BAE's client API).
	Open(ctx context.Context, clientKey *Key, req *OpenRequest) (*OpenResult, error)
	// Join adds clientKey to an open session (BAE's client API).
	Join(ctx context.Context, clientKey *Key, sessionID string, req *OpenRequest) (*OpenResult, error)
	// CloseSession closes the session sessionKey is bound to
	// (BAE's client API).
	CloseSession(ctx context.Context, sessionKey *Key) error
	// Participants returns the sorted client key ids of registered drivers.
	Participants(ctx context.Context, sessionID string) ([]string, error)
	// RevokeClientKey revokes a client key with the cascade of
	// BAE's admin API
	RevokeClientKey(ctx context.Context, id string) error
}
