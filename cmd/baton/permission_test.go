//go:build unix

package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/baton-engine/baton/client/executor/executortest"
	"github.com/baton-engine/baton/internal/testkit"
)

// looseDataDir returns the environment of a server whose data directory
// (mode 0755) holds a migrated database of mode 0644, as an older Baton
// left them under umask 022.
func looseDataDir(t *testing.T) (env map[string]string, dir, db string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	_, env = prepare(t, testkit.Config{Dir: dir, ConfigFile: testConfig})
	db = env["BAE_DB_PATH"]
	if code, _, errOut := runCLI(t, env, "migrate"); code != 0 {
		t.Fatalf("migrate: exit %d: %s", code, errOut)
	}
	for p, m := range map[string]os.FileMode{dir: 0o755, db: 0o644} {
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
	}
	return env, dir, db
}

func wantMode(t *testing.T, path string, want os.FileMode) {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := st.Mode().Perm(); got != want {
		t.Errorf("%s has mode %04o, want %04o", path, got, want)
	}
}

// TestServeWarnsAboutLooseDataFiles: a server started on a readable data
// directory and database logs a warning naming each path and the chmod
// that fixes it, and changes no mode itself.
func TestServeWarnsAboutLooseDataFiles(t *testing.T) {
	t.Parallel()
	env, dir, db := looseDataDir(t)
	s := runServer(t, dir, env)
	s.stop()
	log := s.stderr.String()
	for _, want := range []string{
		`level=WARN msg="data directory is accessible to other users" path=` + dir + ` mode=0755 fix="chmod 700 ` + dir + `"`,
		`level=WARN msg="data file is accessible to other users" path=` + db + ` mode=0644 fix="chmod 600 ` + db + `"`,
		// SQLite gave the WAL the database's mode.
		`level=WARN msg="data file is accessible to other users" path=` + db + `-wal mode=0644 fix="chmod 600 ` + db + `-wal"`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s\n%s", want, log)
		}
	}
	if strings.Contains(log, "admin-key.pem mode=") {
		t.Errorf("the admin key file, written 0600, was reported:\n%s", log)
	}
	wantMode(t, dir, 0o755)
	wantMode(t, db, 0o644)
}

// TestServeCheckWarnsAboutLooseDataFiles: `serve --check` reports the same
// findings as warnings and still exits 0.
func TestServeCheckWarnsAboutLooseDataFiles(t *testing.T) {
	t.Parallel()
	env, dir, db := looseDataDir(t)
	if err := os.WriteFile(env["BAE_ADMIN_KEY_FILE"], []byte("bae_adm_x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(env["BAE_ADMIN_KEY_FILE"], 0o640); err != nil {
		t.Fatal(err)
	}
	code, out, errOut := runCLI(t, env, "serve", "--check")
	if code != 0 || !strings.Contains(out, "configuration ok") {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	key := env["BAE_ADMIN_KEY_FILE"]
	for _, want := range []string{
		"warning: data directory " + dir + " is accessible to other users (mode 0755); fix: chmod 700 " + dir + "\n",
		"warning: data file " + db + " is accessible to other users (mode 0644); fix: chmod 600 " + db + "\n",
		"warning: data file " + key + " is accessible to other users (mode 0640); fix: chmod 600 " + key + "\n",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	wantMode(t, dir, 0o755)
	wantMode(t, db, 0o644)
}

// TestServeQuietOnPrivateDataFiles: a fresh server, whose data directory
// it creates, reports nothing, nor does --check on what it created.
func TestServeQuietOnPrivateDataFiles(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "it checks the SQLite data files")
	s := startServer(t, func(env map[string]string) {
		env["BAE_DB_PATH"] = filepath.Join(filepath.Dir(env["BAE_DB_PATH"]), "data", "bae.db")
	})
	wantMode(t, filepath.Dir(s.env["BAE_DB_PATH"]), 0o700)
	s.stop()
	if log := s.stderr.String(); strings.Contains(log, "accessible to other users") {
		t.Errorf("fresh server warned:\n%s", log)
	}
	wantMode(t, s.env["BAE_DB_PATH"], 0o600)
	if _, _, errOut := runCLI(t, s.env, "--check"); strings.Contains(errOut, "warning:") {
		t.Errorf("--check warned on a fresh server's files:\n%s", errOut)
	}
}

// TestExecutorCmdCreatesPrivateWorkDir: a missing --work-dir is created
// 0700 (commands, synced files and sandbox state live there).
func TestExecutorCmdCreatesPrivateWorkDir(t *testing.T) {
	t.Parallel()
	h := executortest.New(t)
	cfg := writeFile(t, filepath.Join(t.TempDir(), "executor.toml"), e2eTools)
	work := filepath.Join(t.TempDir(), "work")
	const wrong = "bae_exc_ffffffffffffffffffffffffffffffffffffffffffffffff"
	run := runExecutorCmd(t, map[string]string{envExecutorCredential: wrong}, "--url", h.URL(), "--environment", "env_e2e", "--config", cfg, "--work-dir", work)
	if code := run.exit(t); code != exitRuntime {
		t.Fatalf("exit code %d, want %d:\n%s", code, exitRuntime, run.stderr.String())
	}
	wantMode(t, work, 0o700)
}

func TestShellQuote(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/var/lib/bae/bae.db": "/var/lib/bae/bae.db",
		"/d/my data/x.db":     "'/d/my data/x.db'",
		"/d/it's":             `'/d/it'\''s'`,
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}
