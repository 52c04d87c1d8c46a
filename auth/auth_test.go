package auth

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

// setup returns an Auth over a fake store holding one client key and one
// session key minted for it, bound to session "ses_1".
type fixture struct {
	keys                 *fakeKeys
	clock                *clock
	auth                 *Auth
	client, session      *baton.Key
	clientTok, sessToken string
}

func setup(t *testing.T) *fixture {
	t.Helper()
	fx := &fixture{keys: newFakeKeys(), clock: newClock()}
	fx.client, fx.clientTok = baton.MintKey(baton.RoleClient, "app", "pro_1", "")
	fx.session, fx.sessToken = baton.MintKey(baton.RoleSession, "ses_1", "pro_1", fx.client.ID)
	fx.keys.add(fx.client)
	fx.keys.add(fx.session)
	fx.auth = New(Options{Keys: fx.keys, Now: fx.clock.Now, CacheTTL: 5 * time.Second})
	return fx
}

func wantCode(t *testing.T, err error, code, msg string) {
	t.Helper()
	if baton.ErrorCode(err) != code || (msg != "" && baton.ErrorMessage(err) != msg) {
		t.Fatalf("error = %v, want %s %q", err, code, msg)
	}
}

func TestClientKey(t *testing.T) {
	fx := setup(t)
	ctx := context.Background()
	k, err := fx.auth.ClientKey(ctx, fx.clientTok)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(fx.client, k); diff != "" {
		t.Fatalf("ClientKey mismatch (-want +got):\n%s", diff)
	}

	for _, tok := range []string{
		"",
		"bae_",
		fx.clientTok[:len(fx.clientTok)-1], // too short
		fx.clientTok + "0",                 // too long
		fx.clientTok[:10] + "X" + fx.clientTok[11:], // not lowercase hex
		baton.NewSecret(baton.ClientKeyPrefix),      // well formed, unknown
		fx.sessToken,                                // a session key
		baton.NewSecret(baton.AdminKeyPrefix),       // an admin key
	} {
		_, err := fx.auth.ClientKey(ctx, tok)
		wantCode(t, err, baton.ECodeUnauthorized, "invalid client key")
	}
}

func TestClientKeyRoleIsPartOfTheLookup(t *testing.T) {
	fx := setup(t)
	ctx := context.Background()
	// A session-role row whose plaintext has the client shape must not
	// authenticate as a client key, and vice versa.
	sessionShaped, tok := baton.MintKey(baton.RoleClient, "x", "pro_1", "")
	sessionShaped.Role = baton.RoleSession
	sessionShaped.Name = "ses_1"
	fx.keys.add(sessionShaped)
	_, err := fx.auth.ClientKey(ctx, tok)
	wantCode(t, err, baton.ECodeUnauthorized, "invalid client key")

	clientShaped, stok := baton.MintKey(baton.RoleSession, "ses_1", "pro_1", "")
	clientShaped.Role = baton.RoleClient
	fx.keys.add(clientShaped)
	_, err = fx.auth.SessionKey(ctx, "ses_1", stok)
	wantCode(t, err, baton.ECodeUnauthorized, "invalid session key")

	// Caching under one role does not leak into the other.
	if _, err := fx.auth.ClientKey(ctx, fx.clientTok); err != nil {
		t.Fatal(err)
	}
	_, err = fx.auth.SessionKey(ctx, "ses_1", fx.clientTok)
	wantCode(t, err, baton.ECodeUnauthorized, "invalid session key")
}

func TestSessionKey(t *testing.T) {
	fx := setup(t)
	ctx := context.Background()
	k, err := fx.auth.SessionKey(ctx, "ses_1", fx.sessToken)
	if err != nil {
		t.Fatal(err)
	}
	if k.ID != fx.session.ID || k.ClientID != fx.client.ID || k.Role != baton.RoleSession {
		t.Fatalf("SessionKey = %+v", k)
	}
	// Another session's id: the key is valid but not for this session,
	// both on a cache miss and on a hit.
	for range 2 {
		_, err = fx.auth.SessionKey(ctx, "ses_2", fx.sessToken)
		wantCode(t, err, baton.ECodeUnauthorized, "invalid session key")
	}
	_, err = fx.auth.SessionKey(ctx, "ses_1", fx.clientTok)
	wantCode(t, err, baton.ECodeUnauthorized, "invalid session key")
	_, err = fx.auth.SessionKey(ctx, "ses_1", baton.NewSecret(baton.SessionKeyPrefix))
	wantCode(t, err, baton.ECodeUnauthorized, "invalid session key")
}

func TestStoreFailureIsInternal(t *testing.T) {
	fx := setup(t)
	boom := errors.New("disk on fire")
	fx.keys.setErr(&fx.keys.errByHash, boom)
	_, err := fx.auth.ClientKey(context.Background(), fx.clientTok)
	if !errors.Is(err, boom) || baton.ErrorCode(err) != baton.ECodeInternal {
		t.Fatalf("ClientKey error = %v, want internal wrapping the store error", err)
	}
	_, err = fx.auth.SessionKey(context.Background(), "ses_1", fx.sessToken)
	if !errors.Is(err, boom) || baton.ErrorCode(err) != baton.ECodeInternal {
		t.Fatalf("SessionKey error = %v, want internal wrapping the store error", err)
	}
}

func TestStoreRowWithWrongDigestIsRejected(t *testing.T) {
	// A store that hands back a row whose hash is not the token's digest
	// (a bug, or a tampered row) must not authenticate.
	fx := setup(t)
	evil := &lyingStore{fakeKeys: fx.keys, row: fx.client}
	a := New(Options{Keys: evil, Now: fx.clock.Now})
	_, err := a.ClientKey(context.Background(), baton.NewSecret(baton.ClientKeyPrefix))
	wantCode(t, err, baton.ECodeUnauthorized, "invalid client key")
}

type lyingStore struct {
	*fakeKeys
	row *baton.Key
}

func (l *lyingStore) KeyByHash(context.Context, baton.KeyRole, string) (*baton.Key, error) {
	c := *l.row
	return &c, nil
}

func TestCacheHitAndExpiry(t *testing.T) {
	fx := setup(t)
	ctx := context.Background()
	for range 3 {
		if _, err := fx.auth.ClientKey(ctx, fx.clientTok); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := fx.keys.calls(); n != 1 {
		t.Fatalf("store lookups after 3 checks = %d, want 1 (cached)", n)
	}
	// Revocation elsewhere is noticed once the entry expires.
	fx.keys.revoke(fx.client.ID)
	fx.clock.Add(4 * time.Second)
	if _, err := fx.auth.ClientKey(ctx, fx.clientTok); err != nil {
		t.Fatalf("within the TTL the cached key still works: %v", err)
	}
	fx.clock.Add(time.Second)
	_, err := fx.auth.ClientKey(ctx, fx.clientTok)
	wantCode(t, err, baton.ECodeUnauthorized, "invalid client key")
	if n, _ := fx.keys.calls(); n != 2 {
		t.Fatalf("store lookups = %d, want 2 (expired entry re-read)", n)
	}
}

func TestCachedKeyIsACopy(t *testing.T) {
	fx := setup(t)
	ctx := context.Background()
	k, err := fx.auth.ClientKey(ctx, fx.clientTok)
	if err != nil {
		t.Fatal(err)
	}
	k.Name = "mutated"
	k.Scopes = append(k.Scopes, "extra")
	k2, err := fx.auth.ClientKey(ctx, fx.clientTok)
	if err != nil {
		t.Fatal(err)
	}
	if k2.Name != "app" || len(k2.Scopes) != 0 {
		t.Fatalf("cached key was changed through a returned copy: %+v", k2)
	}
}

func TestForget(t *testing.T) {
	fx := setup(t)
	ctx := context.Background()
	if _, err := fx.auth.ClientKey(ctx, fx.clientTok); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.auth.SessionKey(ctx, "ses_1", fx.sessToken); err != nil {
		t.Fatal(err)
	}
	fx.keys.revoke(fx.client.ID)
	fx.keys.revoke(fx.session.ID)
	fx.auth.Forget(fx.client.ID, fx.session.ID)
	_, err := fx.auth.ClientKey(ctx, fx.clientTok)
	wantCode(t, err, baton.ECodeUnauthorized, "invalid client key")
	_, err = fx.auth.SessionKey(ctx, "ses_1", fx.sessToken)
	wantCode(t, err, baton.ECodeUnauthorized, "invalid session key")
}

func TestForgetKeepsOtherKeys(t *testing.T) {
	fx := setup(t)
	ctx := context.Background()
	other, otherTok := baton.MintKey(baton.RoleClient, "other", "pro_1", "")
	fx.keys.add(other)
	for _, tok := range []string{fx.clientTok, otherTok} {
		if _, err := fx.auth.ClientKey(ctx, tok); err != nil {
			t.Fatal(err)
		}
	}
	fx.auth.Forget(fx.client.ID)
	if _, err := fx.auth.ClientKey(ctx, otherTok); err != nil {
		t.Fatal(err)
	}
	if n, _ := fx.keys.calls(); n != 2 {
		t.Fatalf("store lookups = %d, want 2: the other key stays cached", n)
	}
}

func TestForgetRacingALookupIsNotCached(t *testing.T) {
	// A lookup that read the row before a revocation must not cache it
	// after Forget ran.
	fx := setup(t)
	ctx := context.Background()
	fx.keys.onByHash = func() {
		fx.keys.revoke(fx.client.ID)
		fx.auth.Forget(fx.client.ID)
	}
	if _, err := fx.auth.ClientKey(ctx, fx.clientTok); err != nil {
		t.Fatalf("the racing request itself may pass: %v", err)
	}
	fx.keys.onByHash = nil
	_, err := fx.auth.ClientKey(ctx, fx.clientTok)
	wantCode(t, err, baton.ECodeUnauthorized, "invalid client key")
}

func TestSweepDropsExpiredEntries(t *testing.T) {
	fx := setup(t)
	if _, err := fx.auth.ClientKey(context.Background(), fx.clientTok); err != nil {
		t.Fatal(err)
	}
	fx.auth.sweep()
	if len(fx.auth.cache) != 1 {
		t.Fatalf("live entry swept")
	}
	fx.clock.Add(5 * time.Second)
	fx.auth.sweep()
	if len(fx.auth.cache) != 0 {
		t.Fatalf("expired entry kept")
	}
}

// openWithTicker opens fx.auth with a hand-driven flush ticker.
func openWithTicker(t *testing.T, fx *fixture) chan time.Time {
	t.Helper()
	tick := make(chan time.Time)
	fx.keys.touchCh = make(chan map[string]time.Time, 8) // room for Close's flush, even after a failure
	fx.auth.tick = tick
	if err := fx.auth.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fx.auth.Close() })
	return tick
}

func TestLastUsedFlushOnInterval(t *testing.T) {
	fx := setup(t)
	ctx := context.Background()
	tick := openWithTicker(t, fx)

	// A flush with nothing pending writes nothing. (Called directly: a
	// tick's flush could still be running when the uses below are
	// recorded, and take them.)
	if err := fx.auth.flush(ctx); err != nil || len(fx.keys.touched()) != 0 {
		t.Fatalf("an empty flush wrote %d batch(es), err %v", len(fx.keys.touched()), err)
	}

	t1 := fx.clock.Now()
	for range 3 {
		if _, err := fx.auth.ClientKey(ctx, fx.clientTok); err != nil {
			t.Fatal(err)
		}
	}
	fx.clock.Add(1500 * time.Microsecond)
	t2 := fx.clock.Now().Truncate(time.Millisecond)
	if _, err := fx.auth.SessionKey(ctx, "ses_1", fx.sessToken); err != nil {
		t.Fatal(err)
	}
	if n := len(fx.keys.touched()); n != 0 {
		t.Fatalf("%d writes before the flush; uses must not write on the request path", n)
	}
	tick <- time.Time{}
	got := <-fx.keys.touchCh
	want := map[string]time.Time{fx.client.ID: t1, fx.session.ID: t2}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("flushed last-use times (-want +got):\n%s", diff)
	}

	// The next use is written by the next flush, with its own time.
	fx.clock.Add(time.Minute)
	if _, err := fx.auth.ClientKey(ctx, fx.clientTok); err != nil {
		t.Fatal(err)
	}
	tick <- time.Time{}
	got = <-fx.keys.touchCh
	if diff := cmp.Diff(map[string]time.Time{fx.client.ID: fx.clock.Now().Truncate(time.Millisecond)}, got); diff != "" {
		t.Fatalf("second flush (-want +got):\n%s", diff)
	}
}

func TestLastUsedFlushRetriesAfterFailure(t *testing.T) {
	fx := setup(t)
	tick := openWithTicker(t, fx)
	if _, err := fx.auth.ClientKey(context.Background(), fx.clientTok); err != nil {
		t.Fatal(err)
	}
	fx.keys.setErr(&fx.keys.errTouch, errors.New("busy"))
	tick <- time.Time{}
	first := <-fx.keys.touchCh
	fx.keys.setErr(&fx.keys.errTouch, nil)
	tick <- time.Time{}
	second := <-fx.keys.touchCh
	if diff := cmp.Diff(first, second); diff != "" || len(second) != 1 {
		t.Fatalf("failed batch not retried (-first +second):\n%s", diff)
	}
}

// TestPendingUses: a use is visible through PendingUses from the moment it
// is recorded until the store has it, including while the flush is being
// written, and again after a failed flush.
func TestPendingUses(t *testing.T) {
	fx := setup(t)
	ctx := context.Background()
	if got := fx.auth.PendingUses(); len(got) != 0 {
		t.Fatalf("PendingUses before any use = %v", got)
	}
	if _, err := fx.auth.ClientKey(ctx, fx.clientTok); err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Time{fx.client.ID: fx.clock.Now()}
	if diff := cmp.Diff(want, fx.auth.PendingUses()); diff != "" {
		t.Fatalf("PendingUses after a use (-want +got):\n%s", diff)
	}

	// While TouchKeys runs, the batch is still pending; a use recorded
	// meanwhile wins over the batch's older time.
	var writing, during map[string]time.Time
	fx.keys.onTouch = func() {
		writing = fx.auth.PendingUses()
		fx.clock.Add(time.Second)
		if _, err := fx.auth.ClientKey(ctx, fx.clientTok); err != nil {
			t.Error(err)
		}
		during = fx.auth.PendingUses()
	}
	if err := fx.auth.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, writing); diff != "" {
		t.Fatalf("PendingUses while the batch is written (-want +got):\n%s", diff)
	}
	later := map[string]time.Time{fx.client.ID: fx.clock.Now()}
	if diff := cmp.Diff(later, during); diff != "" {
		t.Fatalf("PendingUses during the flush (-want +got):\n%s", diff)
	}
	fx.keys.onTouch = nil
	if diff := cmp.Diff(later, fx.auth.PendingUses()); diff != "" {
		t.Fatalf("PendingUses after the flush keeps only the newer use (-want +got):\n%s", diff)
	}
	if err := fx.auth.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := fx.auth.PendingUses(); len(got) != 0 {
		t.Fatalf("PendingUses after everything was written = %v", got)
	}

	// A failed flush keeps its batch pending.
	if _, err := fx.auth.SessionKey(ctx, "ses_1", fx.sessToken); err != nil {
		t.Fatal(err)
	}
	fx.keys.errTouch = errors.New("busy")
	if err := fx.auth.flush(ctx); err == nil {
		t.Fatal("flush succeeded with a failing store")
	}
	if diff := cmp.Diff(map[string]time.Time{fx.session.ID: fx.clock.Now()}, fx.auth.PendingUses()); diff != "" {
		t.Fatalf("PendingUses after a failed flush (-want +got):\n%s", diff)
	}
}

func TestCloseFlushesPending(t *testing.T) {
	fx := setup(t)
	fx.auth.tick = make(chan time.Time) // never fires: only Close writes
	if err := fx.auth.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := fx.auth.SessionKey(context.Background(), "ses_1", fx.sessToken); err != nil {
		t.Fatal(err)
	}
	if err := fx.auth.Close(); err != nil {
		t.Fatal(err)
	}
	want := []map[string]time.Time{{fx.session.ID: fx.clock.Now()}}
	if diff := cmp.Diff(want, fx.keys.touched()); diff != "" {
		t.Fatalf("Close flush (-want +got):\n%s", diff)
	}
	if err := fx.auth.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if len(fx.keys.touched()) != 1 {
		t.Fatalf("second Close wrote again")
	}
	if err := fx.auth.Open(context.Background()); err == nil {
		t.Fatal("Open after Close succeeded")
	}
}

func TestCloseReportsFlushFailure(t *testing.T) {
	fx := setup(t)
	if _, err := fx.auth.ClientKey(context.Background(), fx.clientTok); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("read-only")
	fx.keys.errTouch = boom
	if err := fx.auth.Close(); !errors.Is(err, boom) {
		t.Fatalf("Close = %v, want the TouchKeys error", err)
	}
}

func TestOpenWithRealTickerStopsOnClose(t *testing.T) {
	// goleak in TestMain proves the flusher goroutine ends.
	fx := setup(t)
	fx.auth.every = time.Hour
	if err := fx.auth.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := fx.auth.Open(context.Background()); err == nil {
		t.Fatal("second Open succeeded")
	}
	if err := fx.auth.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestDefaults(t *testing.T) {
	a := New(Options{Keys: newFakeKeys()})
	if a.ttl != DefaultCacheTTL || a.every != DefaultFlushInterval || a.now == nil || a.log == nil {
		t.Fatalf("defaults not applied: ttl=%v every=%v", a.ttl, a.every)
	}
}

func BenchmarkClientKeyCached(b *testing.B) {
	keys := newFakeKeys()
	k, tok := baton.MintKey(baton.RoleClient, "bench", "pro_1", "")
	keys.add(k)
	a := New(Options{Keys: keys, CacheTTL: time.Hour})
	ctx := context.Background()
	if _, err := a.ClientKey(ctx, tok); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		if _, err := a.ClientKey(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkClientKeyCachedParallel(b *testing.B) {
	keys := newFakeKeys()
	k, tok := baton.MintKey(baton.RoleClient, "bench", "pro_1", "")
	keys.add(k)
	a := New(Options{Keys: keys, CacheTTL: time.Hour})
	ctx := context.Background()
	if _, err := a.ClientKey(ctx, tok); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, err := a.ClientKey(ctx, tok); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
