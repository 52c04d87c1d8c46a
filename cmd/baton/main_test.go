package main

import (
	"context"
	"maps"
	"net/http"
	"testing"

	"github.com/baton-engine/baton/internal/testkit"
)

// The in-process harness is internal/testkit; what follows are the short
// names these tests call it by, with baton's command line as its Main.

// testConfig is the bae-config.toml every test server starts with.
const testConfig = `
[[providers.entries]]
name = "script"
provider = "scripted"

[[providers.entries]]
name = "claude"
provider = "anthropic"
model = "claude-test"
auth_token = "${TEST_ANTHROPIC_KEY}"
`

// batonMain runs the baton command line in-process (testkit.Main).
func batonMain(ctx context.Context, st testkit.Stdio, args []string) int {
	c := &cli{getenv: st.Getenv, stdout: st.Stdout, stderr: st.Stderr, stdin: st.Stdin, ready: st.Ready}
	return c.run(ctx, args)
}

// server is a testkit server; its fields are the testkit.Server's under
// the names these tests use.
type server struct {
	*testkit.Server
	t         testing.TB
	dir       string
	env       map[string]string
	clientURL string
	adminURL  string
	adminKey  string
	stderr    *syncBuffer
}

func wrap(t testing.TB, s *testkit.Server) *server {
	return &server{Server: s, t: t, dir: s.Dir, env: s.Env, clientURL: s.ClientURL, adminURL: s.AdminURL,
		adminKey: s.AdminKey, stderr: s.Stderr}
}

// syncBuffer is a goroutine-safe bytes.Buffer for captured logs.
type syncBuffer = testkit.SyncBuffer

// testEnv is the environment every test server adds to testkit's
// (testConfig reads it).
var testEnv = map[string]string{"TEST_ANTHROPIC_KEY": "sk-test"}

// prepare is testkit's Config.Prepare with testEnv added to cfg.Env.
func prepare(t testing.TB, cfg testkit.Config) (dir string, env map[string]string) {
	t.Helper()
	extra := maps.Clone(testEnv)
	maps.Copy(extra, cfg.Env)
	cfg.Env = extra
	return cfg.Prepare(t)
}

func envFunc(env map[string]string) func(string) string { return testkit.Getenv(env) }

// startServer runs `baton serve` in-process on testConfig and waits until
// it listens; mutate edits its environment first.
func startServer(t testing.TB, mutate ...func(env map[string]string)) *server {
	t.Helper()
	dir, env := prepare(t, testkit.Config{ConfigFile: testConfig})
	for _, m := range mutate {
		m(env)
	}
	if n := clusterNodes(); n > 1 && env["BATON_DATABASE_URL"] == "" {
		return startClusterServer(t, dir, env, n)
	}
	return runServer(t, dir, env)
}

// runServer runs `baton serve` in env, e.g. again on an earlier server's
// dir and env.
func runServer(t testing.TB, dir string, env map[string]string) *server {
	t.Helper()
	return runServerArgs(t, dir, env, "serve")
}

func runServerArgs(t testing.TB, dir string, env map[string]string, args ...string) *server {
	t.Helper()
	return wrap(t, testkit.Run(t, batonMain, dir, env, args...))
}

// stop shuts the server down gracefully and checks it exited 0.
func (s *server) stop() {
	if s.Server != nil {
		s.Stop()
	}
}

// response is a read HTTP response.
type response struct {
	status int
	header http.Header
	body   []byte
}

func fromKit(r *testkit.Response) *response {
	return &response{status: r.Status, header: r.Header, body: r.Body}
}

func (r *response) json(t testing.TB) map[string]any {
	t.Helper()
	return (&testkit.Response{Status: r.status, Header: r.header, Body: r.body}).JSON(t)
}

// call sends one request; body may be nil, a string (sent verbatim) or a
// value marshalled to JSON.
func call(t testing.TB, method, url, token string, body any) *response {
	t.Helper()
	return fromKit(testkit.Call(t, method, url, token, body))
}

// rawCall sends body verbatim with the given content type ("" for none).
func rawCall(t testing.TB, method, url, token, contentType, body string) *response {
	t.Helper()
	return fromKit(testkit.RawCall(t, method, url, token, contentType, body))
}

// mustStatus fails the test unless r has the wanted status.
func mustStatus(t testing.TB, r *response, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d, want %d; body: %s", r.status, want, r.body)
	}
}

// The helpers below work on a server value built from a child process's
// URLs and key as well (no testkit.Server then).

// admin calls the admin API with the server's admin key.
func (s *server) admin(method, path string, body any) *response {
	s.t.Helper()
	return call(s.t, method, s.adminURL+path, s.adminKey, body)
}

// client calls the client API.
func (s *server) client(method, path, token string, body any) *response {
	s.t.Helper()
	return call(s.t, method, s.clientURL+path, token, body)
}

// profile creates a profile and returns its id.
func (s *server) profile(body map[string]any) string {
	s.t.Helper()
	r := s.admin("POST", "/admin/v1/profiles", body)
	mustStatus(s.t, r, 201)
	return r.json(s.t)["id"].(string)
}

// clientKey creates a client key for profileID and returns (id, plaintext).
func (s *server) clientKey(name, profileID string) (string, string) {
	s.t.Helper()
	r := s.admin("POST", "/admin/v1/keys", map[string]any{"name": name, "profile_id": profileID})
	mustStatus(s.t, r, 201)
	m := r.json(s.t)
	return m["id"].(string), m["key"].(string)
}

// runCLI runs the baton command line in-process.
func runCLI(t testing.TB, env map[string]string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	return testkit.RunCLI(t, batonMain, env, args...)
}
