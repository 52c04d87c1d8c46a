//go:build unix

package proc

import (
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// failsafe bounds waits for something that happens at once when the
// package works; it only turns a hang into a failure.
const failsafe = 30 * time.Second

// signalWriter closes ready at the first write of "ready".
type signalWriter struct {
	once  sync.Once
	ready chan struct{}
}

func (w *signalWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), "ready") {
		w.once.Do(func() { close(w.ready) })
	}
	return len(p), nil
}

// runCancelled runs script under sh in a group with grace, cancels it once
// it printed "ready", and returns Run's error and the command.
func runCancelled(t *testing.T, script string, grace time.Duration) (*exec.Cmd, error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", script)
	out := &signalWriter{ready: make(chan struct{})}
	cmd.Stdout = out
	Group(cmd, grace)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cmd) }()
	select {
	case <-out.ready:
	case err := <-done:
		t.Fatalf("the command ended before it was ready: %v", err)
	case <-time.After(failsafe):
		t.Fatal("the command never got ready")
	}
	cancel()
	select {
	case err := <-done:
		return cmd, err
	case <-time.After(failsafe):
		t.Fatal("Run did not return after the cancel")
		return nil, nil
	}
}

// TestCancelSendsTerm: a cancel sends SIGTERM to the whole group, so a
// command may clean up. The shell's trap runs once its foreground sleep,
// also in the group, has died of the same signal; under a SIGKILL the
// trap would never run.
func TestCancelSendsTerm(t *testing.T) {
	mark := filepath.Join(t.TempDir(), "mark")
	_, err := runCancelled(t, `trap 'echo term > "`+mark+`"; exit 0' TERM; echo ready; while :; do sleep 1; done`, time.Minute)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run: %v, want context.Canceled", err)
	}
	if b, rerr := os.ReadFile(mark); rerr != nil || strings.TrimSpace(string(b)) != "term" {
		t.Errorf("the command's SIGTERM trap did not run: %q, %v", b, rerr)
	}
}

// TestCancelKillsAfterGrace: a command that ignores SIGTERM is killed
// with SIGKILL once the grace period has passed.
func TestCancelKillsAfterGrace(t *testing.T) {
	cmd, err := runCancelled(t, `trap '' TERM; echo ready; while :; do sleep 1; done`, 50*time.Millisecond)
	if err == nil {
		t.Fatal("Run: nil error for a killed command")
	}
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Errorf("the command ended as %v, want killed by SIGKILL", cmd.ProcessState)
	}
	if got := ExitCode(cmd.ProcessState); got != 128+int(syscall.SIGKILL) {
		t.Errorf("ExitCode = %d, want 137", got)
	}
}

// TestCancelAlreadyGone: cancelling a command whose group has no process
// left is os.ErrProcessDone, so Wait keeps the command's own exit status
// (a nil error would make Wait report the context's error instead).
func TestCancelAlreadyGone(t *testing.T) {
	cmd := exec.CommandContext(context.Background(), "/bin/sh", "-c", "exit 0")
	Group(cmd, 0)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Cancel(); !errors.Is(err, os.ErrProcessDone) {
		t.Errorf("Cancel of a finished group: %v, want os.ErrProcessDone", err)
	}
	if cmd.WaitDelay != DefaultGrace {
		t.Errorf("WaitDelay = %v, want DefaultGrace", cmd.WaitDelay)
	}
}

// TestCancelKillsGroupAtEnd: once a cancelled command has ended, what it
// left in its group dies too, even if it ignored SIGTERM. The background
// sleep ignores SIGTERM and holds the write end of a pipe; the read end
// sees EOF only once every holder is dead.
func TestCancelKillsGroupAtEnd(t *testing.T) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", "(trap '' TERM; exec sleep 300 >/dev/null) & echo ready; wait")
	cmd.ExtraFiles = []*os.File{w}
	out := &signalWriter{ready: make(chan struct{})}
	cmd.Stdout = out
	Group(cmd, time.Minute)
	done := make(chan error, 1)
	go func() { done <- Run(ctx, cmd) }()
	<-out.ready
	cancel()
	if err := <-done; err == nil {
		t.Error("Run: nil error for a command ended by SIGTERM")
	}
	w.Close()
	waitEOF(t, r, cmd)
}

// TestKillEndsLeftovers: what a command that ended on its own left in the
// background keeps running until Kill ends it.
func TestKillEndsLeftovers(t *testing.T) {
	for _, start := range []bool{false, true} {
		r, w, err := os.Pipe()
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		cmd := exec.CommandContext(ctx, "/bin/sh", "-c", "sleep 300 &")
		cmd.ExtraFiles = []*os.File{w}
		Group(cmd, 0)
		if start {
			if err := Start(cmd); err != nil {
				t.Fatal(err)
			}
			err = Wait(ctx, cmd)
		} else {
			err = Run(ctx, cmd)
		}
		w.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(-cmd.Process.Pid, 0); err != nil {
			t.Errorf("the background sleep is gone before Kill: %v", err)
		}
		Kill(cmd)
		waitEOF(t, r, cmd)
		r.Close()
	}
}

// waitEOF reads r to its end, which comes once every process holding its
// write end is dead.
func waitEOF(t *testing.T, r *os.File, cmd *exec.Cmd) {
	t.Helper()
	eof := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, r)
		eof <- err
	}()
	select {
	case err := <-eof:
		if err != nil {
			t.Errorf("reading the pipe: %v", err)
		}
	case <-time.After(failsafe):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatal("the background sleep outlived its command")
	}
}
