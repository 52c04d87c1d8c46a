package auth

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/filearea"
)

// ViewTokenPrefix starts every file view token.
const ViewTokenPrefix = "bae_fsv_"

// DefaultViewTokenTTL is the lifetime of a view token. fs.mount has no
// refresh of its own: the harness renews tokens by sending fs.mount again
// (after a resume, and before they expire).
const DefaultViewTokenTTL = 24 * time.Hour

// ViewTokenOptions configure ViewTokens.
type ViewTokenOptions struct {
	// Store keeps the installation's signing key, shared with executor
	// tokens (SigningKeySetting).
	Store baton.SettingStore
	// TTL is the lifetime of an issued token (DefaultViewTokenTTL when
	// zero).
	TTL time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// ViewTokens implements filearea.ViewTokens: the tokens fs.mount hands an
// executor for one view of a session's files, bound to the session, the
// view and its root, the binding epoch and the read-only flag. They are
// self-contained — base64url JSON claims under the installation's
// HMAC-SHA256 key, with their own prefix — so any node verifies them
// without a lookup. Whether the epoch is still the binding's is the file
// service's check (filearea.Epochs).
type ViewTokens struct {
	key signer
	ttl time.Duration
	now func() time.Time
}

var _ filearea.ViewTokens = (*ViewTokens)(nil)

// OpenViewTokens loads the installation's signing key (creating it on
// first use) and returns the service.
func OpenViewTokens(ctx context.Context, opts ViewTokenOptions) (*ViewTokens, error) {
	key, err := loadSigner(ctx, opts.Store)
	if err != nil {
		return nil, fmt.Errorf("view tokens: %w", err)
	}
	v := &ViewTokens{key: key, ttl: opts.TTL, now: opts.Now}
	if v.ttl <= 0 {
		v.ttl = DefaultViewTokenTTL
	}
	if v.now == nil {
		v.now = time.Now
	}
	return v, nil
}

// TTL is the lifetime of the tokens Issue returns.
func (v *ViewTokens) TTL() time.Duration { return v.ttl }

// viewClaims are what a view token carries, signed.
type viewClaims struct {
	V        int    `json:"v"`
	Session  string `json:"s"`
	View     string `json:"w"`
	Root     string `json:"r,omitempty"`
	Epoch    int64  `json:"e"`
	Readonly bool   `json:"ro,omitempty"`
	Expires  int64  `json:"x"` // Unix milliseconds
}

// Issue signs g; a zero ExpiresAt means now plus the TTL.
func (v *ViewTokens) Issue(g filearea.ViewGrant) (string, error) {
	if g.SessionID == "" || g.View == "" || g.Epoch < 0 {
		return "", errors.New("issue view token: a session, a view and a non-negative epoch are required")
	}
	exp := g.ExpiresAt
	if exp.IsZero() {
		exp = v.now().Add(v.ttl)
	}
	cl := viewClaims{V: 1, Session: g.SessionID, View: g.View, Root: g.Root, Epoch: g.Epoch, Readonly: g.Readonly, Expires: exp.UnixMilli()}
	return v.key.seal(ViewTokenPrefix, &cl)
}

// Verify returns the grant of a view token that is well formed, signed by
// this installation (checked in constant time) and unexpired; anything
// else is ECodeUnauthorized.
func (v *ViewTokens) Verify(token string) (*filearea.ViewGrant, error) {
	payload, ok := v.key.open(ViewTokenPrefix, token)
	var cl viewClaims
	if !ok || !decodeStrict(payload, &cl) || cl.V != 1 || cl.Session == "" || cl.View == "" || cl.Epoch < 0 || cl.Expires <= 0 {
		return nil, baton.Errorf(baton.ECodeUnauthorized, "invalid view token")
	}
	if v.now().UnixMilli() >= cl.Expires {
		return nil, baton.Errorf(baton.ECodeUnauthorized, "view token expired")
	}
	return &filearea.ViewGrant{
		SessionID: cl.Session, View: cl.View, Root: cl.Root, Epoch: cl.Epoch, Readonly: cl.Readonly,
		ExpiresAt: time.UnixMilli(cl.Expires).UTC(),
	}, nil
}
