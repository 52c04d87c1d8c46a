package main

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/baton-engine/baton/client/executor/executortest"
)

// TestExecutorCmdToolCancelKillsGroup: cancelling a call kills what its command
// started in the background too, not only the command.
func TestExecutorCmdToolCancelKillsGroup(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pid")
	makeFIFO(t, fifo)
	r := toolRunnerFor(t, dir, `command = "sleep 60 & echo $! > pid; wait"`)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := r.run(ctx, nil)
		done <- err
	}()
	pid, err := strconv.Atoi(readFIFO(t, fifo))
	if err != nil {
		t.Fatal(err)
	}
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		cancel()
		t.Fatalf("pidfd of the background sleep: %v", err)
	}
	defer unix.Close(pidfd)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("run: %v, want context.Canceled", err)
	}
	// A pidfd becomes readable when its process exits.
	fds := []unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}
	n, err := unix.Poll(fds, int(executortest.Patience.Milliseconds()))
	if err != nil || n != 1 {
		t.Fatalf("the background sleep %d survived the cancel (poll %d, %v)", pid, n, err)
	}
}
