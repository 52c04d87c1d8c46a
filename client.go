package baton

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
)

// Reasons a registered client ends (session.client.expire).
const (
	ClientGoneTTL     = "ttl"
	ClientGoneDeleted = "deleted"
	ClientGoneClosed  = "session_closed" // the session closed (Baton)
)

// Limits of a client registration (the registered-clients contract, docs/api.md).
const (
	MaxClientNameLen         = 32
	MaxClientTools           = 64
	MaxClientToolNameLen     = 64
	MaxClientToolDescLen     = 4096
	MinClientTTLSeconds      = 5
	MaxClientTTLSeconds      = 3600
	DefaultMaxClients        = 16
	DefaultClientCallTimeout = 120 * time.Second
)

// ClientTool is one tool of a registered client, as it registered it.
type ClientTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

// RegisteredClient is a named client attached to a session with its own
// tools and lifetime. Rows are never removed: a gone client keeps its name
// spent for the session.
type RegisteredClient struct {
	ID            string // UUID form
	SessionID     string
	Name          string // assigned
	RequestedName string
	Tools         []ClientTool
	TTLSeconds    int        // 0: lifetime never
	ExpiresAt     *time.Time // nil for never
	CreatedAt     time.Time
	LastPingAt    time.Time
	GoneAt        *time.Time
	GoneReason    string
}

// Live reports whether c is neither gone nor past its expiry at now.
func (c *RegisteredClient) Live(now time.Time) bool {
	return c.GoneAt == nil && (c.ExpiresAt == nil || now.Before(*c.ExpiresAt))
}

// ToolNames returns the names of c's tools in order.
func (c *RegisteredClient) ToolNames() []string {
	out := make([]string, len(c.Tools))
	for i, t := range c.Tools {
		out[i] = t.Name
	}
	return out
}

// ClientRegistration is a validated registration body.
type ClientRegistration struct {
	Name       string
	TTLSeconds int // 0: never
	Tools      []ClientTool
}

// ClientCall is one call addressed to a registered client, as its calls
// stream carries it.
type ClientCall struct {
	CallID    string          `json:"call_id"`
	Tool      string          `json:"tool"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Deadline  string          `json:"deadline"`
}

// ClientResult is a registered client's answer to one call. Content is a
// JSON string or an array of content blocks.
type ClientResult struct {
	Content json.RawMessage
	IsError bool
}

// CallFeed is an open calls stream. Next blocks for the next call and
// returns nil, nil when the client is gone; Close ends the stream.
type CallFeed struct {
	Next  func(ctx context.Context) (*ClientCall, error)
	Close func()
}

// ClientStore persists registered clients.
type ClientStore interface {
	// CreateClient assigns c.Name from c.RequestedName under the session's
	// spent names, checks the session is open (ECodeSessionClosed) and
	// holds fewer than maxLive live clients (ECodeConflict), inserts c and
	// appends the event mk builds — one transaction.
	CreateClient(ctx context.Context, c *RegisteredClient, maxLive int, mk func(*RegisteredClient) *Event) error
	// Client returns a client in any state (ECodeNotFound).
	Client(ctx context.Context, sessionID, id string) (*RegisteredClient, error)
	// LiveClients returns the session's clients that are not gone, in
	// registration order.
	LiveClients(ctx context.Context, sessionID string) ([]*RegisteredClient, error)
	// PingClient records a ping at at on a client that is not gone and
	// returns it updated; otherwise ECodeNotFound.
	PingClient(ctx context.Context, sessionID, id string, at time.Time) (*RegisteredClient, error)
	// SetRegisteredTools replaces a live client's tools and appends ev.
	SetRegisteredTools(ctx context.Context, sessionID, id string, tools []ClientTool, at time.Time, ev *Event) error
	// EndClient marks a client gone with reason and appends ev; false when
	// it was already gone.
	EndClient(ctx context.Context, sessionID, id, reason string, at time.Time, ev *Event) (bool, error)
	// DueClients returns clients not gone whose expiry is at or before now.
	DueClients(ctx context.Context, now time.Time) ([]*RegisteredClient, error)
}

// ClientService runs registered clients for the /v1 routes. actor is the
// client key id events are attributed to.
type ClientService interface {
	RegisterClient(ctx context.Context, sessionID, actor string, reg *ClientRegistration) (*RegisteredClient, error)
	Clients(ctx context.Context, sessionID string) ([]*RegisteredClient, error)
	PingClient(ctx context.Context, sessionID, clientID string) (*RegisteredClient, error)
	ReplaceClientTools(ctx context.Context, sessionID, clientID, actor string, tools []ClientTool) error
	DeleteClient(ctx context.Context, sessionID, clientID, actor string) error
	ClientCalls(ctx context.Context, sessionID, clientID string) (*CallFeed, error)
	ClientResult(ctx context.Context, sessionID, clientID, callID string, r ClientResult) (accepted bool, err error)
}

// NewUUID returns a random (version 4) UUID in lower-case 8-4-4-4-12 form.
func NewUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return FormatUUID(b[:])
}

// FormatUUID writes 16 bytes as 8-4-4-4-12 lower-case hex.
func FormatUUID(b []byte) string {
	h := hex.EncodeToString(b)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// ParseSessionID accepts a session id in ses_ form or in UUID form (the
// 32 hex digits of a ses_ id as 8-4-4-4-12, as the registered-client
// routes allow) and returns the ses_ form; ok is false for anything else.
func ParseSessionID(s string) (id string, ok bool) {
	var digits string
	if rest, found := strings.CutPrefix(s, PrefixSession); found {
		digits = rest
	} else {
		if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
			return "", false
		}
		digits = s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:36]
	}
	digits = strings.ToLower(digits)
	if len(digits) != 32 {
		return "", false
	}
	if _, err := hex.DecodeString(digits); err != nil {
		return "", false
	}
	return PrefixSession + digits, true
}

// SessionUUID is the UUID form of a ses_ id, which ParseSessionID reads
// back; anything else is returned as it is.
func SessionUUID(id string) string {
	b, err := hex.DecodeString(strings.TrimPrefix(id, PrefixSession))
	if err != nil || len(b) != 16 {
		return id
	}
	return FormatUUID(b)
}
