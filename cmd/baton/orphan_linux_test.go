package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/baton-engine/baton/client"
	"github.com/baton-engine/baton/client/executor"
	"github.com/baton-engine/baton/client/executor/executortest"
	"github.com/baton-engine/baton/internal/testkit"
	"github.com/baton-engine/baton/mcp/mcptest"
)

// A command that leaves a grandchild: the shell waits for a background
// sleep and names it in the FIFO pid.
const forkScript = "sleep 300 & echo $! > pid; wait"

// procTree is a snapshot of a process's descendants, each held by a pidfd
// (so that a reused pid is never mistaken for it).
type procTree struct {
	pids map[int]int // pid → pidfd
	cmds map[int]string
}

// descendants returns the processes below root now. A test registers it
// for cleanup, so that whatever survives a failing run is killed.
func descendants(t *testing.T, root int) *procTree {
	t.Helper()
	parent := map[int]int{}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …; comm may hold spaces and parentheses.
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) > 1 {
			parent[pid], _ = strconv.Atoi(f[1])
		}
	}
	tr := &procTree{pids: map[int]int{}, cmds: map[int]string{}}
	t.Cleanup(tr.kill)
	for pid := range parent {
		for p := parent[pid]; p > 1; p = parent[p] {
			if p != root {
				continue
			}
			fd, err := unix.PidfdOpen(pid, 0)
			if err != nil {
				break // gone already
			}
			tr.pids[pid] = fd
			cmd, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "cmdline"))
			tr.cmds[pid] = strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
			break
		}
	}
	return tr
}

// has reports whether the tree holds a process whose command line starts
// with prefix.
func (tr *procTree) has(prefix string) bool {
	for _, c := range tr.cmds {
		if strings.HasPrefix(c, prefix) {
			return true
		}
	}
	return false
}

// mustDie fails unless every process of the tree ends (exits or is
// killed; a zombie counts) within executortest.Patience.
func (tr *procTree) mustDie(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(executortest.Patience)
	for pid, fd := range tr.pids {
		// A pidfd polls readable once its process has ended.
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, max(int(time.Until(deadline).Milliseconds()), 1))
		if errors.Is(err, unix.EINTR) {
			n, err = unix.Poll(fds, max(int(time.Until(deadline).Milliseconds()), 1))
		}
		if err != nil || n != 1 {
			t.Errorf("process %d (%s) outlived its baton (poll %d, %v)", pid, tr.cmds[pid], n, err)
		}
	}
}

// kill ends whatever is left of the tree and releases the pidfds.
func (tr *procTree) kill() {
	for _, fd := range tr.pids {
		unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	}
	tr.release()
}

// release closes the pidfds, leaving the processes alone.
func (tr *procTree) release() {
	for _, fd := range tr.pids {
		unix.Close(fd)
	}
	tr.pids = nil
}

// startBaton runs the test binary as baton with args in a process of its
// own (see TestMain), its stderr watched.
func startBaton(t *testing.T, env map[string]string, args ...string) (*exec.Cmd, *logWatch) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), "BATON_TEST_RUN_MAIN=1", "BATON_TEST_ARGS="+strings.Join(args, " "))
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stderr := &logWatch{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("baton's stderr:\n%s", stderr)
		}
	})
	return cmd, stderr
}

// killBaton kills baton with SIGKILL and reaps it.
func killBaton(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
}

// TestExecutorCmdDeathKillsCommands kills a real `baton executor` with
// SIGKILL while a tool command, a process.exec shell and a CLI agent each
// run a shell with a background grandchild: all of them die with it.
func TestExecutorCmdDeathKillsCommands(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, mode, id, config string
		start                  func(t *testing.T, c *executortest.Conn, h *executortest.Harness)
	}{
		{"tool", "--environment", "env_orphan", "[[tools]]\nname = \"fork\"\ncommand = \"" + forkScript + "\"\n",
			func(t *testing.T, c *executortest.Conn, _ *executortest.Harness) {
				sendToolCall(t, c, "ses_1", "call_1", "fork", nil)
			}},
		{"shell", "--machine", "mch_orphan", "[process]\n",
			func(t *testing.T, c *executortest.Conn, _ *executortest.Harness) {
				sendToolCall(t, c, "ses_1", "exec_1", executor.ProcessExec, map[string]string{"command": forkScript})
			}},
		{"agent", "--machine", "mch_orphan", "[agent]\ntype = \"command\"\ncommand = [\"sh\", \"-c\", \"" + forkScript + "\"]\n",
			func(t *testing.T, c *executortest.Conn, h *executortest.Harness) {
				startTurn(t, c, h, "ses_a", "turn_1", "hello")
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := executortest.New(t)
			dir := t.TempDir()
			makeFIFO(t, filepath.Join(dir, "pid"))
			cfg := writeFile(t, filepath.Join(t.TempDir(), "executor.toml"), tc.config)
			cmd, stderr := startBaton(t, executorCredEnv(), "executor", "--url", h.URL(), tc.mode, tc.id,
				"--config", cfg, "--work-dir", dir)
			c := h.Conn(t)
			waitClosed(t, stderr.seen("executor registered"), "the registration")
			c.Next(t, "executor.register")
			tc.start(t, c, h)
			sleep, err := strconv.Atoi(readFIFO(t, filepath.Join(dir, "pid")))
			if err != nil {
				t.Fatal(err)
			}
			tree := descendants(t, cmd.Process.Pid)
			if _, ok := tree.pids[sleep]; !ok || len(tree.pids) < 2 {
				t.Fatalf("the snapshot lacks the shell or its sleep %d: %v", sleep, tree.cmds)
			}
			killBaton(t, cmd)
			tree.mustDie(t)
		})
	}
}

// TestServeDeathKillsChildren kills a real `baton serve` with SIGKILL
// while a session has a stdio MCP server running (a shell that left a
// background sleep, then became the server) and a remote subagent running
// in a process sandbox: every process below the server dies with it.
func TestServeDeathKillsChildren(t *testing.T) {
	t.Parallel()
	rootfs := busyboxRootfs(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	mcpPid := filepath.Join(dir, "mcp.pid")
	cfg := testConfig + `
[[mcp.servers]]
name = "local"
transport = "stdio"
command = "/bin/sh"
args = ["-c", 'sleep 300 & echo $! > ` + mcpPid + `; exec /usr/bin/env ` + mcptest.EnvServe + `=1 "$0"', "${TEST_MCP_EXE}"]
`
	_, env := prepare(t, testkit.Config{Dir: dir, ConfigFile: cfg, Log: "info", Env: map[string]string{
		"TEST_MCP_EXE": exe, "BAE_SANDBOX_DRIVER": "process", "BATON_SANDBOX_ROOTFS_DIR": rootfs,
	}})
	ch := startChild(t, env)
	b, err := os.ReadFile(env["BAE_ADMIN_KEY_FILE"])
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, dir: dir, env: env, clientURL: ch.clientURL, adminURL: ch.adminURL, adminKey: strings.TrimSpace(string(b))}
	ctx := loopCtx(t)
	pro := loopProfile(t, s, map[string]any{"primary_provider": "script", "mcp_servers": []string{"local"}, "available_sandboxes": []string{"busybox"}})
	h, _ := loopHarness(t, s, pro)
	err = h.AddSubagentTool(client.SubagentConfig{RemoteImage: "busybox", Subagents: []client.SubagentDef{
		{Harness: "t5", Command: `sh -c "$(cat)" # {model}`, Timeout: time.Minute},
	}})
	if err != nil {
		t.Fatal(err)
	}
	sess, err := h.Connect(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer sess.Close(context.Background())

	// The MCP server: a tool call connects it.
	if r, err := sess.Send(ctx, `call echo {"text":"hi"}`); err != nil || r.Message.Text() != "echo returned: echo: hi" {
		t.Fatalf("the MCP call: %v %v", r, err)
	}
	b, err = os.ReadFile(mcpPid)
	if err != nil {
		t.Fatal(err)
	}
	sleep, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	// The subagent: a sleep in the sandbox, there once its tree shows it.
	if _, err := sess.StartRemoteSandbox(ctx, "busybox"); err != nil {
		t.Fatal(err)
	}
	r, err := sess.Send(ctx, `call launch_subagent {"harness":"t5","model":"m","prompt":"sleep 301"}`)
	if err != nil || !strings.Contains(r.Message.Text(), `"status":"started"`) {
		t.Fatalf("launch: %v %v", r, err)
	}
	var tree *procTree
	tick := time.NewTicker(20 * time.Millisecond) // polls a condition; never decides the outcome
	defer tick.Stop()
	for deadline := time.Now().Add(executortest.Patience); ; {
		tree = descendants(t, ch.cmd.Process.Pid)
		if tree.has("sleep 301") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the subagent's sleep never ran: %v", tree.cmds)
		}
		tree.release()
		<-tick.C
	}
	if _, ok := tree.pids[sleep]; !ok {
		t.Fatalf("the snapshot lacks the MCP server's sleep %d: %v", sleep, tree.cmds)
	}
	ch.kill()
	tree.mustDie(t)
}
