//go:build unix

package executor

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

type execView struct {
	ExecResult
	Error string `json:"error"`
}

func shellHarness(t *testing.T, sh *Shell) *fakeConn {
	t.Helper()
	h := newHarness(t)
	cfg := h.config(t)
	cfg.Scope = Machine("mch_1")
	cfg.Capabilities.Process = &ProcessCapability{MaxSessions: 4}
	cfg.Process = sh
	_, fc, _ := h.start(t, cfg)
	return fc
}

func TestProcessExec(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	fc := shellHarness(t, &Shell{Dir: dir})

	fc.result(t, "tool.call", callParams("p1", ProcessExec, map[string]any{
		"command": "echo out; echo err >&2; pwd; exit 3", "cwd": "sub"}), nil)
	r := nextResult(t, fc)
	got := decode[execView](t, r.Content)
	want := execView{ExecResult: ExecResult{Stdout: "out\n" + filepath.Join(dir, "sub") + "\n", Stderr: "err\n", ExitCode: 3}}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("process.exec content (-want +got):\n%s", d)
	}
	if r.IsError {
		t.Error("a non-zero exit is not a tool error")
	}

	fc.result(t, "tool.call", callParams("p2", ProcessExec, map[string]any{"command": "sleep 30", "timeout_ms": 50}), nil)
	r = nextResult(t, fc)
	got = decode[execView](t, r.Content)
	if !r.IsError || got.ExitCode != -1 || !strings.Contains(got.Error, "timed out") {
		t.Errorf("timed out exec = %+v (is_error %v)", got, r.IsError)
	}

	fc.result(t, "tool.call", callParams("p3", ProcessExec, map[string]any{"command": "true", "cwd": "missing"}), nil)
	if r = nextResult(t, fc); !r.IsError || !strings.Contains(decode[execView](t, r.Content).Error, "not a directory") {
		t.Errorf("exec in a missing cwd = %s", r.Content)
	}
	fc.result(t, "tool.call", callParams("p4", ProcessExec, map[string]any{}), nil)
	if r = nextResult(t, fc); !r.IsError {
		t.Errorf("exec without a command = %s", r.Content)
	}
}

// TestProcessExecCancelKillsGroup runs a shell that ignores SIGTERM and
// leaves a background child holding a FIFO open; tool.cancel must end
// the call and, after the grace period, SIGKILL the whole group: the FIFO
// then reads EOF because its last writer is gone.
func TestProcessExecCancelKillsGroup(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	fc := shellHarness(t, &Shell{Dir: dir, KillGrace: 50 * time.Millisecond})
	lines := make(chan string, 4)
	eof := make(chan struct{})
	go func() {
		defer close(eof)
		f, err := os.Open(fifo) // blocks until the command opens it
		if err != nil {
			return
		}
		defer f.Close()
		r := bufio.NewReader(f)
		for {
			line, err := r.ReadString('\n')
			if line != "" {
				lines <- line
			}
			if err != nil {
				return
			}
		}
	}()
	fc.result(t, "tool.call", callParams("p1", ProcessExec, map[string]any{
		"command": "trap '' TERM; exec 3>fifo; sleep 30 & echo started >&3; wait"}), nil)
	if got := await(t, lines, "the command to start"); got != "started\n" {
		t.Fatalf("fifo said %q", got)
	}
	var got struct {
		Canceled bool `json:"canceled"`
	}
	fc.result(t, "tool.cancel", map[string]string{"session_id": "ses_1", "tool_call_id": "p1"}, &got)
	if !got.Canceled {
		t.Fatal("tool.cancel of a running exec answered canceled:false")
	}
	r := nextResult(t, fc)
	if v := decode[execView](t, r.Content); !r.IsError || v.ExitCode != -1 || !strings.Contains(v.Error, "canceled") {
		t.Errorf("canceled exec = %s", r.Content)
	}
	await(t, eof, "every process of the group to die")
}

func TestShellOutputCap(t *testing.T) {
	sh := &Shell{MaxOutput: 10}
	res, err := sh.Exec(context.Background(), ExecRequest{Command: "printf 0123456789abcdef; printf xy >&2"})
	if err != nil {
		t.Fatal(err)
	}
	want := ExecResult{Stdout: "0123456789", Stderr: "xy", Truncated: true}
	if d := cmp.Diff(want, res); d != "" {
		t.Errorf("capped output (-want +got):\n%s", d)
	}
}

func TestShellCanceledBeforeStart(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	res, err := (&Shell{}).Exec(ctx, ExecRequest{Command: "echo never"})
	if !errors.Is(err, context.Canceled) || res.ExitCode != -1 || res.Stdout != "" {
		t.Errorf("Exec on a canceled ctx = %+v, %v", res, err)
	}
}

func TestShellSignalExit(t *testing.T) {
	res, err := (&Shell{}).Exec(context.Background(), ExecRequest{Command: "kill -KILL $$"})
	if err != nil || res.ExitCode != 128+9 {
		t.Errorf("killed shell = %+v, %v; want exit 137", res, err)
	}
}

func TestCapped(t *testing.T) {
	c := &capped{max: 5}
	for _, s := range []string{"ab", "cd", "ef", "gh"} {
		if n, err := io.WriteString(c, s); n != len(s) || err != nil {
			t.Fatalf("Write = %d, %v", n, err)
		}
	}
	if c.String() != "abcde" || !c.cut {
		t.Errorf("capped = %q cut=%v", c.String(), c.cut)
	}
}

// TestProcessExecCwdInView: a cwd in a view of the session's files (the
// path fs.mount named, as the harness sends a remote sandbox's workspace)
// runs in the local mount directory below Files.Root; one in another
// session's view, or outside every view, is left as it is.
func TestProcessExecCwdInView(t *testing.T) {
	h := newHarness(t)
	root := t.TempDir()
	cfg := h.config(t)
	cfg.Scope = Machine("mch_1")
	cfg.Capabilities.Process = &ProcessCapability{}
	cfg.Process = &Shell{Dir: t.TempDir()}
	cfg.Files = &FileMounts{Root: root, Mode: MountSync, SyncInterval: time.Hour}
	_, fc, _ := h.start(t, cfg)
	f := newFakeFiles(t, map[string]string{"a.txt": "mine", "sub/b.txt": "deep"})
	f.allow("t")
	ws := func(session string) map[string]any {
		v := view(f, session, "t", false)
		v["path"] = "/sessions/" + session + "/workspace"
		return v
	}
	fc.result(t, "fs.mount", mountParams("ses_1", ws("ses_1")), nil)
	fc.result(t, "fs.mount", mountParams("ses_2", ws("ses_2")), nil) // a second session at once: no path_in_use

	for i, c := range []struct{ cwd, cmd, out string }{
		{"/sessions/ses_1/workspace", "cat a.txt", "mine"},
		{"/sessions/ses_1/workspace/sub/", "cat b.txt", "deep"},
		{"/sessions/ses_1/workspace", "pwd", filepath.Join(root, "sessions", "ses_1", "workspace") + "\n"},
	} {
		fc.result(t, "tool.call", callParams("c"+itoa(i), ProcessExec, map[string]any{"command": c.cmd, "cwd": c.cwd}), nil)
		if got := decode[execView](t, nextResult(t, fc).Content); got.Stdout != c.out || got.ExitCode != 0 {
			t.Errorf("%s in %s = %+v, want %q", c.cmd, c.cwd, got, c.out)
		}
	}
	// ses_1's call names ses_2's view: not mapped, so not found here.
	fc.result(t, "tool.call", callParams("x", ProcessExec, map[string]any{"command": "true", "cwd": "/sessions/ses_2/workspace"}), nil)
	if r := nextResult(t, fc); !r.IsError || !strings.Contains(decode[execView](t, r.Content).Error, `"/sessions/ses_2/workspace" is not a directory`) {
		t.Errorf("exec in another session's view = %s", r.Content)
	}
	// A path that only starts like the view is not in it.
	fc.result(t, "tool.call", callParams("y", ProcessExec, map[string]any{"command": "true", "cwd": "/sessions/ses_1/workspace2"}), nil)
	if r := nextResult(t, fc); !r.IsError || !strings.Contains(decode[execView](t, r.Content).Error, `"/sessions/ses_1/workspace2"`) {
		t.Errorf("exec next to the view = %s", r.Content)
	}
}
