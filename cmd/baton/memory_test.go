package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// maxIdleRSS is the resident memory an idle `baton serve` may keep after
// it has verified its admin key.
const maxIdleRSS = 40 << 20

// TestIdleServeMemory starts a real `baton serve`, which hashes its admin
// key at bootstrap, makes a few admin requests with that key (each
// verification is an Argon2id derivation over 64 MiB, as BAE's
// parameters require), and checks the process then sits within
// maxIdleRSS: the derivations' buffers must not stay resident. Under the
// race detector, whose shadow memory alone exceeds the budget, the child
// is a baton binary built without it.
func TestIdleServeMemory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/<pid>/status")
	}
	var srv *child
	var adminKey string
	if raceEnabled {
		srv, adminKey = startPlainServe(t)
	} else {
		srv, _, adminKey, _ = crashServer(t, nil) // the test binary as baton serve
	}
	for range 3 {
		mustStatus(t, call(t, "GET", srv.adminURL+"/admin/v1/keys", adminKey, nil), 200)
		mustStatus(t, call(t, "GET", srv.adminURL+"/admin/v1/sessions", adminKey, nil), 200)
	}
	rss := vmRSS(t, srv.cmd.Process.Pid)
	t.Logf("idle VmRSS %.1f MiB", float64(rss)/(1<<20))
	if rss > maxIdleRSS {
		t.Fatalf("idle baton serve holds %.1f MiB resident, want at most %d MiB", float64(rss)/(1<<20), maxIdleRSS>>20)
	}
}

// startPlainServe builds baton without the race detector and starts it
// as `baton serve` on the test config, with a profile created through the
// admin key. It returns the child and the admin key.
func startPlainServe(t *testing.T) (*child, string) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "baton")
	build := exec.Command("go", "build", "-race=false", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.WriteFile(filepath.Join(dir, "bae-config.toml"), []byte(testConfig), 0o600); err != nil {
		t.Fatal(err)
	}
	env := baseEnv(dir)
	env["BAE_LOG"] = "info"
	srv := startServeCmd(t, exec.Command(bin, "serve"), env)
	b, err := os.ReadFile(env["BAE_ADMIN_KEY_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	adminKey := strings.TrimSpace(string(b))
	mustStatus(t, call(t, "POST", srv.adminURL+"/admin/v1/profiles", adminKey, map[string]any{"name": "p", "primary_provider": "script"}), 201)
	return srv, adminKey
}

// vmRSS reads the resident set size of process pid, in bytes.
func vmRSS(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS line %q: %v", sc.Text(), err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}
