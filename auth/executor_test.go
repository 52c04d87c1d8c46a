package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

// fakeExecutors is an in-memory baton.ExecutorStore holding what the
// token service reads. Methods the service never calls are left to the
// embedded nil interface (they panic).
type fakeExecutors struct {
	baton.ExecutorStore

	mu       sync.Mutex
	envs     map[string]bool
	machines map[string]bool
	creds    map[string]*baton.ExecutorCredential // by id
	settings map[string]string
	reads    int   // ExecutorCredential calls
	err      error // returned by every credential read when set
}

func newFakeExecutors() *fakeExecutors {
	return &fakeExecutors{envs: map[string]bool{}, machines: map[string]bool{},
		creds: map[string]*baton.ExecutorCredential{}, settings: map[string]string{}}
}

// mint adds a credential for (scope, owner), creating the owner.
func (f *fakeExecutors) mint(scope, owner string) (*baton.ExecutorCredential, string) {
	c, plain := baton.MintExecutorCredential(scope, owner)
	f.mu.Lock()
	defer f.mu.Unlock()
	if scope == baton.ExecutorScopeMachine {
		f.machines[owner] = true
	} else {
		f.envs[owner] = true
	}
	cc := *c
	f.creds[c.ID] = &cc
	return c, plain
}

func (f *fakeExecutors) revoke(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := baton.Now()
	f.creds[id].RevokedAt = &now
}

func (f *fakeExecutors) Environment(_ context.Context, id string) (*baton.Environment, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.envs[id] {
		return nil, baton.Errorf(baton.ECodeNotFound, "no environment %s", id)
	}
	return &baton.Environment{ID: id}, nil
}

func (f *fakeExecutors) Machine(_ context.Context, id string) (*baton.Machine, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.machines[id] {
		return nil, baton.Errorf(baton.ECodeNotFound, "no machine %s", id)
	}
	return &baton.Machine{ID: id}, nil
}

func (f *fakeExecutors) ExecutorCredential(_ context.Context, id string) (*baton.ExecutorCredential, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	if f.err != nil {
		return nil, f.err
	}
	c, ok := f.creds[id]
	if !ok {
		return nil, baton.Errorf(baton.ECodeNotFound, "no credential %s", id)
	}
	cc := *c
	return &cc, nil
}

func (f *fakeExecutors) ExecutorCredentialByHash(_ context.Context, hash string) (*baton.ExecutorCredential, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.err != nil {
		return nil, f.err
	}
	for _, c := range f.creds {
		if c.Hash == hash {
			cc := *c
			return &cc, nil
		}
	}
	return nil, baton.Errorf(baton.ECodeNotFound, "no credential with that hash")
}

func (f *fakeExecutors) EnsureSetting(_ context.Context, name, value string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v, ok := f.settings[name]; ok {
		return v, nil
	}
	f.settings[name] = value
	return value, nil
}

func (f *fakeExecutors) readCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads
}

// epoch is newClock's start.
var epoch = newClock().Now()

func newTokens(t testing.TB, store baton.ExecutorStore, clk *clock, ttl time.Duration) *ExecutorTokens {
	t.Helper()
	x, err := OpenExecutorTokens(context.Background(), ExecutorOptions{Store: store, Now: clk.Now, TTL: ttl})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// wantErr fails unless err is a *baton.Error with code and message.
func wantErr(t *testing.T, err error, code, msg string) {
	t.Helper()
	var e *baton.Error
	if !errors.As(err, &e) || e.Code != code || e.Message != msg {
		t.Fatalf("err = %v, want %s %q", err, code, msg)
	}
}

func TestExecutorTokenRoundTrip(t *testing.T) {
	ctx := context.Background()
	f := newFakeExecutors()
	clk := newClock()
	x := newTokens(t, f, clk, 0)
	if x.TTL() != time.Hour {
		t.Errorf("default TTL = %v, want 1h", x.TTL())
	}
	env, envSecret := f.mint(baton.ExecutorScopeEnvironment, "env_a")
	mch, mchSecret := f.mint(baton.ExecutorScopeMachine, "mch_b")
	cases := []struct {
		name, secret, scope, owner string
		want                       baton.ExecutorGrant
	}{
		{"environment", envSecret, baton.ExecutorScopeEnvironment, "env_a", baton.ExecutorGrant{
			Scope: baton.ExecutorScopeEnvironment, EnvironmentID: "env_a", CredentialID: env.ID, ExpiresAt: epoch.Add(time.Hour)}},
		{"machine", mchSecret, baton.ExecutorScopeMachine, "mch_b", baton.ExecutorGrant{
			Scope: baton.ExecutorScopeMachine, MachineID: "mch_b", CredentialID: mch.ID, ExpiresAt: epoch.Add(time.Hour)}},
		{"legacy", envSecret, baton.ExecutorScopeEnvironment, "", baton.ExecutorGrant{
			Scope: baton.ExecutorScopeEnvironment, EnvironmentID: "env_a", CredentialID: env.ID, ExpiresAt: epoch.Add(time.Hour)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			token, grant, err := x.Issue(ctx, c.secret, c.scope, c.owner)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(token, baton.ExecutorTokenPrefix) || strings.Contains(token, c.secret) {
				t.Errorf("token %q", token)
			}
			if diff := cmp.Diff(&c.want, grant); diff != "" {
				t.Errorf("issued grant (-want +got):\n%s", diff)
			}
			got, err := x.Verify(ctx, token)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(&c.want, got); diff != "" {
				t.Errorf("verified grant (-want +got):\n%s", diff)
			}
			if !got.SameExecutor(grant) {
				t.Error("verified grant is not the same executor as the issued one")
			}
		})
	}
}

func TestExecutorTokenExpiry(t *testing.T) {
	ctx := context.Background()
	f := newFakeExecutors()
	clk := newClock()
	x := newTokens(t, f, clk, 10*time.Minute)
	_, secret := f.mint(baton.ExecutorScopeEnvironment, "env_a")
	token, grant, err := x.Issue(ctx, secret, baton.ExecutorScopeEnvironment, "env_a")
	if err != nil {
		t.Fatal(err)
	}
	if !grant.ExpiresAt.Equal(epoch.Add(10 * time.Minute)) {
		t.Errorf("ExpiresAt = %v, want issue time + TTL", grant.ExpiresAt)
	}
	clk.Add(10*time.Minute - time.Millisecond)
	if _, err := x.Verify(ctx, token); err != nil {
		t.Fatalf("a millisecond before expiry: %v", err)
	}
	clk.Add(time.Millisecond)
	_, err = x.Verify(ctx, token)
	wantErr(t, err, baton.ECodeUnauthorized, "executor token expired")
	// A fresh exchange works again and the new token outlives the old.
	token2, grant2, err := x.Issue(ctx, secret, baton.ExecutorScopeEnvironment, "env_a")
	if err != nil || token2 == token || !grant2.ExpiresAt.After(grant.ExpiresAt) {
		t.Fatalf("re-issue: %v %v", grant2, err)
	}
	if _, err := x.Verify(ctx, token2); err != nil {
		t.Fatal(err)
	}
}

func TestExecutorTokenTamper(t *testing.T) {
	ctx := context.Background()
	f := newFakeExecutors()
	clk := newClock()
	x := newTokens(t, f, clk, 0)
	_, secret := f.mint(baton.ExecutorScopeEnvironment, "env_a")
	f.mint(baton.ExecutorScopeEnvironment, "env_other")
	token, _, err := x.Issue(ctx, secret, baton.ExecutorScopeEnvironment, "env_a")
	if err != nil {
		t.Fatal(err)
	}
	head, m64, _ := strings.Cut(token, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(head, baton.ExecutorTokenPrefix))
	reencode := func(p string) string {
		return baton.ExecutorTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(p)) + "." + m64
	}

	// Another installation signs with another key.
	other := newTokens(t, newFakeExecutors(), clk, 0)
	foreign, err := other.sign(&claims{V: 1, Scope: baton.ExecutorScopeEnvironment, Owner: "env_a",
		Credential: "ecr_x", Expires: epoch.Add(time.Hour).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	bad := map[string]string{
		"empty":             "",
		"prefix only":       baton.ExecutorTokenPrefix,
		"credential":        secret,
		"no dot":            head,
		"wrong prefix":      "bae_exx_" + strings.TrimPrefix(token, baton.ExecutorTokenPrefix),
		"no payload":        baton.ExecutorTokenPrefix + "." + m64,
		"truncated mac":     token[:len(token)-2],
		"extra mac byte":    token + "A",
		"second dot":        token + ".x",
		"padded":            head + "." + m64 + "=",
		"owner swapped":     reencode(strings.Replace(string(payload), "env_a", "env_other", 1)),
		"expiry extended":   reencode(strings.Replace(string(payload), `"x":`, `"x":9`, 1)),
		"another key":       foreign,
		"too long":          token + strings.Repeat("A", maxExecutorToken),
		"whitespace":        " " + token,
		"upper-case":        strings.ToUpper(token),
		"non-canonical b64": baton.ExecutorTokenPrefix + strings.TrimPrefix(head, baton.ExecutorTokenPrefix) + "." + m64[:len(m64)-1] + nextB64(m64[len(m64)-1]),
	}
	// Every single-character change of the token fails too.
	for i := range token {
		b := []byte(token)
		b[i] ^= 0x01
		bad[fmt.Sprintf("flip %d", i)] = string(b)
	}
	for name, tok := range bad {
		t.Run(name, func(t *testing.T) {
			_, err := x.Verify(ctx, tok)
			wantErr(t, err, baton.ECodeUnauthorized, "invalid executor token")
		})
	}
	if _, err := x.Verify(ctx, token); err != nil {
		t.Fatalf("the untouched token: %v", err)
	}
}

// nextB64 returns another base64url character whose value differs from c
// only in the low bits a 32-byte MAC's last character does not use.
func nextB64(c byte) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	i := strings.IndexByte(alphabet, c)
	return string(alphabet[i^1])
}

func TestExecutorTokenRevoked(t *testing.T) {
	ctx := context.Background()
	f := newFakeExecutors()
	clk := newClock()
	x := newTokens(t, f, clk, 0)
	c, secret := f.mint(baton.ExecutorScopeMachine, "mch_a")
	token, _, err := x.Issue(ctx, secret, baton.ExecutorScopeMachine, "mch_a")
	if err != nil {
		t.Fatal(err)
	}
	// Issue checked the credential, so Verify trusts it for CacheTTL.
	if _, err := x.Verify(ctx, token); err != nil {
		t.Fatal(err)
	}
	if n := f.readCount(); n != 0 {
		t.Errorf("verify within the cache TTL read the store %d times", n)
	}

	// Revoked elsewhere (another node): noticed once the cache entry ages out.
	f.revoke(c.ID)
	if _, err := x.Verify(ctx, token); err != nil {
		t.Fatalf("within the cache TTL: %v", err)
	}
	clk.Add(DefaultExecutorCacheTTL)
	_, err = x.Verify(ctx, token)
	wantErr(t, err, baton.ECodeUnauthorized, "executor credential revoked")
	reads := f.readCount()
	_, err = x.Verify(ctx, token)
	wantErr(t, err, baton.ECodeUnauthorized, "executor credential revoked")
	if f.readCount() != reads {
		t.Error("a known revoked credential was looked up again")
	}
	_, _, err = x.Issue(ctx, secret, baton.ExecutorScopeMachine, "mch_a")
	wantErr(t, err, baton.ECodeUnauthorized, "executor credential revoked")

	// Revoked on this node: RevokeCredential takes effect at once, whatever
	// the cache says.
	c2, secret2 := f.mint(baton.ExecutorScopeMachine, "mch_a")
	token2, _, err := x.Issue(ctx, secret2, baton.ExecutorScopeMachine, "mch_a")
	if err != nil {
		t.Fatal(err)
	}
	f.revoke(c2.ID)
	x.RevokeCredential(c2.ID)
	_, err = x.Verify(ctx, token2)
	wantErr(t, err, baton.ECodeUnauthorized, "executor credential revoked")

	// A token whose credential no longer exists at all fails the same way.
	ghost, err := x.sign(&claims{V: 1, Scope: baton.ExecutorScopeMachine, Owner: "mch_a", Credential: "ecr_ghost",
		Expires: epoch.Add(time.Hour).UnixMilli()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = x.Verify(ctx, ghost)
	wantErr(t, err, baton.ECodeUnauthorized, "executor credential revoked")
}

func TestExecutorTokenNoCache(t *testing.T) {
	ctx := context.Background()
	f := newFakeExecutors()
	x, err := OpenExecutorTokens(ctx, ExecutorOptions{Store: f, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	c, secret := f.mint(baton.ExecutorScopeEnvironment, "env_a")
	token, _, err := x.Issue(ctx, secret, baton.ExecutorScopeEnvironment, "env_a")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Verify(ctx, token); err != nil || f.readCount() != 1 {
		t.Fatalf("verify: %v after %d reads, want 1", err, f.readCount())
	}
	f.revoke(c.ID)
	_, err = x.Verify(ctx, token)
	wantErr(t, err, baton.ECodeUnauthorized, "executor credential revoked")
}

func TestExecutorTokenIssueErrors(t *testing.T) {
	ctx := context.Background()
	f := newFakeExecutors()
	clk := newClock()
	x := newTokens(t, f, clk, 0)
	_, envSecret := f.mint(baton.ExecutorScopeEnvironment, "env_a")
	f.mint(baton.ExecutorScopeEnvironment, "env_b")
	_, mchSecret := f.mint(baton.ExecutorScopeMachine, "mch_a")
	const env, mch = baton.ExecutorScopeEnvironment, baton.ExecutorScopeMachine
	unknown := baton.ExecutorCredentialPrefix + strings.Repeat("a", 48)
	cases := []struct {
		name, secret, scope, owner, code, msg string
	}{
		{"empty", "", env, "env_a", baton.ECodeUnauthorized, "invalid executor credential"},
		{"client key", "bae_" + strings.Repeat("a", 48), env, "env_a", baton.ECodeUnauthorized, "invalid executor credential"},
		{"short", envSecret[:len(envSecret)-1], env, "env_a", baton.ECodeUnauthorized, "invalid executor credential"},
		{"upper-case hex", strings.ToUpper(envSecret[:8]) + envSecret[8:], env, "env_a", baton.ECodeUnauthorized, "invalid executor credential"},
		{"unknown", unknown, env, "env_a", baton.ECodeUnauthorized, "invalid executor credential"},
		{"unknown, unknown owner", unknown, env, "env_nope", baton.ECodeUnauthorized, "invalid executor credential"},
		{"another environment", envSecret, env, "env_b", baton.ECodeUnauthorized, "the executor credential does not belong to environment env_b"},
		{"unknown environment", envSecret, env, "env_nope", baton.ECodeNotFound, "no environment env_nope"},
		{"environment credential for a machine", envSecret, mch, "mch_a", baton.ECodeUnauthorized, "the executor credential does not belong to machine mch_a"},
		{"unknown machine", envSecret, mch, "mch_nope", baton.ECodeNotFound, "no machine mch_nope"},
		{"machine credential for an environment", mchSecret, env, "env_a", baton.ECodeUnauthorized, "the executor credential does not belong to environment env_a"},
		{"machine id as environment", mchSecret, env, "mch_a", baton.ECodeNotFound, "no environment mch_a"},
		{"legacy with a machine credential", mchSecret, env, "", baton.ECodeUnauthorized,
			"this endpoint accepts environment credentials only; use POST /v1/machines/{machine_id}/token"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			token, grant, err := x.Issue(ctx, c.secret, c.scope, c.owner)
			if token != "" || grant != nil {
				t.Errorf("failed Issue returned %q %+v", token, grant)
			}
			wantErr(t, err, c.code, c.msg)
		})
	}
	if _, _, err := x.Issue(ctx, envSecret, "galaxy", "env_a"); err == nil || baton.ErrorCode(err) != baton.ECodeInternal {
		t.Errorf("unknown scope: %v, want an internal error", err)
	}

	// A failing store is an internal error, never "unauthorized".
	f.err = errors.New("disk on fire")
	if _, _, err := x.Issue(ctx, envSecret, env, "env_a"); baton.ErrorCode(err) != baton.ECodeInternal {
		t.Errorf("Issue with a failing store: %v", err)
	}
	f.err = nil
	token, _, err := x.Issue(ctx, envSecret, env, "env_a")
	if err != nil {
		t.Fatal(err)
	}
	clk.Add(DefaultExecutorCacheTTL)
	f.err = errors.New("disk on fire")
	if _, err := x.Verify(ctx, token); baton.ErrorCode(err) != baton.ECodeInternal {
		t.Errorf("Verify with a failing store: %v", err)
	}
}

// The signing key lives in the store: a second service on the same store
// (another node, or this one after a restart) verifies the first one's
// tokens; one on another store does not.
func TestExecutorTokenSharedKey(t *testing.T) {
	ctx := context.Background()
	f := newFakeExecutors()
	clk := newClock()
	a := newTokens(t, f, clk, 0)
	b := newTokens(t, f, clk, 0)
	_, secret := f.mint(baton.ExecutorScopeEnvironment, "env_a")
	token, want, err := a.Issue(ctx, secret, baton.ExecutorScopeEnvironment, "env_a")
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Verify(ctx, token)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("grant on the other node (-want +got):\n%s", diff)
	}
	if len(f.settings[SigningKeySetting]) != 64 {
		t.Errorf("stored key %q, want 64 hex digits", f.settings[SigningKeySetting])
	}

	f.settings[SigningKeySetting] = "not hex"
	if _, err := OpenExecutorTokens(ctx, ExecutorOptions{Store: f}); err == nil {
		t.Error("a corrupt stored key was accepted")
	}
}

func TestExecutorTokenConcurrent(t *testing.T) {
	ctx := context.Background()
	f := newFakeExecutors()
	x, err := OpenExecutorTokens(ctx, ExecutorOptions{Store: f, CacheTTL: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	c, secret := f.mint(baton.ExecutorScopeEnvironment, "env_a")
	token, _, err := x.Issue(ctx, secret, baton.ExecutorScopeEnvironment, "env_a")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 200 {
				_, _ = x.Verify(ctx, token)
			}
		})
	}
	wg.Go(func() {
		f.revoke(c.ID)
		x.RevokeCredential(c.ID)
	})
	wg.Wait()
	_, err = x.Verify(ctx, token)
	wantErr(t, err, baton.ECodeUnauthorized, "executor credential revoked")
}

// FuzzExecutorToken feeds Verify arbitrary strings: it must never panic,
// must fail with ECodeUnauthorized, and can only accept a token this
// service signed. Whatever splitToken accepts is canonical: reassembling
// its parts gives the input back.
func FuzzExecutorToken(f *testing.F) {
	ctx := context.Background()
	store := newFakeExecutors()
	clk := newClock()
	x := newTokens(f, store, clk, 0)
	_, secret := store.mint(baton.ExecutorScopeEnvironment, "env_a")
	token, _, err := x.Issue(ctx, secret, baton.ExecutorScopeEnvironment, "env_a")
	if err != nil {
		f.Fatal(err)
	}
	head, m64, _ := strings.Cut(token, ".")
	for _, seed := range []string{
		token, head, head + ".", "." + m64, token + "=", token[:len(token)-1], baton.ExecutorTokenPrefix,
		baton.ExecutorTokenPrefix + "e30." + m64, // {}
		baton.ExecutorTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(`{"v":1,"s":"machine","o":"m","c":"c","x":1e20}`)) + "." + m64,
		secret, "bae_ext_..", "bae_ext_\x00.\xff",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if h, payload, mac, ok := splitToken(s); ok {
			re := h + "." + base64.RawURLEncoding.EncodeToString(mac)
			if re != s || !strings.HasSuffix(h, base64.RawURLEncoding.EncodeToString(payload)) {
				t.Fatalf("splitToken(%q) is not canonical: %q", s, re)
			}
		}
		g, err := x.Verify(ctx, s)
		if err == nil {
			if s != token || g.EnvironmentID != "env_a" {
				t.Fatalf("Verify accepted %q as %+v", s, g)
			}
			return
		}
		if baton.ErrorCode(err) != baton.ECodeUnauthorized {
			t.Fatalf("Verify(%q) = %v, want unauthorized", s, err)
		}
	})
}

func BenchmarkExecutorTokenVerify(b *testing.B) {
	ctx := context.Background()
	f := newFakeExecutors()
	x, err := OpenExecutorTokens(ctx, ExecutorOptions{Store: f})
	if err != nil {
		b.Fatal(err)
	}
	_, secret := f.mint(baton.ExecutorScopeMachine, "mch_a")
	token, _, err := x.Issue(ctx, secret, baton.ExecutorScopeMachine, "mch_a")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := x.Verify(ctx, token); err != nil {
			b.Fatal(err)
		}
	}
}
