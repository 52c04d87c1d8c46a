package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/baton-engine/baton"
)

// Defaults of ExecutorOptions.
const (
	DefaultExecutorTokenTTL = time.Hour
	DefaultExecutorCacheTTL = 5 * time.Second
)

// SigningKeySetting is the setting under which the installation's executor
// token key (64 hex digits) is kept in the store.
const SigningKeySetting = "executor_token_key"

// maxExecutorToken bounds the tokens Verify looks at.
const maxExecutorToken = maxSignedToken

// ExecutorOptions configure ExecutorTokens.
type ExecutorOptions struct {
	Store  baton.ExecutorStore
	Logger *slog.Logger // nil discards
	// TTL is the lifetime of an issued token (DefaultExecutorTokenTTL when
	// zero).
	TTL time.Duration
	// CacheTTL is how long Verify trusts that a credential is not revoked
	// without asking the store (DefaultExecutorCacheTTL when zero; negative
	// asks every time). Revocations reported through RevokeCredential take
	// effect at once; those made on another node within CacheTTL.
	CacheTTL time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// ExecutorTokens implements baton.ExecutorTokens: it exchanges credentials
// for self-contained tokens signed with HMAC-SHA256 under a key kept in the
// store, so tokens survive restarts and verify on every node. It also
// implements baton.ExecutorRevoker, to forget revoked credentials at once.
type ExecutorTokens struct {
	store    baton.ExecutorStore
	log      *slog.Logger
	key      signer
	ttl      time.Duration
	cacheTTL time.Duration
	now      func() time.Time

	mu      sync.Mutex
	active  map[string]time.Time // credential id → trusted not revoked until
	revoked map[string]bool      // credential ids known revoked (for good)
}

var (
	_ baton.ExecutorTokens  = (*ExecutorTokens)(nil)
	_ baton.ExecutorRevoker = (*ExecutorTokens)(nil)
)

// OpenExecutorTokens loads the installation's signing key, creating it on
// first use (the first node to store one wins), and returns the service.
func OpenExecutorTokens(ctx context.Context, opts ExecutorOptions) (*ExecutorTokens, error) {
	x := &ExecutorTokens{
		store:    opts.Store,
		log:      opts.Logger,
		ttl:      opts.TTL,
		cacheTTL: opts.CacheTTL,
		now:      opts.Now,
		active:   map[string]time.Time{},
		revoked:  map[string]bool{},
	}
	if x.log == nil {
		x.log = slog.New(slog.DiscardHandler)
	}
	if x.ttl <= 0 {
		x.ttl = DefaultExecutorTokenTTL
	}
	if x.cacheTTL == 0 {
		x.cacheTTL = DefaultExecutorCacheTTL
	}
	if x.now == nil {
		x.now = time.Now
	}
	var err error
	if x.key, err = loadSigner(ctx, opts.Store); err != nil {
		return nil, fmt.Errorf("executor tokens: %w", err)
	}
	return x, nil
}

// TTL is the lifetime of the tokens Issue returns.
func (x *ExecutorTokens) TTL() time.Duration { return x.ttl }

// claims are what a token carries, signed.
type claims struct {
	V          int    `json:"v"`
	Scope      string `json:"s"`
	Owner      string `json:"o"`
	Credential string `json:"c"`
	Expires    int64  `json:"x"` // Unix milliseconds
}

func errCredential() error {
	return baton.Errorf(baton.ECodeUnauthorized, "invalid executor credential")
}

// Issue checks secret against scope and ownerID and returns a fresh token.
// An empty ownerID is the legacy exchange: the credential must be an
// environment credential, and its environment is the token's scope. The
// credential is checked first (a malformed, unknown or revoked one is
// ECodeUnauthorized); a credential of another owner is ECodeNotFound when
// that owner does not exist and ECodeUnauthorized when it does.
func (x *ExecutorTokens) Issue(ctx context.Context, secret, scope, ownerID string) (string, *baton.ExecutorGrant, error) {
	if scope != baton.ExecutorScopeEnvironment && scope != baton.ExecutorScopeMachine {
		return "", nil, fmt.Errorf("issue executor token: invalid scope %q", scope)
	}
	if !wellFormed(secret, baton.ExecutorCredentialPrefix) {
		return "", nil, errCredential()
	}
	sum := sha256.Sum256([]byte(secret))
	c, err := x.store.ExecutorCredentialByHash(ctx, baton.Digest(secret))
	if baton.ErrorCode(err) == baton.ECodeNotFound {
		return "", nil, errCredential()
	}
	if err != nil {
		return "", nil, fmt.Errorf("look up executor credential: %w", err)
	}
	stored, ok := parseDigest(c.Hash)
	if !ok || subtle.ConstantTimeCompare(stored[:], sum[:]) != 1 {
		x.log.Warn("auth: credential store returned a row that does not match the secret", "credential_id", c.ID)
		return "", nil, errCredential()
	}
	if c.RevokedAt != nil {
		x.forget(c.ID)
		return "", nil, baton.Errorf(baton.ECodeUnauthorized, "executor credential revoked")
	}
	switch {
	case ownerID == "" && c.Scope != baton.ExecutorScopeEnvironment:
		return "", nil, baton.Errorf(baton.ECodeUnauthorized, "this endpoint accepts environment credentials only; use POST /v1/machines/{machine_id}/token")
	case ownerID != "" && (c.Scope != scope || c.OwnerID != ownerID):
		if err := x.ownerExists(ctx, scope, ownerID); err != nil {
			return "", nil, err
		}
		return "", nil, baton.Errorf(baton.ECodeUnauthorized, "the executor credential does not belong to %s %s", scope, ownerID)
	}
	now := x.now()
	x.trust(c.ID, now)
	cl := claims{V: 1, Scope: c.Scope, Owner: c.OwnerID, Credential: c.ID, Expires: now.Add(x.ttl).UnixMilli()}
	token, err := x.sign(&cl)
	if err != nil {
		return "", nil, err
	}
	return token, cl.grant(), nil
}

// ownerExists is nil for an active environment or machine and
// ECodeNotFound otherwise.
func (x *ExecutorTokens) ownerExists(ctx context.Context, scope, id string) error {
	var err error
	if scope == baton.ExecutorScopeMachine {
		_, err = x.store.Machine(ctx, id)
	} else {
		_, err = x.store.Environment(ctx, id)
	}
	return err
}

// Verify returns the grant of a token that is well formed, correctly
// signed, unexpired, and whose credential is not revoked.
func (x *ExecutorTokens) Verify(ctx context.Context, token string) (*baton.ExecutorGrant, error) {
	payload, ok := x.key.open(baton.ExecutorTokenPrefix, token)
	if !ok {
		return nil, baton.Errorf(baton.ECodeUnauthorized, "invalid executor token")
	}
	cl, ok := decodeClaims(payload)
	if !ok {
		return nil, baton.Errorf(baton.ECodeUnauthorized, "invalid executor token")
	}
	now := x.now()
	if now.UnixMilli() >= cl.Expires {
		return nil, baton.Errorf(baton.ECodeUnauthorized, "executor token expired")
	}
	if err := x.checkCredential(ctx, cl.Credential, now); err != nil {
		return nil, err
	}
	return cl.grant(), nil
}

// checkCredential fails unless the credential id is not revoked, asking
// the store when this node has not checked it within cacheTTL.
func (x *ExecutorTokens) checkCredential(ctx context.Context, id string, now time.Time) error {
	revoked := baton.Errorf(baton.ECodeUnauthorized, "executor credential revoked")
	x.mu.Lock()
	gone, until := x.revoked[id], x.active[id]
	x.mu.Unlock()
	if gone {
		return revoked
	}
	if now.Before(until) {
		return nil
	}
	c, err := x.store.ExecutorCredential(ctx, id)
	if baton.ErrorCode(err) == baton.ECodeNotFound {
		return revoked
	}
	if err != nil {
		return fmt.Errorf("look up executor credential: %w", err)
	}
	if c.RevokedAt != nil {
		x.forget(id)
		return revoked
	}
	x.trust(id, now)
	return nil
}

// trust records that credential id was found active at now.
func (x *ExecutorTokens) trust(id string, now time.Time) {
	if x.cacheTTL < 0 {
		return
	}
	x.mu.Lock()
	if !x.revoked[id] {
		x.active[id] = now.Add(x.cacheTTL)
	}
	x.mu.Unlock()
}

// forget records that credential id is revoked.
func (x *ExecutorTokens) forget(id string) {
	x.mu.Lock()
	delete(x.active, id)
	x.revoked[id] = true
	x.mu.Unlock()
}

// RevokeCredential makes every token of the credential fail Verify on this
// node at once (baton.ExecutorRevoker).
func (x *ExecutorTokens) RevokeCredential(id string) { x.forget(id) }

func (cl *claims) grant() *baton.ExecutorGrant {
	g := &baton.ExecutorGrant{
		Scope:        cl.Scope,
		CredentialID: cl.Credential,
		ExpiresAt:    time.UnixMilli(cl.Expires).UTC(),
	}
	if cl.Scope == baton.ExecutorScopeMachine {
		g.MachineID = cl.Owner
	} else {
		g.EnvironmentID = cl.Owner
	}
	return g
}

// sign renders cl as a signed token (see signer).
func (x *ExecutorTokens) sign(cl *claims) (string, error) {
	return x.key.seal(baton.ExecutorTokenPrefix, cl)
}

// splitToken takes an executor token apart (see cutSigned).
func splitToken(token string) (head string, payload, mac []byte, ok bool) {
	return cutSigned(baton.ExecutorTokenPrefix, token)
}

// decodeClaims decodes a signed payload and checks that it names a known
// version and scope, an owner and a credential.
func decodeClaims(payload []byte) (*claims, bool) {
	var cl claims
	if !decodeStrict(payload, &cl) {
		return nil, false
	}
	switch {
	case cl.V != 1,
		cl.Scope != baton.ExecutorScopeEnvironment && cl.Scope != baton.ExecutorScopeMachine,
		cl.Owner == "", cl.Credential == "", cl.Expires <= 0:
		return nil, false
	}
	return &cl, true
}
