package baton

import (
	"context"
	"encoding/json"
	"time"
)

// Brains: a profile with Brain{Type: BrainExecutor} runs its turns on the
// agent loop of an executor of its machine (bma.executor.v1.1, "How
// executors serve sessions"). The engine drives the turns through Brains;
// the executor side reports back through AgentSink; the model gateway gets
// each turn's credentials through TurnCredentials and asks the engine
// through BrainTurns whether a turn is still active.

// Turn outcomes of session.status_idle.
const (
	OutcomeCompleted = "completed"
	OutcomeCanceled  = "canceled"
	OutcomeFailed    = "failed"
)

// Interaction statuses (interaction.response).
const (
	InteractionResolved = "resolved"
	InteractionExpired  = "expired"
	InteractionCanceled = "canceled"
)

// TurnMetadata is a brain turn's model and tools credentials, sent in
// turn.start's metadata. ToolsMCPURL and ToolsMCPToken are empty when the
// brain gets no tools credential.
type TurnMetadata struct {
	ModelBaseURL        string
	ModelToken          string
	ModelTokenExpiresAt time.Time
	ToolsMCPURL         string
	ToolsMCPToken       string
}

// TurnCredentials issues the credentials of a brain turn about to start on
// machineID's executor in binding epoch (the model gateway implements
// it). A nil TurnCredentials means empty metadata.
type TurnCredentials interface {
	Issue(ctx context.Context, sessionID, turnID, machineID string, epoch int64) (TurnMetadata, error)
}

// BrainTurns says whether a brain turn is active: started and not yet
// ended (running, or paused on a custom tool). The engine implements it;
// an unknown session or turn is simply not active.
type BrainTurns interface {
	TurnActive(ctx context.Context, sessionID, turnID string) (bool, error)
}

// BrainTurn is one turn.start.
type BrainTurn struct {
	SessionID   string
	MachineID   string          // the profile's brain machine
	TurnID      string          // unique; turn.start is idempotent by it
	Input       json.RawMessage // content blocks
	CustomTools []ToolDef       // the acting client's tools, offered as custom tools
	Credentials TurnCredentials // nil: the Brains' own (none: empty metadata)
}

// InteractionAnswer is a driver's answer to an interaction.
type InteractionAnswer struct {
	Decision string `json:"decision,omitempty"` // "allow" or "deny" for a permission
	Text     string `json:"text,omitempty"`
}

// Brains runs turns on executors' agent loops. Errors carry codes: a
// session whose machine has no connected agent executor, or whose
// executor is away, is ECodeUnavailable; a turn.start refused because a
// turn runs, or a turn.input for a turn the executor no longer runs, is
// ECodeConflict; an unknown session or interaction ECodeNotFound.
type Brains interface {
	// Attach sets who hears what agent executors report; call it once,
	// before executors connect.
	Attach(sink AgentSink)
	// StartTurn sends turn.start, opening the agent session on the
	// machine's least loaded agent executor on first use, and returns
	// once the executor accepted the turn.
	StartTurn(ctx context.Context, t *BrainTurn) error
	// TurnInput adds input to the running turn (turn.input).
	TurnInput(ctx context.Context, sessionID, turnID, inputID string, input json.RawMessage) error
	// CancelTurn sends turn.cancel; false when the executor does not run
	// the turn.
	CancelTurn(ctx context.Context, sessionID, turnID string) (bool, error)
	// CloseAgent closes the agent session (session.close, delivered
	// once the executor is connected) and forgets it.
	CloseAgent(sessionID string)
	// RespondInteraction answers an open interaction by its id; the
	// first answer wins (a later one is ECodeConflict). interaction.response
	// is delivered until the executor answers it.
	RespondInteraction(sessionID, interactionID string, a InteractionAnswer) error
	// CustomToolResult delivers a client's result of an
	// agent.custom_tool_use (agent.custom_tool_result) until the executor
	// answers it; repeats of a tool_use_id are ignored.
	CustomToolResult(sessionID, toolUseID string, r ClientResult) error
}

// AgentEvent is one durable event an agent executor reported, deduplicated
// and in sequence order.
type AgentEvent struct {
	SessionID  string
	MachineID  string // the reporting executor's machine
	ExecutorID string
	TurnID     string
	EventID    string
	Sequence   int64
	Type       string
	Event      json.RawMessage // the AgentEvent object, type included
}

// AgentDelta is a live preview of the durable event EventID.
type AgentDelta struct {
	SessionID string
	TurnID    string
	EventID   string
	Delta     json.RawMessage
}

// Interaction is an approval or a question an agent put to the platform.
// ID is the platform interaction id, which answers name.
type Interaction struct {
	ID        string
	SessionID string
	TurnID    string
	Kind      string // "permission" or "question"
	ToolUseID string
	Prompt    string
	Options   json.RawMessage // as sent; nil when absent
	ExpiresAt *time.Time
}

// AgentSink hears what agent executors report about brain sessions; the
// engine implements it. Calls about one session come in order.
type AgentSink interface {
	// AgentEvent records an event durably; nil acknowledges it.
	AgentEvent(ctx context.Context, ev *AgentEvent) error
	// AgentDelta relays a preview live; it is never stored.
	AgentDelta(d *AgentDelta)
	// Interaction records a new interaction; nil accepts it.
	Interaction(ctx context.Context, in *Interaction) error
	// InteractionEnded records that an open interaction expired
	// (InteractionExpired) or was withdrawn by the executor
	// (InteractionCanceled, with its reason).
	InteractionEnded(ctx context.Context, sessionID, interactionID, status, reason string)
	// AgentLost says the executor holding the session's agent session is
	// gone for good (err says why): a running turn cannot end normally.
	AgentLost(sessionID string, err error)
}

// InteractionService serves session.respondInteraction (Baton
// extension): params are the raw JSON-RPC params, the result is
// JSON-ready.
type InteractionService interface {
	RespondInteraction(ctx context.Context, key *Key, params json.RawMessage) (any, error)
}
