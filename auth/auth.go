package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/baton-engine/baton"
)

// Defaults of Options.
const (
	DefaultCacheTTL      = 5 * time.Second
	DefaultFlushInterval = 30 * time.Second
)

// closeFlushTimeout bounds the last write of last-use times in Close.
const closeFlushTimeout = 10 * time.Second

// Options configure an Auth.
type Options struct {
	Keys   baton.KeyStore
	Logger *slog.Logger // nil discards
	// CacheTTL is how long a verified key is trusted without asking the
	// store again (DefaultCacheTTL when zero). Revocations on this node
	// take effect at once through Forget; those made elsewhere within
	// CacheTTL.
	CacheTTL time.Duration
	// FlushInterval is how often last-use times are written
	// (DefaultFlushInterval when zero).
	FlushInterval time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// Auth implements baton.Authenticator. Open starts the goroutine that
// writes last-use times; Close stops it.
type Auth struct {
	keys  baton.KeyStore
	log   *slog.Logger
	ttl   time.Duration
	every time.Duration
	now   func() time.Time

	mu    sync.RWMutex
	cache map[cacheKey]*cached
	gen   uint64 // bumped by Forget, so a lookup racing it is not cached

	usedMu   sync.Mutex
	used     map[string]time.Time // key id → latest use not yet written
	flushing map[string]time.Time // the batch TouchKeys is writing, until it returns

	admin adminState

	// tick, when set before Open, replaces the flush ticker (tests).
	tick   <-chan time.Time
	runMu  sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
	closed bool
}

var _ baton.Authenticator = (*Auth)(nil)

type cacheKey struct {
	role baton.KeyRole
	sum  [sha256.Size]byte
}

type cached struct {
	key     *baton.Key
	sum     [sha256.Size]byte // decoded from key.Hash as the store returned it
	expires time.Time
}

// New returns an Auth over opts.Keys.
func New(opts Options) *Auth {
	a := &Auth{
		keys:  opts.Keys,
		log:   opts.Logger,
		ttl:   opts.CacheTTL,
		every: opts.FlushInterval,
		now:   opts.Now,
		cache: map[cacheKey]*cached{},
		used:  map[string]time.Time{},
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	if a.ttl <= 0 {
		a.ttl = DefaultCacheTTL
	}
	if a.every <= 0 {
		a.every = DefaultFlushInterval
	}
	if a.now == nil {
		a.now = time.Now
	}
	a.admin.init()
	return a
}

// Open starts the goroutine that writes last-use times every
// FlushInterval. ctx is not retained beyond its values.
func (a *Auth) Open(ctx context.Context) error {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	if a.done != nil || a.closed {
		return errors.New("auth: already opened")
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	a.cancel = cancel
	a.done = make(chan struct{})
	tick := a.tick
	var ticker *time.Ticker
	if tick == nil {
		ticker = time.NewTicker(a.every)
		tick = ticker.C
	}
	go a.run(runCtx, tick, ticker)
	return nil
}

func (a *Auth) run(ctx context.Context, tick <-chan time.Time, ticker *time.Ticker) {
	defer close(a.done)
	if ticker != nil {
		defer ticker.Stop()
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick:
			if err := a.flush(ctx); err != nil && ctx.Err() == nil {
				a.log.Warn("auth: cannot record key last-use times; will retry", "err", err)
			}
			a.sweep()
		}
	}
}

// Close stops the flusher and writes the last-use times still pending. It
// is safe to call more than once and without Open.
func (a *Auth) Close() error {
	a.runMu.Lock()
	defer a.runMu.Unlock()
	if a.closed {
		return nil
	}
	a.closed = true
	if a.done != nil {
		a.cancel()
		<-a.done
	}
	ctx, cancel := context.WithTimeout(context.Background(), closeFlushTimeout)
	defer cancel()
	if err := a.flush(ctx); err != nil {
		return fmt.Errorf("auth: record key last-use times: %w", err)
	}
	return nil
}

// flush writes the pending last-use times in one TouchKeys call. On failure
// they are kept for the next flush.
func (a *Auth) flush(ctx context.Context) error {
	a.usedMu.Lock()
	batch := a.used
	if len(batch) == 0 {
		a.usedMu.Unlock()
		return nil
	}
	a.used = make(map[string]time.Time, len(batch))
	a.flushing = batch // PendingUses still sees it while it is written
	a.usedMu.Unlock()

	err := a.keys.TouchKeys(ctx, batch)
	a.usedMu.Lock()
	a.flushing = nil
	if err == nil {
		a.usedMu.Unlock()
		return nil
	}
	for id, t := range batch {
		if t.After(a.used[id]) {
			a.used[id] = t
		}
	}
	a.usedMu.Unlock()
	return err
}

// PendingUses returns the latest use of every key whose last-use time is
// not yet in the store (written at the next flush, or being written now).
// A reader that calls it before reading the keys from the store and keeps
// the later of the two times sees every use recorded so far.
func (a *Auth) PendingUses() map[string]time.Time {
	a.usedMu.Lock()
	defer a.usedMu.Unlock()
	out := make(map[string]time.Time, len(a.used)+len(a.flushing))
	for id, t := range a.flushing {
		out[id] = t
	}
	for id, t := range a.used {
		if t.After(out[id]) {
			out[id] = t
		}
	}
	return out
}

// sweep drops expired cache entries so revoked or idle keys do not pile up.
func (a *Auth) sweep() {
	now := a.now()
	a.mu.Lock()
	for k, e := range a.cache {
		if !now.Before(e.expires) {
			delete(a.cache, k)
		}
	}
	a.mu.Unlock()
}

// touch records a use of key id at t; the flusher writes it later.
func (a *Auth) touch(id string, t time.Time) {
	t = t.UTC().Truncate(time.Millisecond)
	a.usedMu.Lock()
	if t.After(a.used[id]) {
		a.used[id] = t
	}
	a.usedMu.Unlock()
}

// ClientKey returns the active client key whose plaintext is token.
func (a *Auth) ClientKey(ctx context.Context, token string) (*baton.Key, error) {
	if !wellFormed(token, baton.ClientKeyPrefix) {
		return nil, baton.Errorf(baton.ECodeUnauthorized, "invalid client key")
	}
	k, err := a.lookup(ctx, baton.RoleClient, token)
	if err != nil {
		return nil, err
	}
	if k == nil {
		return nil, baton.Errorf(baton.ECodeUnauthorized, "invalid client key")
	}
	return k, nil
}

// SessionKey returns the active session key whose plaintext is token and
// which is bound to sessionID.
func (a *Auth) SessionKey(ctx context.Context, sessionID, token string) (*baton.Key, error) {
	if !wellFormed(token, baton.SessionKeyPrefix) {
		return nil, baton.Errorf(baton.ECodeUnauthorized, "invalid session key")
	}
	k, err := a.lookup(ctx, baton.RoleSession, token)
	if err != nil {
		return nil, err
	}
	if k == nil || k.Name != sessionID {
		return nil, baton.Errorf(baton.ECodeUnauthorized, "invalid session key")
	}
	return k, nil
}

// lookup returns a copy of the active key of role for token, nil when
// there is none, or an error when the store fails.
func (a *Auth) lookup(ctx context.Context, role baton.KeyRole, token string) (*baton.Key, error) {
	ck := cacheKey{role: role, sum: sha256.Sum256([]byte(token))}
	now := a.now()

	a.mu.RLock()
	e, ok := a.cache[ck]
	gen := a.gen
	a.mu.RUnlock()
	if ok && now.Before(e.expires) && subtle.ConstantTimeCompare(e.sum[:], ck.sum[:]) == 1 {
		a.touch(e.key.ID, now)
		return copyKey(e.key), nil
	}

	k, err := a.keys.KeyByHash(ctx, role, baton.Digest(token))
	if baton.ErrorCode(err) == baton.ECodeNotFound {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up %s key: %w", role, err)
	}
	// Trust the store's row only if its digest really is the token's.
	stored, ok := parseDigest(k.Hash)
	if !ok || k.Role != role || subtle.ConstantTimeCompare(stored[:], ck.sum[:]) != 1 {
		a.log.Warn("auth: key store returned a row that does not match the token", "key_id", k.ID, "role", role)
		return nil, nil
	}
	k = copyKey(k)
	a.mu.Lock()
	if a.gen == gen {
		a.cache[ck] = &cached{key: k, sum: stored, expires: now.Add(a.ttl)}
	}
	a.mu.Unlock()
	a.touch(k.ID, now)
	return copyKey(k), nil
}

// Forget drops every cached verification of the given key ids, and of the
// session keys minted for them, so revoked keys stop working on this node
// at once.
func (a *Auth) Forget(keyIDs ...string) {
	if len(keyIDs) == 0 {
		return
	}
	a.mu.Lock()
	a.gen++
	for ck, e := range a.cache {
		// A revoked client key takes the session keys minted for it along.
		if slices.Contains(keyIDs, e.key.ID) || (e.key.ClientID != "" && slices.Contains(keyIDs, e.key.ClientID)) {
			delete(a.cache, ck)
		}
	}
	a.mu.Unlock()
	a.admin.forget(keyIDs)
}

// copyKey returns a shallow copy of k whose Scopes cannot be appended to in
// place.
func copyKey(k *baton.Key) *baton.Key {
	c := *k
	c.Scopes = slices.Clip(c.Scopes)
	return &c
}

// wellFormed reports whether token is prefix followed by 48 lowercase hex
// characters, the shape of every key Baton mints.
func wellFormed(token, prefix string) bool {
	if len(token) != len(prefix)+48 || !strings.HasPrefix(token, prefix) {
		return false
	}
	for i := len(prefix); i < len(token); i++ {
		if c := token[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// parseDigest decodes a stored "sha256:<hex>" digest.
func parseDigest(s string) (sum [sha256.Size]byte, ok bool) {
	h, found := strings.CutPrefix(s, baton.DigestPrefix)
	if !found || hex.DecodedLen(len(h)) != sha256.Size {
		return sum, false
	}
	if _, err := hex.Decode(sum[:], []byte(h)); err != nil {
		return sum, false
	}
	return sum, true
}
