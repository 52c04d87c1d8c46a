package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// hcall sends a JSON request with extra headers.
func hcall(t testing.TB, method, url, token string, body any, headers map[string]string) *response {
	t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("%s %s: %v", method, url, err)
		return &response{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &response{status: resp.StatusCode, header: resp.Header, body: b}
}

// sessionCount is how many sessions the server holds.
func (s *server) sessionCount() int {
	s.t.Helper()
	r := s.admin("GET", "/admin/v1/sessions?limit=100", nil)
	mustStatus(s.t, r, 200)
	return len(r.json(s.t)["items"].([]any))
}

// idemSetup starts a server with a profile and a client key.
func idemSetup(t *testing.T, mutate ...func(map[string]string)) (*server, string) {
	s := startServer(t, mutate...)
	pro := s.profile(map[string]any{"name": "main", "primary_provider": "claude", "allowed_tools": []any{"get_time"}, "mcp_servers": []any{}})
	_, key := s.clientKey("alice", pro)
	return s, key
}

func TestIdempotentOpenAcrossRestart(t *testing.T) {
	t.Parallel()
	s, key := idemSetup(t)
	idem := map[string]string{"Idempotency-Key": "open-1"}
	first := hcall(t, "POST", s.clientURL+"/api/v1/sessions", key, openBody, idem)
	mustStatus(t, first, 201)
	fresh := first.json(t)
	if sk, _ := fresh["session_key"].(string); !strings.HasPrefix(sk, "bae_ses_") {
		t.Fatalf("first response has no session key: %s", first.body)
	}
	if first.header.Get("Idempotent-Replayed") != "" {
		t.Fatal("first response marked as replayed")
	}
	checkReplay := func(s *server, what string) {
		t.Helper()
		r := hcall(t, "POST", s.clientURL+"/api/v1/sessions", key, openBody, idem)
		mustStatus(t, r, 201)
		if r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("%s: no Idempotent-Replayed header", what)
		}
		got := r.json(t)
		if _, ok := got["session_key"]; ok || strings.Contains(string(r.body), "bae_ses_") {
			t.Fatalf("%s: replay carries the session key: %s", what, r.body)
		}
		want := map[string]any{}
		for k, v := range fresh {
			if k != "session_key" {
				want[k] = v
			}
		}
		wb, _ := json.Marshal(want)
		gb, _ := json.Marshal(got)
		if !bytes.Equal(wb, gb) {
			t.Fatalf("%s: replay differs beyond the session key:\n%s\n%s", what, gb, wb)
		}
		if n := s.sessionCount(); n != 1 {
			t.Fatalf("%s: %d sessions, want 1", what, n)
		}
	}
	checkReplay(s, "replay")

	// A different body under the same key is a conflict.
	other := map[string]any{"client_version": "test/2", "tools": []any{}}
	r := hcall(t, "POST", s.clientURL+"/api/v1/sessions", key, other, idem)
	mustStatus(t, r, 409)
	if got := r.json(t)["type"]; got != "idempotency_conflict" {
		t.Fatalf("conflict type %v: %s", got, r.body)
	}

	// The receipt survives a restart.
	s.stop()
	s2 := runServer(t, s.dir, s.env)
	checkReplay(s2, "replay after restart")

	// Join is covered too, per caller: the same key on join is its own receipt.
	sid := fresh["session_id"].(string)
	j1 := hcall(t, "POST", s2.clientURL+"/api/v1/sessions/"+sid+"/join", key, map[string]any{}, idem)
	mustStatus(t, j1, 201)
	j2 := hcall(t, "POST", s2.clientURL+"/api/v1/sessions/"+sid+"/join", key, map[string]any{}, idem)
	mustStatus(t, j2, 201)
	if j2.header.Get("Idempotent-Replayed") != "true" || strings.Contains(string(j2.body), "session_key") {
		t.Fatalf("join replay: %v %s", j2.header, j2.body)
	}
}

func TestIdempotentConcurrentDuplicates(t *testing.T) {
	t.Parallel()
	s, key := idemSetup(t)
	const n = 12
	idem := map[string]string{"Idempotency-Key": "race"}
	results := make([]*response, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			results[i] = hcall(t, "POST", s.clientURL+"/api/v1/sessions", key, openBody, idem)
		}()
	}
	close(start)
	wg.Wait()
	var fresh, replayed, inflight int
	for _, r := range results {
		switch {
		case r.status == 201 && r.header.Get("Idempotent-Replayed") == "true":
			replayed++
		case r.status == 201:
			fresh++
		case r.status == 409 && strings.Contains(string(r.body), "idempotency_conflict"):
			inflight++
		default:
			t.Fatalf("unexpected answer %d %s", r.status, r.body)
		}
	}
	if fresh != 1 || replayed+inflight != n-1 {
		t.Fatalf("fresh=%d replayed=%d in-flight=%d; want exactly one fresh", fresh, replayed, inflight)
	}
	if c := s.sessionCount(); c != 1 {
		t.Fatalf("%d sessions created, want 1", c)
	}
}

func TestRateLimitAndClientVersion(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "rate limits count per node")
	s, key := idemSetup(t, func(env map[string]string) {
		env["BATON_RATE_LIMIT"] = "0.001" // one token per ~17 minutes
		env["BATON_RATE_BURST"] = "2"
		env["BATON_MIN_CLIENT_VERSION"] = "2.1.0"
	})
	old := map[string]string{"Client-Version": "2.0.9"}
	r := hcall(t, "POST", s.clientURL+"/api/v1/sessions", key, openBody, old)
	mustStatus(t, r, 426)
	if r.json(t)["type"] != "client_outdated" {
		t.Fatalf("outdated client: %s", r.body)
	}
	r = hcall(t, "POST", s.clientURL+"/api/v1/sessions", key, openBody, map[string]string{"Client-Version": "2.1.0"})
	mustStatus(t, r, 201)
	r = hcall(t, "POST", s.clientURL+"/api/v1/sessions", key, openBody, nil)
	mustStatus(t, r, 429)
	if r.json(t)["type"] != "too_many_requests" || r.header.Get("Retry-After") == "" {
		t.Fatalf("rate limited: %v %s", r.header, r.body)
	}
	for range 3 {
		mustStatus(t, s.client("GET", "/healthz", key, nil), 200)
	}
	// The admin port is not limited.
	if n := s.sessionCount(); n != 1 {
		t.Fatalf("%d sessions", n)
	}
}

func TestLimitConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		env  map[string]string
		code int
		err  string
	}{
		{map[string]string{"BATON_RATE_LIMIT": "-1"}, 2, "BATON_RATE_LIMIT"},
		{map[string]string{"BATON_RATE_BURST": "x"}, 2, "BATON_RATE_BURST"},
		{map[string]string{"BATON_MIN_CLIENT_VERSION": "1.2"}, 2, "BATON_MIN_CLIENT_VERSION"},
		{map[string]string{"BATON_IDEMPOTENCY_RETENTION": "24h"}, 2, "below the minimum"},
		{map[string]string{"BATON_IDEMPOTENCY_SWEEP_INTERVAL": "0"}, 2, "BATON_IDEMPOTENCY_SWEEP_INTERVAL"},
		{map[string]string{"BATON_RATE_LIMIT": "5.5", "BATON_RATE_BURST": "10", "BATON_MIN_CLIENT_VERSION": "1.2.3",
			"BATON_IDEMPOTENCY_RETENTION": "240h", "BATON_IDEMPOTENCY_SWEEP_INTERVAL": "60"}, 0, ""},
	}
	for _, tc := range tests {
		code, _, errOut := runCLI(t, tc.env, "serve", "--check", "--config", "/nonexistent.toml")
		if code != tc.code || !strings.Contains(errOut, tc.err) {
			t.Errorf("%v: exit %d (%s), want %d with %q", tc.env, code, errOut, tc.code, tc.err)
		}
	}
	c, err := loadServeConfig(envFunc(map[string]string{"BATON_RATE_LIMIT": "5.5", "BATON_IDEMPOTENCY_SWEEP_INTERVAL": "60"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if c.Limits.RateLimit != 5.5 || c.Limits.SweepInterval != time.Minute || c.Limits.Retention != 7*24*time.Hour || c.Limits.MinClientVersion != nil {
		t.Fatalf("limits = %+v", c.Limits)
	}
	dev := &devOptions{dir: t.TempDir(), getenv: envFunc(map[string]string{"BATON_RATE_LIMIT": "5"})}
	c, _ = loadServeConfig(dev.getenv, nil)
	dev.adjust(c, &serveFlags{})
	if c.Limits.RateLimit != 0 {
		t.Fatal("dev kept the rate limit")
	}
}

// TestIdempotentRegisterAcrossSpellings: the receipt scope is the caller's
// key id and the route with the session id canonical, so registering
// again under the same Idempotency-Key with the session's UUID form (any
// case) replays the ses_ form's answer; another credential of the same
// session is another caller.
func TestIdempotentRegisterAcrossSpellings(t *testing.T) {
	t.Parallel()
	s, sess, pro := clientSession(t)
	_, manager := s.clientKey("manager", pro)
	body := regBody("lap", never(), rtool("echo"))
	idem := map[string]string{"Idempotency-Key": "idem"}
	uuid := sessionUUID(sess.ID)
	first := hcall(t, "POST", s.clientURL+"/v1/sessions/"+sess.ID+"/clients", sess.Key, body, idem)
	mustStatus(t, first, 201)
	for _, sid := range []string{uuid, strings.ToUpper(uuid), sess.ID} {
		r := hcall(t, "POST", s.clientURL+"/v1/sessions/"+sid+"/clients", sess.Key, body, idem)
		mustStatus(t, r, 201)
		if r.header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(r.body, first.body) {
			t.Fatalf("%s: not a replay of the first answer: %v %s", sid, r.header, r.body)
		}
	}
	r := hcall(t, "POST", s.clientURL+"/v1/sessions/"+uuid+"/clients", sess.Key, regBody("other", never()), idem)
	mustStatus(t, r, 409)
	if errCode(t, r) != "conflict" {
		t.Fatalf("different body: %s", r.body)
	}
	// The session's creator holds the client key too, but a client key is
	// its own caller: the key runs again for it.
	r = hcall(t, "POST", s.clientURL+"/v1/sessions/"+uuid+"/clients", manager, body, idem)
	mustStatus(t, r, 201)
	if r.header.Get("Idempotent-Replayed") != "" || r.json(t)["name"] != "lap-2" {
		t.Fatalf("another caller: %v %s", r.header, r.body)
	}
	list := s.client("GET", "/v1/sessions/"+sess.ID+"/clients", sess.Key, nil)
	mustStatus(t, list, 200)
	if n := len(list.json(t)["items"].([]any)); n != 2 {
		t.Fatalf("%d clients registered, want 2: %s", n, list.body)
	}
}

// TestIdempotencyKeyText: the registered-clients contract, docs/api.md sets no charset on Idempotency-Key,
// only 1 to 255 characters: non-ASCII keys work and replay, and the
// length counts characters, not bytes. Control characters are refused.
func TestIdempotencyKeyText(t *testing.T) {
	t.Parallel()
	s, sess, _ := clientSession(t)
	path := s.clientURL + "/v1/sessions/" + sess.ID + "/clients"
	for i, key := range []string{"é", "clé de réessai 🔁", strings.Repeat("é", 255)} {
		body := regBody(fmt.Sprintf("c%d", i), never())
		idem := map[string]string{"Idempotency-Key": key}
		mustStatus(t, hcall(t, "POST", path, sess.Key, body, idem), 201)
		r := hcall(t, "POST", path, sess.Key, body, idem)
		mustStatus(t, r, 201)
		if r.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("key %q: no replay", key)
		}
	}
	for _, key := range []string{strings.Repeat("é", 256), "a\tb"} {
		r := hcall(t, "POST", path, sess.Key, regBody("x", never()), map[string]string{"Idempotency-Key": key})
		mustStatus(t, r, 400)
		if errCode(t, r) != "invalid_request" {
			t.Fatalf("key %q: %s", key, r.body)
		}
	}
}
