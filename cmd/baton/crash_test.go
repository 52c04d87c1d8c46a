package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/baton-engine/baton/internal/supervisor"
	"github.com/baton-engine/baton/internal/testkit"
	"github.com/baton-engine/baton/mcp/mcptest"
	"github.com/baton-engine/baton/sandbox"
)

// TestMain lets the test binary act as the baton binary when re-executed
// by a crash test, so those tests kill a real process without a build step.
func TestMain(m *testing.M) {
	// The process driver's sandbox jails run here.
	sandbox.Reexec()
	supervisor.Reexec()                     // and the supervisors of commands
	if os.Getenv(mcptest.EnvServe) == "1" { // the MCP tests' stdio server
		mcptest.ServeStdio()
		return
	}
	if os.Getenv("BATON_TEST_RUN_MAIN") == "1" {
		os.Args = append([]string{"baton"}, strings.Fields(os.Getenv("BATON_TEST_ARGS"))...)
		main()
		return
	}
	code := m.Run()
	if plainBaton.dir != "" {
		os.RemoveAll(plainBaton.dir)
	}
	os.Exit(code)
}

// child is a baton server running as a separate process.
type child struct {
	cmd       *exec.Cmd
	clientURL string
	adminURL  string
}

var listenRE = regexp.MustCompile(`baton listening"? client_url=(\S+) admin_url=(\S+)`)

// startChild starts the test binary as `baton serve` with env and waits for
// its "listening" log line.
func startChild(t *testing.T, env map[string]string) *child {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "BATON_TEST_RUN_MAIN=1", "BATON_TEST_ARGS=serve")
	return startServeCmd(t, cmd, env)
}

// startServeCmd starts cmd, a `baton serve`, with env added to its environment
// and waits for its "listening" log line.
func startServeCmd(t *testing.T, cmd *exec.Cmd, env map[string]string) *child {
	t.Helper()
	if cmd.Env == nil {
		cmd.Env = os.Environ()
	}
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd}
	t.Cleanup(func() { c.kill() })
	// A child that never gets to listen is killed, which ends the scan.
	guard := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
	defer guard.Stop()
	sc := bufio.NewScanner(stderr)
	var seen []string
	for sc.Scan() {
		line := sc.Text()
		seen = append(seen, line)
		if m := listenRE.FindStringSubmatch(line); m != nil {
			c.clientURL, c.adminURL = m[1], m[2]
			break
		}
	}
	if c.clientURL == "" {
		t.Fatalf("child exited before listening:\n%s", strings.Join(seen, "\n"))
	}
	go func() { // keep draining so the child never blocks on a full pipe
		for sc.Scan() {
		}
	}()
	return c
}

// crashServer starts a child server on the test config (env plus extra)
// with a profile on the scripted provider and a client key for it. It
// returns the child, the env that restarts it on the same data, the admin
// key and the client key.
func crashServer(t *testing.T, extra map[string]string) (srv *child, env map[string]string, adminKey, clientKey string) {
	t.Helper()
	_, env = prepare(t, testkit.Config{ConfigFile: testConfig, Log: "info", Env: extra})
	srv = startChild(t, env)
	b, err := os.ReadFile(env["BAE_ADMIN_KEY_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	adminKey = strings.TrimSpace(string(b))
	r := call(t, "POST", srv.adminURL+"/admin/v1/profiles", adminKey, map[string]any{"name": "p", "primary_provider": "script"})
	mustStatus(t, r, 201)
	r = call(t, "POST", srv.adminURL+"/admin/v1/keys", adminKey, map[string]any{"name": "k", "profile_id": r.json(t)["id"]})
	mustStatus(t, r, 201)
	return srv, env, adminKey, r.json(t)["key"].(string)
}

func (c *child) kill() {
	if c.cmd.ProcessState == nil {
		c.cmd.Process.Signal(syscall.SIGKILL)
		c.cmd.Wait()
	}
}

// TestCrashKeepsAcknowledgedEvents kills the server with SIGKILL while 100
// sessions are being written to, restarts it, and checks that every event
// the server acknowledged (a 201 was received) survived.
func TestCrashKeepsAcknowledgedEvents(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("crash test starts real processes")
	}
	srv, env, adminKey, key := crashServer(t, nil)

	const sessions, target = 100, 3000
	var (
		mu     sync.Mutex
		acked  = map[string]int{} // session id → acknowledged join count
		total  int
		killed = make(chan struct{})
		wg     sync.WaitGroup
	)
	hc := &http.Client{}
	post := func(ctx context.Context, url string) (string, bool) {
		req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(`{}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := hc.Do(req)
		if err != nil {
			return "", false
		}
		defer resp.Body.Close()
		var m struct {
			SessionID string `json:"session_id"`
		}
		if resp.StatusCode != 201 || json.NewDecoder(resp.Body).Decode(&m) != nil {
			return "", false
		}
		return m.SessionID, true
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var once sync.Once
	for i := 0; i < sessions; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sid, ok := post(ctx, srv.clientURL+"/api/v1/sessions")
			if !ok {
				return
			}
			mu.Lock()
			acked[sid] = 0
			mu.Unlock()
			for {
				if _, ok := post(ctx, srv.clientURL+"/api/v1/sessions/"+sid+"/join"); !ok {
					return
				}
				mu.Lock()
				acked[sid]++
				total++
				reached := total >= target
				mu.Unlock()
				if reached {
					once.Do(func() {
						srv.kill()
						close(killed)
					})
				}
			}
		}()
	}
	<-killed
	wg.Wait()
	cancel()

	srv2 := startChild(t, env)
	mu.Lock()
	defer mu.Unlock()
	if len(acked) != sessions {
		t.Fatalf("only %d of %d sessions opened before the crash", len(acked), sessions)
	}
	for sid, joins := range acked {
		n := 0
		cursor := ""
		for {
			r := call(t, "GET", fmt.Sprintf("%s/admin/v1/sessions/%s/events?limit=200&cursor=%s", srv2.adminURL, sid, cursor), adminKey, nil)
			mustStatus(t, r, 200)
			var page struct {
				Items []struct {
					EventType string `json:"event_type"`
				} `json:"items"`
				Next *string `json:"next_cursor"`
			}
			if err := json.Unmarshal(r.body, &page); err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				if it.EventType == "session.join" {
					n++
				}
			}
			if page.Next == nil {
				break
			}
			cursor = *page.Next
		}
		if n < joins {
			t.Errorf("session %s: %d join events after restart, %d were acknowledged", sid, n, joins)
		}
	}
}
