package executor

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
)

// shellExecutor registers a machine executor of mch_1 with a shell.
func (e *env) shellExecutor(t *testing.T, id string, maxSessions int) *texec {
	t.Helper()
	x := e.dial(t, e.machineToken("mch_1", "cred_m"))
	x.register(proto.RegisterParams{ExecutorID: id, Capabilities: proto.Capabilities{Process: &proto.ProcessCapability{MaxSessions: maxSessions}}})
	return x
}

type execDone struct {
	res baton.ExecResult
	err error
}

func (s *Shell) execAsync(id, command string, opt baton.ExecOptions) <-chan execDone {
	ch := make(chan execDone, 1)
	go func() {
		res, err := s.Exec(context.Background(), id, command, opt)
		ch <- execDone{res, err}
	}()
	return ch
}

// answerExec answers the next process.exec with content and returns its
// input.
func (x *texec) answerExec(content string, isError bool) map[string]any {
	x.t.Helper()
	var p proto.ToolCallParams
	f := x.expect(proto.MethodToolCall, &p)
	x.reply(f, proto.Accepted{Accepted: true})
	if p.Name != ToolProcessExec {
		x.t.Fatalf("tool.call %s, want process.exec", p.Name)
	}
	x.ok(proto.MethodToolResult, proto.ToolResultParams{SessionID: p.SessionID, ToolCallID: p.ToolCallID, Content: json.RawMessage(content), IsError: isError}, nil)
	var in map[string]any
	_ = json.Unmarshal(p.Input, &in)
	return in
}

func TestShellStartExecStop(t *testing.T) {
	e := newEnv(t, longLeases)
	s := NewShell(e.hub, nil)
	defer s.Close()
	ex := e.shellExecutor(t, "exe_m", 1)
	id, p := startSandbox(t, s, ex, "")
	if !strings.HasPrefix(id, "sbx_") || p.SessionID != id || p.Metadata.Source != "harness" || !s.Owns(id) {
		t.Fatalf("sandbox %s, session.assign %+v", id, p)
	}

	done := s.execAsync(id, "echo hi; exit 3", baton.ExecOptions{})
	in := ex.answerExec(`{"stdout":"hi\n","stderr":"warn\n","exit_code":3}`, false)
	if diff := cmp.Diff(map[string]any{"command": "echo hi; exit 3"}, in); diff != "" {
		t.Errorf("process.exec input (-want +got):\n%s", diff)
	}
	got := wait(t, done)
	if diff := cmp.Diff(baton.ExecResult{Stdout: "hi\n", Stderr: "warn\n", ExitCode: 3}, got.res); diff != "" || got.err != nil {
		t.Fatalf("exec (-want +got):\n%s%v", diff, got.err)
	}

	// The output limit cuts on a rune boundary; a truncation the executor
	// reports is kept.
	done = s.execAsync(id, "x", baton.ExecOptions{Limit: 2})
	ex.answerExec(`{"stdout":"aé","stderr":"","exit_code":0,"truncated":true}`, false)
	if got := wait(t, done); got.res.Stdout != "a" || !got.res.Truncated {
		t.Fatalf("limited exec %+v", got.res)
	}

	// A command the executor could not finish is an error with its output.
	done = s.execAsync(id, "sleep 9", baton.ExecOptions{})
	ex.answerExec(`{"stdout":"part","stderr":"","exit_code":-1,"error":"executor: command timed out"}`, true)
	if got := wait(t, done); got.err == nil || !strings.Contains(got.err.Error(), "command timed out") || got.res.Stdout != "part" {
		t.Fatalf("failed exec %+v %v", got.res, got.err)
	}

	// Anything but the process.exec shape is an error.
	done = s.execAsync(id, "x", baton.ExecOptions{})
	ex.answerExec(`[{"type":"text","text":"invalid process.exec input"}]`, true)
	if got := wait(t, done); got.err == nil || !strings.Contains(got.err.Error(), "invalid process.exec input") {
		t.Fatalf("odd answer: %v", got.err)
	}

	// Standard input cannot be sent.
	if _, err := s.Exec(context.Background(), id, "cat", baton.ExecOptions{Stdin: []byte("in")}); !errors.Is(err, ErrNoStdin) {
		t.Fatalf("stdin: %v", err)
	}

	stopped := make(chan error, 1)
	go func() { stopped <- s.Stop(context.Background(), id) }()
	var sp proto.SessionStopParams
	f := ex.expect(proto.MethodSessionStop, &sp)
	ex.reply(f, proto.SessionStopResult{Stopped: true})
	if err := wait(t, stopped); err != nil || sp.SessionID != id || s.Owns(id) {
		t.Fatalf("stop %v %+v", err, sp)
	}
	if err := s.Stop(context.Background(), id); err != nil {
		t.Fatalf("second stop: %v", err)
	}
	if _, err := s.Exec(context.Background(), id, "x", baton.ExecOptions{}); err == nil {
		t.Fatal("exec after stop")
	}
}

func TestShellStartErrors(t *testing.T) {
	e := newEnv(t, longLeases)
	s := NewShell(e.hub, nil)
	defer s.Close()
	if _, err := s.Start(context.Background(), "executor:mch_1"); err == nil || !strings.Contains(err.Error(), "no executor of machine mch_1 with a shell") {
		t.Fatalf("no executor: %v", err)
	}
	if _, err := s.Start(context.Background(), "busybox"); err == nil {
		t.Fatal("started a non-executor image")
	}
	if err := s.EnsureImage(context.Background(), "executor:"); err == nil {
		t.Fatal("empty machine id accepted")
	}
	// An environment executor or one without a shell does not count.
	e.envExecutor(t, "env_a", "exe_t", def("x", "x"))
	ex := e.shellExecutor(t, "exe_m", 1)
	started := make(chan error, 1)
	go func() {
		_, err := s.Start(context.Background(), "executor:mch_1")
		started <- err
	}()
	ex.accept()
	if err := wait(t, started); err != nil {
		t.Fatal(err)
	}
	// max_sessions 1: the hub skips a full executor.
	if _, err := s.Start(context.Background(), "executor:mch_1"); err == nil || !strings.Contains(err.Error(), "every executor shell of machine mch_1 is at capacity") {
		t.Fatalf("full executor: %v", err)
	}
}

func TestMachineOf(t *testing.T) {
	for image, want := range map[string]string{"executor:mch_1": "mch_1", "executor:": "", "busybox": "", "executor": ""} {
		got, ok := MachineOf(image)
		if got != want || ok != (want != "") {
			t.Errorf("MachineOf(%q) = %q, %v", image, got, ok)
		}
	}
}

// FuzzExecResult: whatever an executor answers to process.exec, reading
// it never panics, keeps each stream within the limit and valid UTF-8
// when it was, and reports a cut.
func FuzzExecResult(f *testing.F) {
	for _, seed := range []string{
		`{"stdout":"hi\n","stderr":"","exit_code":0}`,
		`{"stdout":"aé","stderr":"x","exit_code":3,"truncated":true}`,
		`{"stdout":"","stderr":"","exit_code":-1,"error":"command timed out"}`,
		`[{"type":"text","text":"invalid process.exec input"}]`,
		`{"stderr":"no stdout"}`, `null`, `"text"`, `{`,
	} {
		f.Add([]byte(seed), 2)
	}
	f.Fuzz(func(t *testing.T, content []byte, limit int) {
		r, err := execResult(content, limit)
		if err != nil && r.Stdout == "" && r.Stderr == "" && r.ExitCode == 0 && r.Truncated {
			t.Fatal("a failed read reports a cut")
		}
		lim := limit
		if lim <= 0 {
			lim = DefaultExecLimit
		}
		var in struct{ Stdout, Stderr string }
		if json.Unmarshal(content, &in) != nil {
			return
		}
		for _, p := range [][2]string{{in.Stdout, r.Stdout}, {in.Stderr, r.Stderr}} {
			if len(p[1]) > lim || !strings.HasPrefix(p[0], p[1]) && err == nil {
				t.Fatalf("stream %q from %q with limit %d", p[1], p[0], lim)
			}
			if utf8.ValidString(p[0]) && !utf8.ValidString(p[1]) {
				t.Fatalf("cut %q inside a rune", p[1])
			}
			if len(p[0]) > lim && err == nil && !r.Truncated {
				t.Fatal("a cut was not reported")
			}
		}
	})
}

// TestShellAssignNamesProfile: a sandbox started for a Baton session
// names the session's profile in session.assign.
func TestShellAssignNamesProfile(t *testing.T) {
	e := newEnv(t, longLeases)
	s := NewShell(e.hub, func(_ context.Context, id string) (string, error) {
		if id != "ses_1" {
			t.Errorf("profile asked for %q", id)
		}
		return "pro_1", nil
	})
	defer s.Close()
	ex := e.shellExecutor(t, "exe_m", 1)
	_, p := startSandbox(t, s, ex, "ses_1")
	if p.Metadata.Source != "harness" || p.Metadata.ProfileID != "pro_1" {
		t.Fatalf("session.assign metadata %+v", p.Metadata)
	}
}

// startSandbox starts a sandbox on ex's machine (mch_1), for Baton session
// sessionID when it is not "", and returns its id and the session.assign
// ex received.
func startSandbox(t *testing.T, s *Shell, ex *texec, sessionID string) (string, proto.AssignParams) {
	t.Helper()
	started := make(chan string, 1)
	go func() {
		id, err := s.StartFor(context.Background(), sessionID, "executor:mch_1")
		if err != nil {
			t.Error(err)
		}
		started <- id
	}()
	p := ex.accept()
	return wait(t, started), p
}
