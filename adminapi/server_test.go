package adminapi

import (
	"context"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx/httpxtest"
	"github.com/baton-engine/baton/store"
	"go.uber.org/goleak"
)

const maxBody = 4096

type fixture struct {
	db       *store.DB
	auth     *fakeAuth
	sessions *fakeSessions
	images   *fakeImages
	revoker  *fakeRevoker
	pending  map[string]time.Time // what PendingUses returns
	srv      *Server
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	db := openStore(t)
	f := &fixture{db: db, auth: &fakeAuth{}, sessions: &fakeSessions{db: db}, images: &fakeImages{}, revoker: &fakeRevoker{}}
	f.srv = New(Options{
		Addr: "127.0.0.1:0", MaxBodyBytes: maxBody,
		Auth: f.auth, Store: db, Sessions: f.sessions, Images: f.images,
		Executors: db, Revoker: f.revoker,
		PendingUses: func() map[string]time.Time { return maps.Clone(f.pending) },
		Registry: &baton.Registry{
			Providers: []baton.ProviderEntry{
				{Name: "claude", Provider: baton.ProviderAnthropic, Model: "claude-sonnet", AuthToken: "${SECRET_TOKEN}", MaxTokens: 4096},
				{Name: "gpt", Provider: baton.ProviderOpenAI, Model: "gpt-5", BaseURL: "https://proxy.example/openai", AuthToken: "sk-secret"},
			},
			MCPServers: []baton.MCPServer{
				{Name: "fs", Transport: baton.MCPStdio, Command: "npx", Args: []string{"${HIDDEN}"}},
				{Name: "web", Transport: baton.MCPHTTP, URL: "https://mcp.example", Headers: map[string]string{"Authorization": "Bearer hidden"}},
			},
		},
		RedactedConfig: map[string]any{"providers": map[string]any{"entries": []any{map[string]string{"name": "claude", "auth_token": "••••••••"}}}},
	})
	return f
}

// run runs scenarios against f's handler, resetting injected failures
// before each.
func run(t *testing.T, f *fixture, scenarios []httpxtest.Scenario) {
	t.Helper()
	httpxtest.Run(t, f.srv.Handler(), func() { f.auth.err = nil }, scenarios)
}

// admin returns headers for a JSON body with the admin token.
func admin() map[string]string { return httpxtest.JSONHeaders(adminToken) }

// do sends one authenticated request and fails the test on an unexpected
// status.
func (f *fixture) do(t *testing.T, method, path, body string, status int) string {
	t.Helper()
	rec := httpxtest.Do(f.srv.Handler(), method, path, admin(), body)
	if rec.Code != status {
		t.Fatalf("%s %s = %d %s, want %d", method, path, rec.Code, rec.Body, status)
	}
	return rec.Body.String()
}

func TestAuth(t *testing.T) {
	f := newFixture(t)
	run(t, f, []httpxtest.Scenario{
		{Name: "no header", Method: "GET", Path: "/admin/v1/providers",
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
		{Name: "not bearer", Method: "GET", Path: "/admin/v1/providers", Headers: httpxtest.Auth("Basic eDp5"),
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "Authorization header must be a Bearer token")},
		{Name: "empty token", Method: "GET", Path: "/admin/v1/providers", Headers: httpxtest.Auth("bearer "),
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "empty bearer token")},
		{Name: "unknown token", Method: "GET", Path: "/admin/v1/sessions", Headers: httpxtest.Auth("Bearer bae_admin_nope"),
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "invalid admin key")},
		{Name: "lower-case scheme", Method: "GET", Path: "/admin/v1/mcp-servers", Headers: httpxtest.Auth("bearer " + adminToken),
			Status: 200, Want: `{"items":[{"name":"fs","transport":"stdio"},{"name":"web","transport":"http"}]}`},
		{Name: "auth before body parsing", Method: "POST", Path: "/admin/v1/profiles", Headers: httpxtest.JSONHeaders(""), Body: `{`,
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
		{Name: "auth before content type", Method: "POST", Path: "/admin/v1/keys", Body: `{}`,
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
		{Name: "auth before pagination", Method: "GET", Path: "/admin/v1/keys?limit=abc",
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
		{Name: "auth before 404", Method: "DELETE", Path: "/admin/v1/profiles/pro_nope",
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
		{Name: "lookup failure", Method: "GET", Path: "/admin/v1/providers", Headers: httpxtest.Auth("Bearer " + adminToken),
			Setup:  func() { f.auth.err = errors.New("sqlite: secret.db is locked") },
			Status: 500, Check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				httpxtest.InternalDetail(t, rec, "admin authentication failed")
			}},
		// As BAE's router-wide layer: without a token nothing is found.
		{Name: "unknown route", Method: "GET", Path: "/admin/v1/nope",
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
		{Name: "no healthz", Method: "GET", Path: "/healthz",
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
		{Name: "wrong method", Method: "PATCH", Path: "/admin/v1/profiles/pro_1", Headers: httpxtest.Auth("Bearer bae_admin_nope"),
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "invalid admin key")},
		{Name: "known unknown route", Method: "GET", Path: "/admin/v1/nope", Headers: admin(), Status: 404, Empty: true},
		{Name: "known no healthz", Method: "GET", Path: "/healthz", Headers: admin(), Status: 404, Empty: true},
		{Name: "known no client routes", Method: "GET", Path: "/api/v1/meta", Headers: admin(), Status: 404, Empty: true},
		{Name: "known wrong method", Method: "PATCH", Path: "/admin/v1/profiles/pro_1", Headers: admin(), Status: 405, Empty: true},
		{Name: "known wrong method on a list", Method: "DELETE", Path: "/admin/v1/sessions", Headers: admin(), Status: 405, Empty: true},
	})
}

// With authentication disabled every route answers without a token.
func TestAuthDisabled(t *testing.T) {
	db := openStore(t)
	srv := New(Options{Addr: "127.0.0.1:0", Store: db, Sessions: &fakeSessions{db: db}})
	httpxtest.Run(t, srv.Handler(), nil, []httpxtest.Scenario{
		{Name: "providers", Method: "GET", Path: "/admin/v1/providers", Status: 200, Want: `{"items":[]}`},
		{Name: "mcp servers", Method: "GET", Path: "/admin/v1/mcp-servers", Status: 200, Want: `{"items":[]}`},
		{Name: "config", Method: "GET", Path: "/admin/v1/config", Status: 200, Want: `{}`},
		{Name: "sandbox status", Method: "GET", Path: "/admin/v1/sandbox-status", Status: 200, Want: `{"items":[]}`},
		{Name: "profiles", Method: "GET", Path: "/admin/v1/profiles", Headers: httpxtest.Auth("garbage"),
			Status: 200, Want: `{"items":[],"next_cursor":null}`},
		{Name: "create profile", Method: "POST", Path: "/admin/v1/profiles", Headers: httpxtest.JSONHeaders(""),
			Body: `{"name":"p","primary_provider":"claude","available_sandboxes":["img"]}`, Status: 201},
	})
}

func TestCheckAddr(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:8081", "127.0.0.1:0", "127.1.2.3:1", "[::1]:8081"} {
		if err := CheckAddr(addr); err != nil {
			t.Errorf("CheckAddr(%q) = %v", addr, err)
		}
	}
	for addr, msg := range map[string]string{
		"0.0.0.0:8081":          "is not a loopback address",
		"[::ffff:127.0.0.1]:80": "is not a loopback address", // as BAE: mapped is not ::1
		"[::]:8081":             "is not a loopback address",
		"10.0.0.1:8081":         "is not a loopback address",
		":8081":                 "must be an IP address",
		"localhost:8081":        "must be an IP address",
		"127.0.0.1":             "missing port",
		"127.0.0.1:http":        "invalid port",
		"127.0.0.1:70000":       "invalid port",
	} {
		if err := CheckAddr(addr); err == nil || !strings.Contains(err.Error(), msg) {
			t.Errorf("CheckAddr(%q) = %v, want %q", addr, err, msg)
		}
	}
}

func TestOpenRefusesNonLoopback(t *testing.T) {
	db := openStore(t)
	srv := New(Options{Addr: "0.0.0.0:0", Store: db})
	if err := srv.Open(context.Background()); err == nil || !strings.Contains(err.Error(), "not a loopback address") {
		srv.Close()
		t.Fatalf("Open(0.0.0.0:0) = %v", err)
	}
	if srv.URL() != "" {
		t.Errorf("URL after a refused Open = %q", srv.URL())
	}
}

// One test over a real listener on 127.0.0.1:0.
func TestListener(t *testing.T) {
	f := newFixture(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent()) // the store's goroutines end at cleanup
	ctx := context.Background()
	if err := f.srv.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer f.srv.Close()
	client := &http.Client{Transport: &http.Transport{}}
	defer client.CloseIdleConnections()
	get := func(token string) (int, string) {
		req, _ := http.NewRequest("GET", f.srv.URL()+"/admin/v1/providers", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get(""); code != 401 || !strings.Contains(body, "missing Authorization header") {
		t.Errorf("without a token: %d %s", code, body)
	}
	if code, body := get(adminToken); code != 200 || !strings.Contains(body, `"name":"claude"`) {
		t.Errorf("with a token: %d %s", code, body)
	}
	if err := f.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
}
