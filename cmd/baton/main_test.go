package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

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

// server is a Baton server running in-process on loopback :0 ports.
type server struct {
	t         testing.TB
	dir       string
	env       map[string]string
	clientURL string
	adminURL  string
	adminKey  string
	stderr    *syncBuffer
	cancel    context.CancelFunc
	done      chan int
}

// syncBuffer is a goroutine-safe bytes.Buffer for captured logs.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// baseEnv is the environment of a test server with its data in dir.
func baseEnv(dir string) map[string]string {
	return map[string]string{
		"BAE_ADDR":                "127.0.0.1:0",
		"BAE_ADMIN_ADDR":          "127.0.0.1:0",
		"BAE_DB_PATH":             filepath.Join(dir, "bae.db"),
		"BAE_ADMIN_KEY_FILE":      filepath.Join(dir, "admin-key.pem"),
		"BAE_ADMIN_KEY_HASH_FILE": filepath.Join(dir, "admin-key-hash.pem"),
		"BAE_CONFIG":              filepath.Join(dir, "bae-config.toml"),
		"BAE_LOG":                 "debug",
		"TEST_ANTHROPIC_KEY":      "sk-test",
	}
}

func envFunc(env map[string]string) func(string) string {
	return func(k string) string { return env[k] }
}

// startServer runs `baton serve` in-process and waits until it listens.
func startServer(t testing.TB, mutate ...func(env map[string]string)) *server {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "bae-config.toml"), []byte(testConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	env := baseEnv(dir)
	for _, m := range mutate {
		m(env)
	}
	return runServer(t, dir, env)
}

func runServer(t testing.TB, dir string, env map[string]string) *server {
	t.Helper()
	return runServerArgs(t, dir, env, "serve")
}

func runServerArgs(t testing.TB, dir string, env map[string]string, args ...string) *server {
	t.Helper()
	s := &server{t: t, dir: dir, env: env, stderr: &syncBuffer{}, done: make(chan int, 1)}
	ready := make(chan [2]string, 1)
	c := &cli{
		getenv: envFunc(env), stdout: io.Discard, stderr: s.stderr, stdin: strings.NewReader(""),
		ready: func(client, admin string) { ready <- [2]string{client, admin} },
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { s.done <- c.run(ctx, args) }()
	select {
	case urls := <-ready:
		s.clientURL, s.adminURL = urls[0], urls[1]
	case code := <-s.done:
		cancel()
		t.Fatalf("server exited with %d before listening:\n%s", code, s.stderr.String())
	}
	if b, err := os.ReadFile(env["BAE_ADMIN_KEY_FILE"]); err == nil {
		s.adminKey = strings.TrimSpace(string(b))
	}
	t.Cleanup(func() { s.stop() })
	return s
}

// stop shuts the server down gracefully and checks it exited 0.
func (s *server) stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	if code := <-s.done; code != 0 {
		s.t.Errorf("server exit code %d:\n%s", code, s.stderr.String())
	}
}

// response is a decoded HTTP response.
type response struct {
	status int
	header http.Header
	body   []byte
}

func (r *response) json(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.body, &m); err != nil {
		t.Fatalf("response %d is not a JSON object: %v\n%s", r.status, err, r.body)
	}
	return m
}

// call sends one request; body may be nil, a string (sent verbatim) or a
// value marshalled to JSON.
func call(t testing.TB, method, url, token string, body any) *response {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return &response{status: resp.StatusCode, header: resp.Header, body: b}
}

// mustStatus fails the test unless r has the wanted status.
func mustStatus(t testing.TB, r *response, want int) {
	t.Helper()
	if r.status != want {
		t.Fatalf("status %d, want %d; body: %s", r.status, want, r.body)
	}
}

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
	var out, errb bytes.Buffer
	c := &cli{getenv: envFunc(env), stdout: &out, stderr: &errb, stdin: strings.NewReader("")}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	code = c.run(ctx, args)
	return code, out.String(), errb.String()
}

// rawCall sends body verbatim with the given content type ("" for none).
func rawCall(t testing.TB, method, url, token, contentType, body string) *response {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return &response{status: resp.StatusCode, header: resp.Header, body: b}
}
