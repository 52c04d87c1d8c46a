package baton

import (
	"context"
	"encoding/json"
)

// TurnResult is how a sendMessage ends: the assistant message and the
// events that request inserted, in order; or an error.
type TurnResult struct {
	Message Message
	Events  []*Event
	Err     error
}

// Turn is a sendMessage in flight. The turn belongs to the session: the
// caller may stop reading at any time and the turn still runs to its end.
type Turn struct {
	// Started is closed when the turn takes the session's turn gate. From
	// then on Sub carries the session's live feed.
	Started <-chan struct{}
	// Queued reports that the turn waits behind another one; otherwise it
	// holds the gate already and Started closes as soon as it is set up.
	Queued bool
	// Sub returns the caller's live feed once Started is closed, or nil
	// when the turn ended without starting (e.g. the session closed while
	// it was queued). The caller must Close it when done.
	Sub func() Subscription
	// Own reports whether an event was inserted by this request before the
	// turn ran (its own message and tool results), which its stream skips.
	// Valid after Started.
	Own func(*Event) bool
	// Done is closed when Result is ready.
	Done <-chan struct{}
	// Result returns the outcome once Done is closed.
	Result func() *TurnResult
}

// SendOptions tune one sendMessage.
type SendOptions struct {
	// StreamDeltas asks for live text deltas on Sub (Baton extension).
	StreamDeltas bool
}

// Feed is a session.subscribe stream: a replay followed by live events.
type Feed struct {
	// Next blocks for the next event. It returns (nil, nil) when the feed
	// ended normally (unsubscribe, session closed), ErrLagged when the
	// reader fell behind, or ctx's error.
	Next func(ctx context.Context) (*Notice, error)
	// Poll returns the next notice only if one is ready without waiting
	// (a replayed event, a live one already queued); ok is false
	// otherwise, and Next then says whether the feed ended. Writers use it
	// to send what is ready in one write. Nil means not supported.
	Poll func() (n *Notice, ok bool)
	// Closed reports, after Next returned (nil, nil), whether the feed
	// ended because the session is no longer open.
	Closed func() bool
	// Close releases the feed.
	Close func()
}

// TurnService runs the JSON-RPC session loop. key is the caller's session
// key; the acting client key id is key.ClientID.
type TurnService interface {
	RegisterDriver(ctx context.Context, key *Key) error
	// SendMessage takes the raw "message" param (nil when absent) so the
	// driver and state gates run before its validation, as in BAE.
	SendMessage(ctx context.Context, key *Key, message json.RawMessage, opts SendOptions) (*Turn, error)
	Subscribe(ctx context.Context, key *Key, sinceEventID string, deltas bool) (*Feed, error)
	Unsubscribe(ctx context.Context, key *Key) error
	// UpdateClientTools takes the raw "tools" param (nil when absent).
	UpdateClientTools(ctx context.Context, key *Key, tools json.RawMessage) error
	CancelTurn(ctx context.Context, key *Key) error
}

// SandboxService runs the sandbox and subagent methods of the session loop
// (BAE's client API–5.5). Params are the raw JSON-RPC params; results are
// JSON-ready values.
type SandboxService interface {
	StartRemoteSandbox(ctx context.Context, key *Key, params json.RawMessage) (any, error)
	StopRemoteSandbox(ctx context.Context, key *Key) (any, error)
	ExecRemoteSandbox(ctx context.Context, key *Key, params json.RawMessage) (any, error)
	ReportLocalSandbox(ctx context.Context, key *Key, params json.RawMessage) error
	ReportLocalSubagent(ctx context.Context, key *Key, params json.RawMessage) error
	CancelSubagent(ctx context.Context, key *Key, params json.RawMessage) (any, error)
}
