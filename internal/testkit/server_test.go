package testkit

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestConfigEnviron(t *testing.T) {
	env := Config{}.Environ("/d")
	for k, want := range map[string]string{
		"BAE_ADDR": "127.0.0.1:0", "BAE_ADMIN_ADDR": "127.0.0.1:0", "BAE_DB_PATH": "/d/bae.db",
		"BAE_CONFIG": "/d/bae-config.toml", "BAE_LOG": "debug", "BAE_ADMIN_KEY_FILE": "/d/admin-key.pem",
	} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
	if _, ok := env["BATON_DATABASE_URL"]; ok {
		t.Error("BATON_DATABASE_URL set without DatabaseURL")
	}
	env = Config{DBPath: "/x.db", DatabaseURL: "postgres://h/db", Log: "info", ClientAddr: "127.0.0.1:7",
		Env: map[string]string{"BAE_LOG": "warn", "X": "y"}}.Environ("/d")
	for k, want := range map[string]string{
		"BAE_DB_PATH": "/x.db", "BATON_DATABASE_URL": "postgres://h/db", "BAE_ADDR": "127.0.0.1:7",
		"BAE_LOG": "warn", "X": "y", // Env wins over the fields
	} {
		if env[k] != want {
			t.Errorf("%s = %q, want %q", k, env[k], want)
		}
	}
}

// fakeMain is a server command: it serves the admin key file's name on
// two loopback listeners until ctx ends, or exits 3 with "fail" in args.
func fakeMain(ctx context.Context, st Stdio, args []string) int {
	if len(args) > 0 && args[0] == "fail" {
		fmt.Fprintln(st.Stderr, "failing")
		return 3
	}
	if err := os.WriteFile(st.Getenv("BAE_ADMIN_KEY_FILE"), []byte("key-1\n"), 0o600); err != nil {
		return 1
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, `{"path":%q,"auth":%q}`, r.URL.Path, r.Header.Get("Authorization"))
	})
	a, b := httptest.NewServer(h), httptest.NewServer(h)
	defer a.Close()
	defer b.Close()
	st.Ready(a.URL, b.URL)
	<-ctx.Done()
	return 0
}

func TestStartAndCall(t *testing.T) {
	s := Start(t, fakeMain, Config{ConfigFile: "x = 1\n"})
	if b, err := os.ReadFile(filepath.Join(s.Dir, ConfigFileName)); err != nil || string(b) != "x = 1\n" {
		t.Fatalf("config file %q %v", b, err)
	}
	if s.AdminKey != "key-1" {
		t.Fatalf("admin key %q", s.AdminKey)
	}
	r := s.Admin("GET", "/admin/v1/keys", nil)
	MustStatus(t, r, 200)
	if m := r.JSON(t); m["path"] != "/admin/v1/keys" || m["auth"] != "Bearer key-1" {
		t.Fatalf("admin call saw %v", m)
	}
	if m := s.Client("POST", "/v1/x", "", map[string]any{"a": 1}).JSON(t); m["auth"] != "" || !strings.HasPrefix(s.ClientURL, "http://127.0.0.1:") {
		t.Fatalf("client call saw %v on %s", m, s.ClientURL)
	}
	s.Stop()
	s.Stop() // a second Stop does nothing
}

func TestRunCLI(t *testing.T) {
	code, _, stderr := RunCLI(t, fakeMain, nil, "fail")
	if code != 3 || stderr != "failing\n" {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}
