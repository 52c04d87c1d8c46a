// Package testkit runs the Baton command line in-process for end-to-end
// tests: a server booted on loopback :0 ports with its data in a
// temporary directory, driven over real HTTP, and one-shot commands with
// captured output.
//
// The harness cannot import the command (package main), so the command
// is injected as a Main: cmd/baton's tests pass a function that runs its
// command line with the Stdio it is given instead of the process's
// environment and streams. A server is described by a Config — the data
// directory, database, log level, listen addresses, command line, and an
// escape hatch for any other environment variable — which Environ turns
// into the environment the command reads. Nothing here reads or changes
// process-wide state (environment, working directory, umask, signals),
// so tests that use it may run in parallel: each server has its own
// ports, directory and database.
//
// Every server is stopped when its test ends, and must exit 0 then.
package testkit

import (
	"context"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Main runs a command line in-process with the given environment and
// streams and returns its exit code; cancelling ctx is the SIGTERM.
type Main func(ctx context.Context, st Stdio, args []string) int

// Stdio is what a Main gets instead of the process's environment and
// standard streams.
type Stdio struct {
	Getenv func(string) string
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	// Ready, when set, is called by a server command once both of its
	// listeners are bound.
	Ready func(clientURL, adminURL string)
}

// ConfigFileName is the name of the server's config file in its data
// directory (BAE_CONFIG).
const ConfigFileName = "bae-config.toml"

// Config describes a test server. The zero value is a SQLite server on
// 127.0.0.1:0 with its data in a fresh temporary directory, logging at
// debug, running `serve`.
type Config struct {
	// Dir holds the database, the admin key files and the config file;
	// t.TempDir() when empty.
	Dir string
	// ConfigFile, when set, is written to Dir/bae-config.toml.
	ConfigFile string
	// DBPath is the SQLite database (BAE_DB_PATH); Dir/bae.db when empty.
	DBPath string
	// DatabaseURL, when set, is a postgres:// URL (BATON_DATABASE_URL).
	DatabaseURL string
	// Log is the log level (BAE_LOG); "debug" when empty.
	Log string
	// ClientAddr and AdminAddr are the listen addresses (BAE_ADDR,
	// BAE_ADMIN_ADDR); 127.0.0.1:0 when empty.
	ClientAddr, AdminAddr string
	// Env is any other environment; it is applied last, so it overrides
	// the fields above.
	Env map[string]string
	// Args is the command line; {"serve"} when empty.
	Args []string
}

// Environ is the environment cfg describes, with its data in dir (which
// Prepare and Start fill in from cfg.Dir or t.TempDir()).
func (cfg Config) Environ(dir string) map[string]string {
	env := map[string]string{
		"BAE_ADDR":                or(cfg.ClientAddr, "127.0.0.1:0"),
		"BAE_ADMIN_ADDR":          or(cfg.AdminAddr, "127.0.0.1:0"),
		"BAE_DB_PATH":             or(cfg.DBPath, filepath.Join(dir, "bae.db")),
		"BAE_ADMIN_KEY_FILE":      filepath.Join(dir, "admin-key.pem"),
		"BAE_ADMIN_KEY_HASH_FILE": filepath.Join(dir, "admin-key-hash.pem"),
		"BAE_CONFIG":              filepath.Join(dir, ConfigFileName),
		"BAE_LOG":                 or(cfg.Log, "debug"),
	}
	if cfg.DatabaseURL != "" {
		env["BATON_DATABASE_URL"] = cfg.DatabaseURL
	}
	maps.Copy(env, cfg.Env)
	return env
}

// Prepare makes cfg's data directory ready — a temporary one when
// cfg.Dir is empty, with cfg.ConfigFile written into it — and returns it
// with the environment of a server there.
func (cfg Config) Prepare(t testing.TB) (dir string, env map[string]string) {
	t.Helper()
	dir = cfg.Dir
	if dir == "" {
		dir = t.TempDir()
	}
	if cfg.ConfigFile != "" {
		if err := os.WriteFile(filepath.Join(dir, ConfigFileName), []byte(cfg.ConfigFile), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, cfg.Environ(dir)
}

func or(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

// Server is a server command running in-process on loopback ports.
type Server struct {
	Dir       string            // its data directory
	Env       map[string]string // the environment it was started with
	ClientURL string            // http://host:port of the client port
	AdminURL  string            // http://host:port of the admin port
	AdminKey  string            // the admin key it wrote at bootstrap, if any
	Stderr    *SyncBuffer       // its log

	t      testing.TB
	cancel context.CancelFunc
	done   chan int
}

// Start prepares cfg (see Prepare) and runs main with it until the test
// ends; it returns once the server listens.
func Start(t testing.TB, main Main, cfg Config) *Server {
	t.Helper()
	dir, env := cfg.Prepare(t)
	args := cfg.Args
	if len(args) == 0 {
		args = []string{"serve"}
	}
	return Run(t, main, dir, env, args...)
}

// Run runs main with args in env — the environment of a server with its
// data in dir, e.g. an earlier server's Dir and Env to restart it on the
// same database — and returns once it listens. The test fails if the
// command exits before.
func Run(t testing.TB, main Main, dir string, env map[string]string, args ...string) *Server {
	t.Helper()
	s := &Server{t: t, Dir: dir, Env: env, Stderr: &SyncBuffer{}, done: make(chan int, 1)}
	ready := make(chan [2]string, 1)
	st := Stdio{
		Getenv: Getenv(env), Stdin: strings.NewReader(""), Stdout: io.Discard, Stderr: s.Stderr,
		Ready: func(client, admin string) { ready <- [2]string{client, admin} },
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go func() { s.done <- main(ctx, st, args) }()
	select {
	case urls := <-ready:
		s.ClientURL, s.AdminURL = urls[0], urls[1]
	case code := <-s.done:
		cancel()
		t.Fatalf("server exited with %d before listening:\n%s", code, s.Stderr.String())
	}
	if b, err := os.ReadFile(env["BAE_ADMIN_KEY_FILE"]); err == nil {
		s.AdminKey = strings.TrimSpace(string(b))
	}
	t.Cleanup(s.Stop)
	return s
}

// Stop shuts the server down gracefully (its SIGTERM) and fails the test
// unless it exits 0. Later calls do nothing.
func (s *Server) Stop() {
	if s.cancel == nil {
		return
	}
	s.cancel()
	s.cancel = nil
	if code := <-s.done; code != 0 {
		s.t.Errorf("server exit code %d:\n%s", code, s.Stderr.String())
	}
}

// Admin calls the admin API with the server's admin key.
func (s *Server) Admin(method, path string, body any) *Response {
	s.t.Helper()
	return Call(s.t, method, s.AdminURL+path, s.AdminKey, body)
}

// Client calls the client API with token ("" for none).
func (s *Server) Client(method, path, token string, body any) *Response {
	s.t.Helper()
	return Call(s.t, method, s.ClientURL+path, token, body)
}

// Profile creates a profile through the admin API and returns its id.
func (s *Server) Profile(body map[string]any) string {
	s.t.Helper()
	r := s.Admin("POST", "/admin/v1/profiles", body)
	MustStatus(s.t, r, 201)
	return r.JSON(s.t)["id"].(string)
}

// ClientKey creates a client key named name for profileID and returns
// its id and plaintext.
func (s *Server) ClientKey(name, profileID string) (id, key string) {
	s.t.Helper()
	r := s.Admin("POST", "/admin/v1/keys", map[string]any{"name": name, "profile_id": profileID})
	MustStatus(s.t, r, 201)
	m := r.JSON(s.t)
	return m["id"].(string), m["key"].(string)
}
