package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton"
)

// TestAdminCLIAgainstServer drives `baton admin` against a real server:
// profiles, keys, sessions, events, revocation and error mapping.
func TestAdminCLIAgainstServer(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "a revocation closes the sessions other nodes own in their next round, not at once")
	s := startServer(t)
	env := map[string]string{"BAE_ADMIN_ADDR": strings.TrimPrefix(s.adminURL, "http://"), "BAE_ADMIN_TOKEN": s.adminKey}
	admin := func(args ...string) (int, string, string) {
		t.Helper()
		return runCLI(t, env, append([]string{"admin"}, args...)...)
	}

	code, out, errOut := admin("profiles", "create", "main", "script", "--allowed-tool", "get_time", "--json")
	if code != 0 {
		t.Fatalf("create profile: %d %s", code, errOut)
	}
	var prof struct{ ID string }
	if err := json.Unmarshal([]byte(out), &prof); err != nil || !strings.HasPrefix(prof.ID, "pro_") {
		t.Fatalf("create profile output %q: %v", out, err)
	}
	code, out, _ = admin("profiles", "list")
	if code != 0 || !strings.Contains(out, prof.ID) || !strings.Contains(out, "main") {
		t.Fatalf("profiles list: %d %s", code, out)
	}
	code, out, errOut = admin("keys", "create", "laptop", prof.ID, "--json")
	var key struct{ ID, Key string }
	if code != 0 || json.Unmarshal([]byte(out), &key) != nil || !strings.HasPrefix(key.Key, "bae_") {
		t.Fatalf("keys create: %d %q %s", code, out, errOut)
	}
	if !strings.Contains(errOut, "copy the key now") {
		t.Errorf("no copy-now warning: %q", errOut)
	}

	// The key works on the client port; the session shows up in the CLI.
	r := s.client("POST", "/api/v1/sessions", key.Key, map[string]any{})
	mustStatus(t, r, 201)
	sid := r.json(t)["session_id"].(string)
	code, out, _ = admin("sessions", "list", "--state", "open")
	if code != 0 || !strings.Contains(out, sid) {
		t.Fatalf("sessions list: %d %s", code, out)
	}
	code, out, _ = admin("events", sid)
	if code != 0 || !strings.Contains(out, "session.open") {
		t.Fatalf("events: %d %s", code, out)
	}

	// A profile with keys cannot be deleted; the CLI says why and what to do.
	code, _, errOut = admin("profiles", "delete", prof.ID)
	if code != 1 || !strings.Contains(errOut, "revoke") {
		t.Fatalf("delete in-use profile: %d %s", code, errOut)
	}
	code, out, _ = admin("keys", "revoke", key.ID)
	if code != 0 || !strings.Contains(out, "revoked key "+key.ID) {
		t.Fatalf("revoke: %d %s", code, out)
	}
	mustStatus(t, s.client("POST", "/api/v1/sessions", key.Key, map[string]any{}), 401)
	code, out, _ = admin("sessions", "list", "--state", "closed")
	if code != 0 || !strings.Contains(out, sid) {
		t.Fatalf("revocation did not close the session: %d %s", code, out)
	}
	code, out, _ = admin("profiles", "delete", prof.ID)
	if code != 0 || !strings.Contains(out, "deleted profile "+prof.ID) {
		t.Fatalf("delete profile: %d %s", code, out)
	}

	// A wrong token is explained, not just "401".
	bad := map[string]string{"BAE_ADMIN_ADDR": env["BAE_ADMIN_ADDR"], "BAE_ADMIN_TOKEN": "bae_admin_nope"}
	code, _, errOut = runCLI(t, bad, "admin", "profiles", "list")
	if code != 1 || !strings.Contains(errOut, "BAE_ADMIN_TOKEN") {
		t.Fatalf("bad token: %d %s", code, errOut)
	}
}

// TestAdminKeyListShowsLastUseAtOnce: a key's use shows in GET
// /admin/v1/keys straight away, although the store only learns of it at
// the next batched write (up to 30 s later).
func TestAdminKeyListShowsLastUseAtOnce(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "each node flushes the last uses it saw; the first node cannot see another's at once")
	s := startServer(t)
	keyID, key := s.clientKey("laptop", s.profile(map[string]any{"name": "p", "primary_provider": "script"}))
	lastUsed := func() any {
		t.Helper()
		r := s.admin("GET", "/admin/v1/keys", nil)
		mustStatus(t, r, 200)
		for _, it := range r.json(t)["items"].([]any) {
			if k := it.(map[string]any); k["id"] == keyID {
				return k["last_used_at"]
			}
		}
		t.Fatalf("key %s not listed: %s", keyID, r.body)
		return nil
	}
	if got := lastUsed(); got != nil {
		t.Fatalf("last_used_at before any use = %v, want null", got)
	}
	before := time.Now().UTC().Truncate(time.Millisecond)
	mustStatus(t, s.client("POST", "/api/v1/sessions", key, map[string]any{}), 201)
	after := time.Now().UTC()
	got, _ := lastUsed().(string)
	at, err := baton.ParseTime(got)
	if err != nil || at.Before(before) || at.After(after) {
		t.Fatalf("last_used_at right after a use = %q (%v), want a time in [%s, %s]", got, err, before, after)
	}
}
