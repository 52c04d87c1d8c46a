package auth

import (
	"context"
	"encoding/base64"
	"errors"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"golang.org/x/crypto/argon2"
)

// cheapHash hashes with tiny Argon2id parameters; PHC strings carry their
// parameters, so verification handles them like production ones.
func cheapHash(plain string) (string, error) { return hashPHC(plain, 64, 1, 1) }

func mustCheapHash(t testing.TB, plain string) string {
	t.Helper()
	h, err := cheapHash(plain)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

func addAdmin(t testing.TB, keys *fakeKeys, name string) (*baton.Key, string) {
	t.Helper()
	plain := baton.NewSecret(baton.AdminKeyPrefix)
	k := &baton.Key{ID: baton.NewID(baton.PrefixKey), Name: name, Hash: mustCheapHash(t, plain),
		Prefix: plain[:8], Role: baton.RoleAdmin, CreatedAt: baton.Now()}
	keys.add(k)
	return k, plain
}

// countDerivations wraps the Argon2id function of a and returns the count.
func countDerivations(a *Auth) *atomic.Int64 {
	var n atomic.Int64
	real := a.admin.derive
	a.admin.derive = func(p, s []byte, t, m uint32, th uint8, l uint32) []byte {
		n.Add(1)
		return real(p, s, t, m, th, l)
	}
	return &n
}

func TestHashAdminFormat(t *testing.T) {
	plain := baton.NewSecret(baton.AdminKeyPrefix)
	h, err := HashAdmin(plain)
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile(`^\$argon2id\$v=19\$m=65536,t=3,p=1\$[A-Za-z0-9+/]{22}\$[A-Za-z0-9+/]{43}$`)
	if !re.MatchString(h) {
		t.Fatalf("HashAdmin = %q, not BAE's PHC shape", h)
	}
	p, err := parsePHC(h)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.salt) != 16 || len(p.hash) != 32 {
		t.Fatalf("salt %d bytes, hash %d bytes", len(p.salt), len(p.hash))
	}
	// It verifies with the production parameters through AdminKey.
	keys := newFakeKeys()
	keys.add(&baton.Key{ID: "key_a", Hash: h, Role: baton.RoleAdmin, Prefix: plain[:8]})
	a := New(Options{Keys: keys})
	if err := a.AdminKey(context.Background(), plain); err != nil {
		t.Fatalf("AdminKey with the HashAdmin hash: %v", err)
	}
	if h1, h2 := mustCheapHash(t, plain), mustCheapHash(t, plain); h1 == h2 {
		t.Fatal("two hashes of one key are equal: salt is not random")
	}
}

func TestParsePHC(t *testing.T) {
	salt := base64.RawStdEncoding.EncodeToString([]byte("0123456789abcdef"))
	hash := base64.RawStdEncoding.EncodeToString([]byte("0123456789abcdef0123456789abcdef"))
	good := "$argon2id$v=19$m=65536,t=3,p=1$" + salt + "$" + hash
	if p, err := parsePHC(good); err != nil || p.memory != 65536 || p.time != 3 || p.threads != 1 {
		t.Fatalf("parsePHC(good) = %+v, %v", p, err)
	}
	if _, err := parsePHC("$argon2id$v=19$p=1,t=3,m=64$" + salt + "$" + hash); err != nil {
		t.Fatalf("parameters in another order: %v", err)
	}
	bad := map[string]string{
		"empty":            "",
		"argon2i":          "$argon2i$v=19$m=65536,t=3,p=1$" + salt + "$" + hash,
		"bcrypt":           "$2b$12$abcdefghijklmnopqrstuu",
		"no version":       "$argon2id$m=65536,t=3,p=1$" + salt + "$" + hash,
		"version 16":       "$argon2id$v=16$m=65536,t=3,p=1$" + salt + "$" + hash,
		"no salt":          "$argon2id$v=19$m=65536,t=3,p=1$$" + hash,
		"no hash":          "$argon2id$v=19$m=65536,t=3,p=1$" + salt + "$",
		"missing segment":  "$argon2id$v=19$m=65536,t=3,p=1$" + hash,
		"extra segment":    good + "$x",
		"padded base64":    "$argon2id$v=19$m=65536,t=3,p=1$" + salt + "==$" + hash,
		"bad base64":       "$argon2id$v=19$m=65536,t=3,p=1$" + salt + "$!!!!",
		"missing m":        "$argon2id$v=19$t=3,p=1$" + salt + "$" + hash,
		"repeated t":       "$argon2id$v=19$m=64,t=3,t=3,p=1$" + salt + "$" + hash,
		"unknown param":    "$argon2id$v=19$m=64,t=3,p=1,keyid=x$" + salt + "$" + hash,
		"no equals":        "$argon2id$v=19$m64,t=3,p=1$" + salt + "$" + hash,
		"zero time":        "$argon2id$v=19$m=64,t=0,p=1$" + salt + "$" + hash,
		"zero lanes":       "$argon2id$v=19$m=64,t=1,p=0$" + salt + "$" + hash,
		"memory too small": "$argon2id$v=19$m=7,t=1,p=1$" + salt + "$" + hash,
		"memory too large": "$argon2id$v=19$m=4194304,t=1,p=1$" + salt + "$" + hash,
		"negative memory":  "$argon2id$v=19$m=-1,t=1,p=1$" + salt + "$" + hash,
		"lanes over 255":   "$argon2id$v=19$m=65536,t=1,p=256$" + salt + "$" + hash,
		"short salt":       "$argon2id$v=19$m=64,t=1,p=1$YWI$" + hash,
		"no leading $":     strings.TrimPrefix(good, "$"),
	}
	for name, s := range bad {
		if p, err := parsePHC(s); err == nil {
			t.Errorf("%s: parsePHC(%q) = %+v, want error", name, s, p)
		}
	}
}

func TestAdminKey(t *testing.T) {
	keys := newFakeKeys()
	_, plain := addAdmin(t, keys, "bootstrap-admin")
	clk := newClock()
	a := New(Options{Keys: keys, Now: clk.Now})
	n := countDerivations(a)
	ctx := context.Background()

	for range 3 {
		if err := a.AdminKey(ctx, plain); err != nil {
			t.Fatal(err)
		}
	}
	if n.Load() != 1 {
		t.Fatalf("%d Argon2id derivations for 3 checks of one token, want 1", n.Load())
	}
	// Still cached after the row list is re-read.
	clk.Add(time.Minute)
	if err := a.AdminKey(ctx, plain); err != nil || n.Load() != 1 {
		t.Fatalf("AdminKey after row refresh = %v with %d derivations", err, n.Load())
	}

	for _, tok := range []string{"", "bae_admin_nope", plain + "x", baton.NewSecret(baton.ClientKeyPrefix)} {
		err := a.AdminKey(ctx, tok)
		wantCode(t, err, baton.ECodeUnauthorized, "invalid admin key")
	}
}

func TestAdminKeyBadTokenIsNegativelyCached(t *testing.T) {
	keys := newFakeKeys()
	addAdmin(t, keys, "a")
	clk := newClock()
	a := New(Options{Keys: keys, Now: clk.Now})
	n := countDerivations(a)
	ctx := context.Background()
	stale := baton.NewSecret(baton.AdminKeyPrefix)
	for range 5 {
		wantCode(t, a.AdminKey(ctx, stale), baton.ECodeUnauthorized, "invalid admin key")
	}
	if n.Load() != 1 {
		t.Fatalf("%d derivations for 5 tries of one bad token, want 1", n.Load())
	}
	// Once the admin rows change, the token is tried again: it may now
	// be the one that was provisioned.
	k := &baton.Key{ID: "key_new", Hash: mustCheapHash(t, stale), Role: baton.RoleAdmin}
	keys.add(k)
	clk.Add(5 * time.Second)
	if err := a.AdminKey(ctx, stale); err != nil {
		t.Fatalf("token matching a new admin row: %v", err)
	}
}

func TestAdminKeyNegativeCacheIsBounded(t *testing.T) {
	keys := newFakeKeys()
	addAdmin(t, keys, "a")
	a := New(Options{Keys: keys})
	ctx := context.Background()
	for range badCacheSize + 10 {
		_ = a.AdminKey(ctx, baton.NewSecret(baton.AdminKeyPrefix))
	}
	if n := len(a.admin.bad); n > badCacheSize {
		t.Fatalf("negative cache holds %d entries, bound is %d", n, badCacheSize)
	}
}

func TestAdminKeyFollowsCursorsAndSkipsBadHashes(t *testing.T) {
	keys := newFakeKeys()
	keys.pageCap = 1
	keys.add(&baton.Key{ID: "key_junk", Hash: "not a phc string", Role: baton.RoleAdmin})
	keys.add(&baton.Key{ID: "key_i", Hash: strings.Replace(mustCheapHash(t, "x"), "argon2id", "argon2i", 1), Role: baton.RoleAdmin})
	addAdmin(t, keys, "other")
	_, plain := addAdmin(t, keys, "last")
	a := New(Options{Keys: keys})
	if err := a.AdminKey(context.Background(), plain); err != nil {
		t.Fatalf("admin key on the last page: %v", err)
	}
	if _, lists := keys.calls(); lists != 4 {
		t.Fatalf("ListKeys calls = %d, want 4 (one row per page)", lists)
	}
}

func TestAdminKeyRevocation(t *testing.T) {
	keys := newFakeKeys()
	_, plain := addAdmin(t, keys, "a")
	clk := newClock()
	a := New(Options{Keys: keys, Now: clk.Now})
	ctx := context.Background()
	if err := a.AdminKey(ctx, plain); err != nil {
		t.Fatal(err)
	}
	// Rotation by another process is seen when the rows are re-read.
	if err := keys.RevokeAdminKeys(ctx); err != nil {
		t.Fatal(err)
	}
	clk.Add(5 * time.Second)
	wantCode(t, a.AdminKey(ctx, plain), baton.ECodeUnauthorized, "invalid admin key")

	// Forget takes effect at once.
	keys2 := newFakeKeys()
	k2, plain2 := addAdmin(t, keys2, "b")
	a2 := New(Options{Keys: keys2, Now: clk.Now})
	if err := a2.AdminKey(ctx, plain2); err != nil {
		t.Fatal(err)
	}
	keys2.revoke(k2.ID)
	a2.Forget(k2.ID)
	wantCode(t, a2.AdminKey(ctx, plain2), baton.ECodeUnauthorized, "invalid admin key")
}

func TestAdminKeyStoreFailure(t *testing.T) {
	keys := newFakeKeys()
	addAdmin(t, keys, "a")
	boom := errors.New("db down")
	keys.errList = boom
	a := New(Options{Keys: keys})
	err := a.AdminKey(context.Background(), "bae_admin_x")
	if !errors.Is(err, boom) || baton.ErrorCode(err) != baton.ECodeInternal || !strings.Contains(err.Error(), "admin authentication failed") {
		t.Fatalf("AdminKey = %v, want internal 'admin authentication failed'", err)
	}
}

func TestAdminKeyConcurrentVerifiesOnce(t *testing.T) {
	keys := newFakeKeys()
	_, plain := addAdmin(t, keys, "a")
	a := New(Options{Keys: keys})
	n := countDerivations(a)
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 16 {
		wg.Go(func() { errs <- a.AdminKey(context.Background(), plain) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n.Load() != 1 {
		t.Fatalf("%d derivations for 16 concurrent checks of one token, want 1", n.Load())
	}
}

func TestAdminKeyWaitHonoursContext(t *testing.T) {
	keys := newFakeKeys()
	addAdmin(t, keys, "a")
	a := New(Options{Keys: keys})
	a.admin.sem <- struct{}{} // a derivation is running
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := a.AdminKey(ctx, "bae_admin_x"); !errors.Is(err, context.Canceled) {
		t.Fatalf("AdminKey while waiting with a cancelled context = %v", err)
	}
	<-a.admin.sem
}

func TestAdminHashVerifiesWithArgon2Directly(t *testing.T) {
	// Cross-check hashPHC's encoding against a direct derivation.
	h := mustCheapHash(t, "secret")
	p, err := parsePHC(h)
	if err != nil {
		t.Fatal(err)
	}
	got := argon2.IDKey([]byte("secret"), p.salt, p.time, p.memory, p.threads, uint32(len(p.hash)))
	if string(got) != string(p.hash) {
		t.Fatal("stored hash is not argon2id(secret, salt)")
	}
}
