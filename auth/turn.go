package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-engine/baton"
)

// Turn token prefixes: model tokens authorize a brain's calls to the model
// gateway, tools tokens its calls to the session's tools over MCP.
const (
	ModelTokenPrefix = "bae_mdt_"
	ToolsTokenPrefix = "bae_tlt_"
)

// DefaultTurnTokenTTL is the lifetime of model and tools tokens (bma.executor.v1.1:
// valid 1 hour).
const DefaultTurnTokenTTL = time.Hour

// ErrTurnInactive refuses a token for a turn that is not active (pending,
// running or rescheduling). Test for it with errors.Is.
var ErrTurnInactive = &baton.Error{Code: baton.ECodeForbidden, Message: "the turn is not active"}

// TurnGrant is what a model or tools token names.
type TurnGrant struct {
	SessionID string
	TurnID    string
	MachineID string // the brain's machine
	Epoch     int64  // the binding epoch; tools tokens only
	ExpiresAt time.Time
}

// TurnTokenOptions configure TurnTokens.
type TurnTokenOptions struct {
	// Store keeps the installation's signing key, shared with executor
	// tokens (SigningKeySetting).
	Store baton.SettingStore
	// Turns (the engine) is asked by every Issue whether the turn is
	// active; nil issues for any turn.
	Turns baton.BrainTurns
	// TTL is the lifetime of an issued token (DefaultTurnTokenTTL when
	// zero).
	TTL time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// TurnTokens signs and verifies the per-turn credentials of a brain: model
// tokens bound to (session, turn, machine) and tools tokens bound to
// (session, turn, epoch, machine). They are self-contained — base64url
// JSON claims under the installation's HMAC-SHA256 key, with their own
// prefixes — so any node verifies them without a lookup. Whether the turn
// is still active when a token is used is the caller's check.
type TurnTokens struct {
	key   signer
	turns baton.BrainTurns
	ttl   time.Duration
	now   func() time.Time
}

// OpenTurnTokens loads the installation's signing key (creating it on
// first use) and returns the service.
func OpenTurnTokens(ctx context.Context, opts TurnTokenOptions) (*TurnTokens, error) {
	key, err := loadSigner(ctx, opts.Store)
	if err != nil {
		return nil, fmt.Errorf("turn tokens: %w", err)
	}
	x := &TurnTokens{key: key, turns: opts.Turns, ttl: opts.TTL, now: opts.Now}
	if x.ttl <= 0 {
		x.ttl = DefaultTurnTokenTTL
	}
	if x.now == nil {
		x.now = time.Now
	}
	return x, nil
}

// TTL is the lifetime of the tokens Issue returns.
func (x *TurnTokens) TTL() time.Duration { return x.ttl }

// turnClaims are what a turn token carries, signed.
type turnClaims struct {
	V       int    `json:"v"`
	Session string `json:"s"`
	Turn    string `json:"t"`
	Machine string `json:"m"`
	Epoch   int64  `json:"e,omitempty"`
	Expires int64  `json:"x"` // Unix milliseconds
}

// IssueModel returns a fresh model token for the turn, which must be
// active (else ErrTurnInactive).
func (x *TurnTokens) IssueModel(ctx context.Context, sessionID, turnID, machineID string) (string, *TurnGrant, error) {
	return x.issue(ctx, ModelTokenPrefix, turnClaims{Session: sessionID, Turn: turnID, Machine: machineID})
}

// IssueTools returns a fresh tools token for the turn in epoch, which must
// be active (else ErrTurnInactive).
func (x *TurnTokens) IssueTools(ctx context.Context, sessionID, turnID, machineID string, epoch int64) (string, *TurnGrant, error) {
	if epoch <= 0 {
		return "", nil, errors.New("issue tools token: the epoch must be positive")
	}
	return x.issue(ctx, ToolsTokenPrefix, turnClaims{Session: sessionID, Turn: turnID, Machine: machineID, Epoch: epoch})
}

func (x *TurnTokens) issue(ctx context.Context, prefix string, cl turnClaims) (string, *TurnGrant, error) {
	if cl.Session == "" || cl.Turn == "" {
		return "", nil, errors.New("issue turn token: session and turn ids are required")
	}
	if x.turns != nil {
		active, err := x.turns.TurnActive(ctx, cl.Session, cl.Turn)
		if err != nil {
			return "", nil, fmt.Errorf("issue turn token: %w", err)
		}
		if !active {
			return "", nil, ErrTurnInactive
		}
	}
	cl.V = 1
	cl.Expires = x.now().Add(x.ttl).UnixMilli()
	token, err := x.key.seal(prefix, &cl)
	if err != nil {
		return "", nil, err
	}
	return token, cl.grant(), nil
}

// VerifyModel returns the grant of a model token that is well formed,
// signed by this installation (checked in constant time) and unexpired;
// anything else is ECodeUnauthorized.
func (x *TurnTokens) VerifyModel(token string) (*TurnGrant, error) {
	return x.verify(ModelTokenPrefix, "model", token)
}

// VerifyTools is VerifyModel for tools tokens.
func (x *TurnTokens) VerifyTools(token string) (*TurnGrant, error) {
	return x.verify(ToolsTokenPrefix, "tools", token)
}

func (x *TurnTokens) verify(prefix, kind, token string) (*TurnGrant, error) {
	payload, ok := x.key.open(prefix, token)
	if !ok {
		return nil, baton.Errorf(baton.ECodeUnauthorized, "invalid %s token", kind)
	}
	cl, ok := decodeTurnClaims(payload, prefix == ToolsTokenPrefix)
	if !ok {
		return nil, baton.Errorf(baton.ECodeUnauthorized, "invalid %s token", kind)
	}
	if x.now().UnixMilli() >= cl.Expires {
		return nil, baton.Errorf(baton.ECodeUnauthorized, "%s token expired", kind)
	}
	return cl.grant(), nil
}

// decodeTurnClaims decodes a signed payload and checks that it names a
// known version, a session and a turn, and an epoch exactly when it is a
// tools token.
func decodeTurnClaims(payload []byte, tools bool) (*turnClaims, bool) {
	var cl turnClaims
	if !decodeStrict(payload, &cl) {
		return nil, false
	}
	if cl.V != 1 || cl.Session == "" || cl.Turn == "" || cl.Expires <= 0 || (cl.Epoch > 0) != tools || cl.Epoch < 0 {
		return nil, false
	}
	return &cl, true
}

func (cl *turnClaims) grant() *TurnGrant {
	return &TurnGrant{
		SessionID: cl.Session,
		TurnID:    cl.Turn,
		MachineID: cl.Machine,
		Epoch:     cl.Epoch,
		ExpiresAt: time.UnixMilli(cl.Expires).UTC(),
	}
}
