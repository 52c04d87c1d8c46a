package httpapi

import (
	"context"
	"errors"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
	"github.com/baton-engine/baton/internal/httpx/httpxtest"
	"github.com/google/go-cmp/cmp"
)

// fakeTokens records Issue calls and answers with err or a numbered token.
type fakeTokens struct {
	mu    sync.Mutex
	err   error
	calls []issueCall
}

type issueCall struct{ Secret, Scope, Owner string }

var tokenExpiry = time.Date(2030, 1, 2, 3, 4, 5, 678_000_000, time.UTC)

func (f *fakeTokens) Issue(_ context.Context, secret, scope, owner string) (string, *baton.ExecutorGrant, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, issueCall{secret, scope, owner})
	if f.err != nil {
		return "", nil, f.err
	}
	g := &baton.ExecutorGrant{Scope: scope, CredentialID: "ecr_1", ExpiresAt: tokenExpiry}
	return "bae_ext_" + string(rune('0'+len(f.calls))), g, nil
}

func (f *fakeTokens) Verify(context.Context, string) (*baton.ExecutorGrant, error) {
	panic("not used by the exchange")
}

func (f *fakeTokens) take() []issueCall {
	f.mu.Lock()
	defer f.mu.Unlock()
	c := f.calls
	f.calls = nil
	return c
}

func TestExecutorTokenExchange(t *testing.T) {
	db := openStore(t)
	tokens := &fakeTokens{}
	srv := New(Options{Addr: "127.0.0.1:0", MaxBodyBytes: maxBody, Auth: &fakeAuth{}, Sessions: &fakeSessions{},
		Events: db, Receipts: db, ExecutorTokens: tokens})
	const secret = "bae_exc_0123"
	const env, mch = baton.ExecutorScopeEnvironment, baton.ExecutorScopeMachine
	bearer := httpxtest.Auth("Bearer " + secret)
	envelope := func(code, msg string) string { return `{"error":{"code":"` + code + `","message":"` + msg + `"}}` }
	ok := func(n string) string { return `{"token":"bae_ext_` + n + `","expires_at":"2030-01-02T03:04:05.678Z"}` }
	noStore := func(t *testing.T, rec *httptest.ResponseRecorder) {
		if cc := rec.Header().Get("Cache-Control"); cc != "no-store" {
			t.Errorf("Cache-Control = %q, want no-store", cc)
		}
	}
	cases := []struct {
		sc   httpxtest.Scenario
		err  error
		want []issueCall
	}{
		{sc: httpxtest.Scenario{Name: "environment", Method: "POST", Path: "/v1/environments/env_1/token", Headers: bearer,
			Status: 200, Want: ok("1"), Check: noStore}, want: []issueCall{{secret, env, "env_1"}}},
		{sc: httpxtest.Scenario{Name: "machine", Method: "POST", Path: "/v1/machines/mch_1/token", Headers: bearer,
			Status: 200, Want: ok("1"), Check: noStore}, want: []issueCall{{secret, mch, "mch_1"}}},
		{sc: httpxtest.Scenario{Name: "legacy", Method: "POST", Path: "/v1/executors/token", Headers: bearer,
			Status: 200, Want: ok("1"), Check: noStore}, want: []issueCall{{secret, env, ""}}},
		{sc: httpxtest.Scenario{Name: "body is not read", Method: "POST", Path: "/v1/executors/token", Body: `{not json`,
			Headers: map[string]string{"Authorization": "Bearer " + secret, "Content-Type": "text/plain"},
			Status:  200, Want: ok("1")}, want: []issueCall{{secret, env, ""}}},
		{sc: httpxtest.Scenario{Name: "lower-case scheme", Method: "POST", Path: "/v1/machines/mch_1/token", Headers: httpxtest.Auth("bearer " + secret),
			Status: 200, Want: ok("1")}, want: []issueCall{{secret, mch, "mch_1"}}},
		{sc: httpxtest.Scenario{Name: "no header", Method: "POST", Path: "/v1/environments/env_1/token",
			Status: 401, Want: envelope("unauthorized", "missing Authorization header")}},
		{sc: httpxtest.Scenario{Name: "not bearer", Method: "POST", Path: "/v1/machines/mch_1/token", Headers: httpxtest.Auth("Basic eDp5"),
			Status: 401, Want: envelope("unauthorized", "Authorization header must be a Bearer token")}},
		{sc: httpxtest.Scenario{Name: "empty token", Method: "POST", Path: "/v1/executors/token", Headers: httpxtest.Auth("Bearer "),
			Status: 401, Want: envelope("unauthorized", "empty bearer token")}},
		{sc: httpxtest.Scenario{Name: "rejected credential", Method: "POST", Path: "/v1/environments/env_1/token", Headers: bearer,
			Status: 401, Want: envelope("unauthorized", "invalid executor credential")},
			err: baton.Errorf(baton.ECodeUnauthorized, "invalid executor credential"), want: []issueCall{{secret, env, "env_1"}}},
		{sc: httpxtest.Scenario{Name: "unknown owner", Method: "POST", Path: "/v1/machines/mch_nope/token", Headers: bearer,
			Status: 404, Want: envelope("not_found", "no machine mch_nope")},
			err: baton.Errorf(baton.ECodeNotFound, "no machine mch_nope"), want: []issueCall{{secret, mch, "mch_nope"}}},
		{sc: httpxtest.Scenario{Name: "store failure", Method: "POST", Path: "/v1/executors/token", Headers: bearer, Status: 500,
			Check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				id := rec.Header().Get(httpx.RequestIDHeader)
				if want := envelope("internal", "an internal error occurred (request id "+id+")"); id == "" || rec.Body.String() != want {
					t.Errorf("body %s, want %s", rec.Body, want)
				}
			}},
			err: errors.New("database is locked: secret detail"), want: []issueCall{{secret, env, ""}}},
		{sc: httpxtest.Scenario{Name: "wrong method", Method: "GET", Path: "/v1/environments/env_1/token", Headers: bearer, Status: 405, Empty: true}},
		{sc: httpxtest.Scenario{Name: "nested owner id", Method: "POST", Path: "/v1/environments/a/b/token", Headers: bearer, Status: 404, Empty: true}},
	}
	for _, c := range cases {
		c.sc.Setup = func() { tokens.err = c.err; tokens.take() }
		httpxtest.Run(t, srv.Handler(), nil, []httpxtest.Scenario{c.sc})
		t.Run(c.sc.Name+"/calls", func(t *testing.T) {
			if diff := cmp.Diff(c.want, tokens.take()); diff != "" {
				t.Errorf("Issue calls (-want +got):\n%s", diff)
			}
		})
	}

	// An Idempotency-Key does not make the exchange replay (nor store) a
	// token: each request gets a fresh one.
	tokens.err = nil
	h := map[string]string{"Authorization": "Bearer " + secret, "Idempotency-Key": "k1"}
	first := httpxtest.Do(srv.Handler(), "POST", "/v1/executors/token", h, "")
	second := httpxtest.Do(srv.Handler(), "POST", "/v1/executors/token", h, "")
	if first.Code != 200 || second.Code != 200 || first.Body.String() == second.Body.String() || second.Header().Get("Idempotent-Replayed") != "" {
		t.Errorf("with an Idempotency-Key: %d %s then %d %s", first.Code, first.Body, second.Code, second.Body)
	}
	if n := len(tokens.take()); n != 2 {
		t.Errorf("Issue ran %d times for two requests", n)
	}
}

// Without a token service the exchange routes do not exist.
func TestExecutorTokenExchangeOff(t *testing.T) {
	f := newFixture(t, 0)
	run(t, f, []httpxtest.Scenario{
		{Name: "environment", Method: "POST", Path: "/v1/environments/env_1/token", Headers: httpxtest.Auth("Bearer x"), Status: 404, Empty: true},
		{Name: "legacy", Method: "POST", Path: "/v1/executors/token", Headers: httpxtest.Auth("Bearer x"), Status: 404, Empty: true},
	})
}
