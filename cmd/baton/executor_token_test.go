package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/auth"
	"github.com/baton-engine/baton/store"
)

// exchanged is the 200 body of a token exchange.
type exchanged struct {
	Token     string `json:"token"`
	ExpiresAt string `json:"expires_at"`
}

// exchange trades secret for a token at path and checks the 200 answer.
func (s *server) exchange(path, secret string) exchanged {
	s.t.Helper()
	r := s.client("POST", path, secret, nil)
	mustStatus(s.t, r, 200)
	var e exchanged
	if err := json.Unmarshal(r.body, &e); err != nil || !strings.HasPrefix(e.Token, baton.ExecutorTokenPrefix) {
		s.t.Fatalf("exchange at %s: %s (%v)", path, r.body, err)
	}
	if cc := r.header.Get("Cache-Control"); cc != "no-store" {
		s.t.Errorf("Cache-Control %q, want no-store", cc)
	}
	return e
}

// v1Error checks a /v1 error envelope.
func v1Error(t *testing.T, r *response, status int, code, msg string) {
	t.Helper()
	mustStatus(t, r, status)
	want := `{"error":{"code":"` + code + `","message":"` + msg + `"}}`
	if got := strings.TrimSpace(string(r.body)); got != want {
		t.Errorf("body %s, want %s", got, want)
	}
}

// otherNode opens the server's store a second time with its own token
// service, as another Baton node (or this one after a restart) would. It
// caches nothing, so every Verify sees the store's state.
func otherNode(t *testing.T, s *server) *auth.ExecutorTokens {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, store.Options{URL: s.storeURL(), SharedFile: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	x, err := auth.OpenExecutorTokens(ctx, auth.ExecutorOptions{Store: db, CacheTTL: -1})
	if err != nil {
		t.Fatal(err)
	}
	return x
}

// TestExecutorTokensEndToEnd creates environments, machines and
// credentials with `baton admin`, exchanges credentials for tokens at the
// three client-port endpoints of a real server, verifies the tokens on
// another node sharing the store, and checks that revocation, deleting an
// owner and a restart do what they should.
func TestExecutorTokensEndToEnd(t *testing.T) {
	t.Parallel()
	s := startServer(t, func(env map[string]string) { env["BATON_EXECUTOR_TOKEN_TTL"] = "10m" })
	cliEnv := map[string]string{"BAE_ADMIN_ADDR": strings.TrimPrefix(s.adminURL, "http://"), "BAE_ADMIN_TOKEN": s.adminKey}
	admin := func(out any, args ...string) {
		t.Helper()
		code, stdout, stderr := runCLI(t, cliEnv, append([]string{"admin", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("baton admin %v: exit %d: %s", args, code, stderr)
		}
		if out != nil {
			if err := json.Unmarshal([]byte(stdout), out); err != nil {
				t.Fatalf("baton admin %v printed %q: %v", args, stdout, err)
			}
		}
	}
	var env, mch struct{ ID string }
	admin(&env, "environments", "create", "ci")
	admin(&mch, "machines", "create", "laptop")
	type secret struct{ ID, Secret string }
	var envCred, mchCred secret
	admin(&envCred, "environments", "credentials", "create", env.ID)
	admin(&mchCred, "machines", "credentials", "create", mch.ID)

	// Exchange at all three endpoints; the legacy one scopes the token to
	// the credential's environment.
	before := time.Now()
	envTok := s.exchange("/v1/environments/"+env.ID+"/token", envCred.Secret)
	mchTok := s.exchange("/v1/machines/"+mch.ID+"/token", mchCred.Secret)
	legacyTok := s.exchange("/v1/executors/token", envCred.Secret)
	exp, err := baton.ParseTime(envTok.ExpiresAt)
	if err != nil || exp.Before(before.Add(10*time.Minute-time.Second)) || exp.After(time.Now().Add(10*time.Minute)) {
		t.Errorf("expires_at %q (%v), want about 10m from now (BATON_EXECUTOR_TOKEN_TTL)", envTok.ExpiresAt, err)
	}

	node := otherNode(t, s)
	ctx := context.Background()
	for _, c := range []struct {
		name  string
		token exchanged
		want  baton.ExecutorGrant
	}{
		{"environment", envTok, baton.ExecutorGrant{Scope: baton.ExecutorScopeEnvironment, EnvironmentID: env.ID, CredentialID: envCred.ID}},
		{"machine", mchTok, baton.ExecutorGrant{Scope: baton.ExecutorScopeMachine, MachineID: mch.ID, CredentialID: mchCred.ID}},
		{"legacy", legacyTok, baton.ExecutorGrant{Scope: baton.ExecutorScopeEnvironment, EnvironmentID: env.ID, CredentialID: envCred.ID}},
	} {
		g, err := node.Verify(ctx, c.token.Token)
		if err != nil {
			t.Fatalf("%s token on another node: %v", c.name, err)
		}
		if !g.SameExecutor(&c.want) || baton.FormatTime(g.ExpiresAt) != c.token.ExpiresAt {
			t.Errorf("%s grant %+v, want %+v expiring at %s", c.name, g, c.want, c.token.ExpiresAt)
		}
	}

	// Errors, in the /v1 envelope.
	v1Error(t, s.client("POST", "/v1/executors/token", mchCred.Secret, nil), 401, "unauthorized",
		"this endpoint accepts environment credentials only; use POST /v1/machines/{machine_id}/token")
	v1Error(t, s.client("POST", "/v1/machines/"+mch.ID+"/token", envCred.Secret, nil), 401, "unauthorized",
		"the executor credential does not belong to machine "+mch.ID)
	v1Error(t, s.client("POST", "/v1/environments/env_nope/token", envCred.Secret, nil), 404, "not_found", "no environment env_nope")
	v1Error(t, s.client("POST", "/v1/environments/"+env.ID+"/token", "bae_exc_nope", nil), 401, "unauthorized", "invalid executor credential")
	v1Error(t, s.client("POST", "/v1/environments/"+env.ID+"/token", "", nil), 401, "unauthorized", "missing Authorization header")
	if _, err := node.Verify(ctx, envTok.Token+"x"); baton.ErrorCode(err) != baton.ECodeUnauthorized {
		t.Errorf("tampered token: %v", err)
	}

	// Revoking the environment credential with `baton admin` makes its
	// tokens fail and its exchange stop.
	admin(nil, "environments", "credentials", "revoke", env.ID, envCred.ID)
	for _, tok := range []exchanged{envTok, legacyTok} {
		if _, err := node.Verify(ctx, tok.Token); baton.ErrorMessage(err) != "executor credential revoked" {
			t.Errorf("token of a revoked credential: %v", err)
		}
	}
	v1Error(t, s.client("POST", "/v1/environments/"+env.ID+"/token", envCred.Secret, nil), 401, "unauthorized", "executor credential revoked")
	if _, err := node.Verify(ctx, mchTok.Token); err != nil {
		t.Errorf("the machine's token after revoking another credential: %v", err)
	}

	// A profile that uses the machine as its brain keeps it from being
	// deleted; once the profile lets go, deleting it revokes its
	// credentials.
	var prof struct{ ID string }
	admin(&prof, "profiles", "create", "brainy", "script", "--brain-machine", mch.ID, "--executor-environment", env.ID)
	r := s.admin("GET", "/admin/v1/profiles/"+prof.ID, nil)
	mustStatus(t, r, 200)
	if !strings.Contains(string(r.body), `"executor_environments":["`+env.ID+`"],"brain":{"type":"executor","machine_id":"`+mch.ID+`"}`) {
		t.Errorf("profile %s", r.body)
	}
	mustStatus(t, s.admin("DELETE", "/admin/v1/machines/"+mch.ID, nil), 409)
	admin(nil, "profiles", "update", prof.ID, "script", "--brain-machine", "", "--executor-environment", "")
	mustStatus(t, s.admin("DELETE", "/admin/v1/machines/"+mch.ID, nil), 204)
	if _, err := node.Verify(ctx, mchTok.Token); baton.ErrorMessage(err) != "executor credential revoked" {
		t.Errorf("token of a deleted machine's credential: %v", err)
	}
	mustStatus(t, s.client("POST", "/v1/machines/"+mch.ID+"/token", mchCred.Secret, nil), 401)

	// The signing key is in the store: after a restart the same
	// credential still exchanges, and the new server's tokens verify with
	// the key the other node loaded before the restart.
	var cred2 secret
	admin(&cred2, "environments", "credentials", "create", env.ID)
	old := s.exchange("/v1/environments/"+env.ID+"/token", cred2.Secret)
	s.stop()
	s2 := runServer(t, s.dir, s.env)
	fresh := s2.exchange("/v1/environments/"+env.ID+"/token", cred2.Secret)
	for _, tok := range []exchanged{old, fresh} {
		if g, err := node.Verify(ctx, tok.Token); err != nil || g.CredentialID != cred2.ID {
			t.Errorf("token across a restart: %+v, %v", g, err)
		}
	}
}

func TestExecutorTokenTTLConfig(t *testing.T) {
	t.Parallel()
	for v, want := range map[string]time.Duration{"": time.Hour, "90s": 90 * time.Second, "120": 2 * time.Minute, " 2h ": 2 * time.Hour} {
		c, err := loadServeConfig(envFunc(map[string]string{"BATON_EXECUTOR_TOKEN_TTL": v}), nil)
		if err != nil || c.Executor.TokenTTL != want {
			t.Errorf("BATON_EXECUTOR_TOKEN_TTL=%q: %v, %v; want %v", v, c.Executor.TokenTTL, err, want)
		}
	}
	for _, v := range []string{"soon", "-1m", "0", "0s"} {
		code, _, stderr := runCLI(t, map[string]string{"BATON_EXECUTOR_TOKEN_TTL": v}, "--check")
		if code != exitUsage || !strings.Contains(stderr, "BATON_EXECUTOR_TOKEN_TTL") {
			t.Errorf("BATON_EXECUTOR_TOKEN_TTL=%q: exit %d, %s", v, code, stderr)
		}
	}
}
