package main

import (
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"testing"
)

func TestCommandLineExitCodes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badToml := filepath.Join(dir, "bad.toml")
	os.WriteFile(badToml, []byte("[providers]\nentries = [\n"), 0o600)
	dupToml := filepath.Join(dir, "dup.toml")
	os.WriteFile(dupToml, []byte("[[mcp.servers]]\nname=\"a\"\ntransport=\"stdio\"\ncommand=\"x\"\n[[mcp.servers]]\nname=\"a\"\ntransport=\"stdio\"\ncommand=\"y\"\n"), 0o600)
	goodToml := filepath.Join(dir, "good.toml")
	os.WriteFile(goodToml, []byte(testConfig), 0o600)

	tests := []struct {
		name    string
		env     map[string]string
		args    []string
		code    int
		stdout  string
		stderrs string
	}{
		{"version", nil, []string{"version"}, 0, "api versions: v1", ""},
		{"unknown subcommand", nil, []string{"frobnicate"}, 2, "", "unknown command"},
		{"bad addr", map[string]string{"BAE_ADDR": "localhost:80"}, []string{"serve", "--check"}, 2, "", "BAE_ADDR"},
		{"admin not loopback", map[string]string{"BAE_ADMIN_ADDR": "0.0.0.0:8081"}, []string{"--check"}, 2, "", "is not a loopback address"},
		{"admin mapped loopback", map[string]string{"BAE_ADMIN_ADDR": "[::ffff:127.0.0.1]:8081"}, []string{"--check"}, 2, "", "is not a loopback address"},
		{"empty config flag", nil, []string{"serve", "--config=", "--check"}, 2, "", "--config needs a path"},
		{"empty key file flag", nil, []string{"--admin-key-file=", "--check"}, 2, "", "--admin-key-file needs a path"},
		{"migrate check", map[string]string{"BAE_DB_PATH": "/nonexistent/dir/bae.db"}, []string{"migrate", "--check"}, 0, "configuration ok", ""},
		{"-V", nil, []string{"-V"}, 0, "baton ", ""},
		{"bad public url", map[string]string{"BATON_PUBLIC_URL": "ftp://x"}, []string{"--check"}, 2, "", "BATON_PUBLIC_URL"},
		{"admin hostname", map[string]string{"BAE_ADMIN_ADDR": "localhost:8081"}, []string{"--check"}, 2, "", "BAE_ADMIN_ADDR"},
		{"bad shutdown timeout", map[string]string{"BAE_SHUTDOWN_TIMEOUT": "-1"}, []string{"--check"}, 2, "", "BAE_SHUTDOWN_TIMEOUT"},
		{"bad turn timeout", map[string]string{"BAE_TURN_TIMEOUT": "soon"}, []string{"--check"}, 2, "", "BAE_TURN_TIMEOUT"},
		{"apple container", map[string]string{"BAE_SANDBOX_DRIVER": "apple-container"}, []string{"--check"}, 2, "", "apple-container"},
		{"unknown driver", map[string]string{"BAE_SANDBOX_DRIVER": "podman"}, []string{"--check"}, 2, "", "BAE_SANDBOX_DRIVER"},
		{"rotate with disabled auth", map[string]string{"BAE_DANGEROUSLY_DISABLE_ADMIN_AUTH": "TRUE"}, []string{"serve", "--rotate-admin-key", "--check"}, 2, "", "--rotate-admin-key"},
		{"sqlite url in database url", map[string]string{"BATON_DATABASE_URL": "/tmp/x.db"}, []string{"--check"}, 2, "", "BATON_DATABASE_URL"},
		{"toml syntax error has position", nil, []string{"--config", badToml, "--check"}, 2, "", "bae-config.toml:"},
		{"duplicate mcp name", map[string]string{"BAE_CONFIG": dupToml}, []string{"serve", "--check"}, 2, "", "duplicate"},
		{"check ok, flag after subcommand", nil, []string{"serve", "--config=" + goodToml, "--check"}, 0, "configuration ok: 2 provider(s)", ""},
		{"check ok, flag before subcommand", nil, []string{"--config", goodToml, "serve", "--check"}, 0, "configuration ok", ""},
		{"missing config file is empty config", map[string]string{"BAE_CONFIG": filepath.Join(dir, "none.toml")}, []string{"--check"}, 0, "0 provider(s)", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errOut := runCLI(t, tc.env, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
			if !strings.Contains(out, tc.stdout) {
				t.Errorf("stdout %q does not contain %q", out, tc.stdout)
			}
			if !strings.Contains(errOut, tc.stderrs) {
				t.Errorf("stderr %q does not contain %q", errOut, tc.stderrs)
			}
		})
	}
}

func TestMigrate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	db := filepath.Join(dir, "sub", "bae.db")
	code, out, errOut := runCLI(t, map[string]string{"BAE_DB_PATH": db}, "migrate")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if want := "migrations up to date at " + db; !strings.Contains(out, want) {
		t.Fatalf("stdout %q, want %q", out, want)
	}
	if _, err := os.Stat(db); err != nil {
		t.Fatalf("database not created: %v", err)
	}
}

func TestAdminKeyFileBootstrapAndRotation(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	fi, err := os.Stat(s.env["BAE_ADMIN_KEY_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin key file mode %v, want 0600", fi.Mode().Perm())
	}
	if !strings.HasPrefix(s.adminKey, "bae_admin_") || len(s.adminKey) != 58 {
		t.Fatalf("admin key %q has the wrong shape", s.adminKey)
	}
	mustStatus(t, s.admin("GET", "/admin/v1/profiles", nil), 200)
	old := s.adminKey
	s.stop()

	// A restart keeps the key; a rotation replaces it and the old one stops working.
	s2 := runServer(t, s.dir, s.env)
	if s2.adminKey != old {
		t.Fatalf("restart changed the admin key")
	}
	s2.stop()
	env := map[string]string{}
	for k, v := range s.env {
		env[k] = v
	}
	s3 := runServerArgs(t, s.dir, env, "serve", "--rotate-admin-key")
	if s3.adminKey == old || s3.adminKey == "" {
		t.Fatalf("rotation kept the old key")
	}
	mustStatus(t, call(t, "GET", s3.adminURL+"/admin/v1/profiles", old, nil), 401)
	mustStatus(t, s3.admin("GET", "/admin/v1/profiles", nil), 200)
}

func TestDisabledAdminAuth(t *testing.T) {
	t.Parallel()
	s := startServer(t, func(env map[string]string) { env["BAE_DANGEROUSLY_DISABLE_ADMIN_AUTH"] = "1" })
	mustStatus(t, call(t, "GET", s.adminURL+"/admin/v1/profiles", "", nil), 200)
	if !strings.Contains(s.stderr.String(), "admin API authentication is DISABLED") {
		t.Fatalf("no warning logged:\n%s", s.stderr.String())
	}
	if _, err := os.Stat(s.env["BAE_ADMIN_KEY_FILE"]); err == nil {
		t.Fatalf("an admin key file was written with auth disabled")
	}
}

// TestTuneGC: the server raises the GC target unless GOGC is set.
func TestTuneGC(t *testing.T) {
	t.Parallel()
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	tuneGC(func(string) string { return "" })
	if got := debug.SetGCPercent(100); got != gcPercent {
		t.Errorf("GC percent %d without GOGC, want %d", got, gcPercent)
	}
	tuneGC(func(k string) string {
		if k == "GOGC" {
			return "50"
		}
		return ""
	})
	if got := debug.SetGCPercent(100); got != 100 {
		t.Errorf("GC percent %d with GOGC set, want it left alone (100)", got)
	}
}
