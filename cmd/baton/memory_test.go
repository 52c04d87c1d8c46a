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
	"sync"
	"testing"

	"github.com/baton-engine/baton/internal/testkit"
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
	t.Parallel()
	needProc(t)
	var srv *child
	var adminKey string
	if raceEnabled {
		srv, adminKey, _ = startPlainServe(t)
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

// plainBaton is a baton binary built without the race detector, once
// per test run (TestMain removes it).
var plainBaton struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// plainBatonPath builds plainBaton the first time it is asked for.
func plainBatonPath(t *testing.T) string {
	t.Helper()
	plainBaton.once.Do(func() {
		if plainBaton.dir, plainBaton.err = os.MkdirTemp("", "baton-plain-"); plainBaton.err != nil {
			return
		}
		plainBaton.path = filepath.Join(plainBaton.dir, "baton")
		out, err := exec.Command("go", "build", "-race=false", "-o", plainBaton.path, ".").CombinedOutput()
		if err != nil {
			plainBaton.err = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if plainBaton.err != nil {
		t.Fatal(plainBaton.err)
	}
	return plainBaton.path
}

// startPlainServe starts a baton binary built without the race detector
// as `baton serve` on the test config, with a profile created through the
// admin key. It returns the child, the admin key and the profile's id.
func startPlainServe(t *testing.T) (*child, string, string) {
	t.Helper()
	bin := plainBatonPath(t)
	_, env := prepare(t, testkit.Config{ConfigFile: testConfig, Log: "info"})
	srv := startServeCmd(t, exec.Command(bin, "serve"), env)
	b, err := os.ReadFile(env["BAE_ADMIN_KEY_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	adminKey := strings.TrimSpace(string(b))
	r := call(t, "POST", srv.adminURL+"/admin/v1/profiles", adminKey, map[string]any{"name": "p", "primary_provider": "script"})
	mustStatus(t, r, 201)
	return srv, adminKey, r.json(t)["id"].(string)
}

// memoryServer starts a real `baton serve` process whose memory means
// something: the test binary, or under the race detector (whose shadow
// memory swamps every figure) a binary built without it. It returns the
// child, its admin key and a client key on the scripted profile.
func memoryServer(t *testing.T) (srv *child, adminKey, clientKey string) {
	t.Helper()
	if !raceEnabled {
		srv, _, adminKey, clientKey = crashServer(t, nil)
		return srv, adminKey, clientKey
	}
	srv, adminKey, profile := startPlainServe(t)
	r := call(t, "POST", srv.adminURL+"/admin/v1/keys", adminKey, map[string]any{"name": "k", "profile_id": profile})
	mustStatus(t, r, 201)
	return srv, adminKey, r.json(t)["key"].(string)
}

// needProc skips a test that reads a child's /proc/<pid>/status where
// there is none.
func needProc(t *testing.T) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/<pid>/status")
	}
}

// vmRSS reads the resident set size of process pid, in bytes.
func vmRSS(t *testing.T, pid int) int64 { return procMem(t, pid, "VmRSS") }

// procMem reads a memory figure of /proc/<pid>/status (VmRSS, VmHWM), in
// bytes.
func procMem(t *testing.T, pid int, field string) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("%s line %q: %v", field, sc.Text(), err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
