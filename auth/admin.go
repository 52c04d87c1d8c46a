package auth

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/baton-engine/baton"
	"golang.org/x/crypto/argon2"
)

// Argon2id parameters of the admin keys Baton generates (BAE's: 64 MiB,
// three passes, one lane, 16-byte salt, 32-byte hash).
const (
	adminMemory  = 64 * 1024 // KiB
	adminTime    = 3
	adminThreads = 1
	adminSaltLen = 16
	adminKeyLen  = 32
)

// Bounds on PHC parameters read from stored hashes, so a bad hash file
// cannot make one verification take the machine down.
const (
	maxMemory = 1 << 20 // KiB, 1 GiB
	maxTime   = 64
	minBytes  = 4 // salt and hash lengths
	maxBytes  = 64
)

// badCacheSize bounds the negative cache of admin tokens.
const badCacheSize = 256

// adminListLimit is the page size used to read admin rows.
const adminListLimit = 200

// phc is a parsed Argon2id PHC string.
type phc struct {
	memory  uint32
	time    uint32
	threads uint8
	salt    []byte
	hash    []byte
}

// HashAdmin returns the Argon2id PHC string of an admin key plaintext, with
// BAE's parameters: $argon2id$v=19$m=65536,t=3,p=1$<salt>$<hash>.
func HashAdmin(plaintext string) (string, error) {
	return hashPHC(plaintext, adminMemory, adminTime, adminThreads)
}

func hashPHC(plaintext string, memory, time uint32, threads uint8) (string, error) {
	salt := make([]byte, adminSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("admin key salt: %w", err)
	}
	hash := argon2.IDKey([]byte(plaintext), salt, time, memory, threads, adminKeyLen)
	releaseArgon2()
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s", argon2.Version, memory, time, threads,
		base64.RawStdEncoding.EncodeToString(salt), base64.RawStdEncoding.EncodeToString(hash)), nil
}

// parsePHC parses "$argon2id$v=19$m=<KiB>,t=<passes>,p=<lanes>$<salt>$<hash>"
// with unpadded standard base64. Only version 19 is accepted (the one the
// Go implementation computes).
func parsePHC(s string) (phc, error) {
	var p phc
	parts := strings.Split(s, "$")
	if len(parts) != 6 || parts[0] != "" {
		return p, errors.New("not a PHC string")
	}
	if parts[1] != "argon2id" {
		return p, fmt.Errorf("algorithm %q is not argon2id", parts[1])
	}
	if parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return p, fmt.Errorf("unsupported argon2 version %q", parts[2])
	}
	var seen [3]bool
	for _, kv := range strings.Split(parts[3], ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return p, fmt.Errorf("bad parameter %q", kv)
		}
		n, err := strconv.ParseUint(v, 10, 32)
		if err != nil {
			return p, fmt.Errorf("bad parameter %q", kv)
		}
		var i int
		switch k {
		case "m":
			i, p.memory = 0, uint32(n)
		case "t":
			i, p.time = 1, uint32(n)
		case "p":
			if n > 255 {
				return p, fmt.Errorf("bad parameter %q", kv)
			}
			i, p.threads = 2, uint8(n)
		default:
			return p, fmt.Errorf("unknown parameter %q", k)
		}
		if seen[i] {
			return p, fmt.Errorf("repeated parameter %q", k)
		}
		seen[i] = true
	}
	switch {
	case !seen[0] || !seen[1] || !seen[2]:
		return p, errors.New("m, t and p are required")
	case p.threads < 1, p.time < 1 || p.time > maxTime,
		p.memory < 8*uint32(p.threads) || p.memory > maxMemory:
		return p, errors.New("parameters out of range")
	}
	var err error
	if p.salt, err = base64.RawStdEncoding.Strict().DecodeString(parts[4]); err != nil {
		return p, errors.New("bad salt encoding")
	}
	if p.hash, err = base64.RawStdEncoding.Strict().DecodeString(parts[5]); err != nil {
		return p, errors.New("bad hash encoding")
	}
	if len(p.salt) < minBytes || len(p.salt) > maxBytes || len(p.hash) < minBytes || len(p.hash) > maxBytes {
		return p, errors.New("salt or hash length out of range")
	}
	return p, nil
}

// releaseArgon2 returns the memory of finished Argon2id derivations to the
// operating system. argon2.IDKey allocates its whole working area (64 MiB
// with BAE's parameters) on the Go heap and drops it on return; the
// collector frees it, but the runtime keeps freed pages resident and hands
// them back only slowly, so an idle server that had verified its admin key
// sat at 90–160 MB resident. A forced collection and scavenge costs a few
// milliseconds, little next to the derivation itself, and runs only when
// a derivation did (cache misses, key generation).
func releaseArgon2() { debug.FreeOSMemory() }

// adminState caches admin verifications.
//
// Argon2id with BAE's parameters costs 64 MiB and tens of milliseconds, so:
//   - a token that verified is remembered (by its SHA-256) together with the
//     row it matched; it stays good while that row is among the active
//     admin rows, which are re-read at most every CacheTTL;
//   - a token that failed is remembered in a small negative cache, valid
//     only while the set of admin rows is unchanged, so a client retrying a
//     stale key costs one derivation, not one per request;
//   - at most one derivation runs at a time (sem), so a flood of distinct
//     bad tokens is bounded to one core and 64 MiB instead of 64 MiB per
//     concurrent request. The admin port is loopback-only, so this is about
//     robustness rather than a remote attacker;
//   - once a verification's derivations are done, and before the next may
//     start, their memory goes back to the operating system
//     (releaseArgon2).
type adminState struct {
	sem chan struct{}
	// derive is argon2.IDKey and release is releaseArgon2; tests count
	// calls through them.
	derive  func(password, salt []byte, time, memory uint32, threads uint8, keyLen uint32) []byte
	release func()

	mu      sync.Mutex
	rows    []*baton.Key
	rowsSig string    // identity of rows, to notice changes
	rowsAt  time.Time // zero when rows must be re-read
	ok      map[[sha256.Size]byte]verified
	bad     map[[sha256.Size]byte]string // token sum → rowsSig it failed against
}

type verified struct{ id, hash string }

func (s *adminState) init() {
	s.sem = make(chan struct{}, 1)
	s.derive = argon2.IDKey
	s.release = releaseArgon2
	s.ok = map[[sha256.Size]byte]verified{}
	s.bad = map[[sha256.Size]byte]string{}
}

func (s *adminState) forget(ids []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for sum, v := range s.ok {
		if slices.Contains(ids, v.id) {
			delete(s.ok, sum)
		}
	}
	s.rowsAt = time.Time{}
}

// AdminKey checks an admin token against every active admin row.
func (a *Auth) AdminKey(ctx context.Context, token string) error {
	if token == "" {
		return baton.Errorf(baton.ECodeUnauthorized, "invalid admin key")
	}
	sum := sha256.Sum256([]byte(token))
	rows, sig, err := a.adminRows(ctx)
	if err != nil {
		return fmt.Errorf("admin authentication failed: %w", err)
	}
	if ok, known := a.admin.known(sum, rows, sig); known {
		return adminResult(ok)
	}

	select {
	case a.admin.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-a.admin.sem }()
	// Another request may have settled this token while we waited.
	if ok, known := a.admin.known(sum, rows, sig); known {
		return adminResult(ok)
	}
	derived := false
	defer func() { // runs before sem is released
		if derived {
			a.admin.release()
		}
	}()
	for _, k := range rows {
		p, err := parsePHC(k.Hash)
		if err != nil {
			continue // an unparsable stored hash never matches
		}
		derived = true
		got := a.admin.derive([]byte(token), p.salt, p.time, p.memory, p.threads, uint32(len(p.hash)))
		if subtle.ConstantTimeCompare(got, p.hash) == 1 {
			a.admin.mu.Lock()
			a.admin.ok[sum] = verified{id: k.ID, hash: k.Hash}
			a.admin.mu.Unlock()
			return nil
		}
	}
	a.admin.mu.Lock()
	if len(a.admin.bad) >= badCacheSize {
		clear(a.admin.bad)
	}
	a.admin.bad[sum] = sig
	a.admin.mu.Unlock()
	return adminResult(false)
}

func adminResult(ok bool) error {
	if ok {
		return nil
	}
	return baton.Errorf(baton.ECodeUnauthorized, "invalid admin key")
}

// known reports whether token sum was already settled against rows, whose
// signature is sig.
func (s *adminState) known(sum [sha256.Size]byte, rows []*baton.Key, sig string) (ok, known bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, found := s.ok[sum]; found {
		for _, k := range rows {
			if k.ID == v.id && k.Hash == v.hash {
				return true, true
			}
		}
		delete(s.ok, sum) // its row is gone
	}
	failedAgainst, bad := s.bad[sum]
	return false, bad && failedAgainst == sig
}

// adminRows returns the active admin rows and a signature of them,
// re-reading them from the store when they are older than the cache TTL.
func (a *Auth) adminRows(ctx context.Context) ([]*baton.Key, string, error) {
	now := a.now()
	a.admin.mu.Lock()
	if !a.admin.rowsAt.IsZero() && now.Before(a.admin.rowsAt.Add(a.ttl)) {
		rows, sig := a.admin.rows, a.admin.rowsSig
		a.admin.mu.Unlock()
		return rows, sig, nil
	}
	a.admin.mu.Unlock()

	var rows []*baton.Key
	page := baton.Page{Limit: adminListLimit}
	for range 10_000 {
		items, next, err := a.keys.ListKeys(ctx, baton.RoleAdmin, page)
		if err != nil {
			return nil, "", fmt.Errorf("list admin keys: %w", err)
		}
		rows = append(rows, items...)
		if next == "" || next == page.Cursor {
			break
		}
		page.Cursor = next
	}
	var sig strings.Builder
	for _, k := range rows {
		sig.WriteString(k.ID)
		sig.WriteByte(0)
		sig.WriteString(k.Hash)
		sig.WriteByte(0)
	}

	a.admin.mu.Lock()
	defer a.admin.mu.Unlock()
	if sig.String() != a.admin.rowsSig {
		// A new or changed row may match a token that failed before;
		// entries tagged with an old signature are dead weight.
		clear(a.admin.bad)
		a.admin.rowsSig = sig.String()
	}
	a.admin.rows = rows
	a.admin.rowsAt = now
	return rows, a.admin.rowsSig, nil
}
