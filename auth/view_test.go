package auth

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/filearea"
	"github.com/google/go-cmp/cmp"
)

func TestViewTokens(t *testing.T) {
	ctx := context.Background()
	store := newFakeExecutors()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	clock := func() time.Time { return now }
	v, err := OpenViewTokens(ctx, ViewTokenOptions{Store: store, TTL: time.Hour, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	g := filearea.ViewGrant{SessionID: "ses_1", View: "workspace", Root: "src", Epoch: 7, Readonly: true}
	tok, err := v.Issue(g)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(tok, ViewTokenPrefix) {
		t.Fatalf("token %q lacks the prefix", tok)
	}
	got, err := v.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	want := g
	want.ExpiresAt = now.Add(time.Hour)
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("grant (-want +got):\n%s", diff)
	}

	// Another node sharing the store verifies it; one with another key
	// does not.
	same, _ := OpenViewTokens(ctx, ViewTokenOptions{Store: store, Now: clock})
	if _, err := same.Verify(tok); err != nil {
		t.Errorf("same installation: %v", err)
	}
	foreign, _ := OpenViewTokens(ctx, ViewTokenOptions{Store: newFakeExecutors(), Now: clock})
	if _, err := foreign.Verify(tok); baton.ErrorCode(err) != baton.ECodeUnauthorized {
		t.Errorf("foreign installation: %v", err)
	}

	// An executor token signed with the same key is not a view token, nor
	// the other way round.
	x, err := OpenExecutorTokens(ctx, ExecutorOptions{Store: store, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := x.Verify(ctx, tok); baton.ErrorCode(err) != baton.ECodeUnauthorized {
		t.Errorf("a view token verified as an executor token: %v", err)
	}
	ext := baton.ExecutorTokenPrefix + strings.TrimPrefix(tok, ViewTokenPrefix)
	if _, err := v.Verify(ext); baton.ErrorCode(err) != baton.ECodeUnauthorized {
		t.Errorf("a re-prefixed token verified: %v", err)
	}

	// A tampered payload (read-write instead of read-only) fails.
	head, mac, _ := strings.Cut(tok, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(strings.TrimPrefix(head, ViewTokenPrefix))
	forged := strings.Replace(string(payload), `"ro":true,`, ``, 1)
	if forged == string(payload) {
		t.Fatalf("payload %s has no read-only claim to forge", payload)
	}
	if _, err := v.Verify(ViewTokenPrefix + base64.RawURLEncoding.EncodeToString([]byte(forged)) + "." + mac); baton.ErrorCode(err) != baton.ECodeUnauthorized {
		t.Errorf("a forged token verified: %v", err)
	}

	// Expiry, exact to the millisecond.
	now = now.Add(time.Hour - time.Millisecond)
	if _, err := v.Verify(tok); err != nil {
		t.Errorf("a millisecond before expiry: %v", err)
	}
	now = now.Add(time.Millisecond)
	if _, err := v.Verify(tok); err == nil || err.Error() != "unauthorized: view token expired" {
		t.Errorf("at expiry: %v", err)
	}

	// An explicit expiry wins over the TTL.
	at := now.Add(5 * time.Minute).Truncate(time.Millisecond)
	tok, _ = v.Issue(filearea.ViewGrant{SessionID: "ses_1", View: "w", ExpiresAt: at})
	if got, err := v.Verify(tok); err != nil || !got.ExpiresAt.Equal(at) {
		t.Errorf("explicit expiry: %+v %v", got, err)
	}
	for _, bad := range []filearea.ViewGrant{{View: "w"}, {SessionID: "s"}, {SessionID: "s", View: "w", Epoch: -1}} {
		if _, err := v.Issue(bad); err == nil {
			t.Errorf("Issue(%+v) signed an incomplete grant", bad)
		}
	}
	for _, junk := range []string{"", "bae_fsv_", "bae_fsv_e30.AAAA", tok + "x", strings.Repeat("a", 5000)} {
		if _, err := v.Verify(junk); baton.ErrorCode(err) != baton.ECodeUnauthorized {
			t.Errorf("Verify(%.20q) = %v", junk, err)
		}
	}
}

// FuzzViewToken checks that whatever Verify accepts was signed here: a
// fuzzed token never verifies unless it is one of the seeds' own.
func FuzzViewToken(f *testing.F) {
	v, err := OpenViewTokens(context.Background(), ViewTokenOptions{Store: newFakeExecutors()})
	if err != nil {
		f.Fatal(err)
	}
	good, _ := v.Issue(filearea.ViewGrant{SessionID: "ses_1", View: "workspace", Epoch: 1})
	f.Add(good)
	f.Add("bae_fsv_e30.AAAA")
	f.Add("bae_fsv_" + base64.RawURLEncoding.EncodeToString([]byte(`{"v":1,"s":"x","w":"y","e":1,"x":99999999999999}`)) + ".AAAA")
	f.Fuzz(func(t *testing.T, tok string) {
		g, err := v.Verify(tok)
		if err != nil {
			if baton.ErrorCode(err) != baton.ECodeUnauthorized {
				t.Fatalf("Verify error %v is not unauthorized", err)
			}
			return
		}
		if tok != good || g.SessionID != "ses_1" {
			t.Fatalf("Verify accepted %q as %+v", tok, g)
		}
	})
}
