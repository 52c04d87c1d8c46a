//go:build unix

package client

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// TestRunProcKillsGroup cancels a shell whose background child holds a
// FIFO open for writing: the reader sees EOF only once that child is
// dead, which a kill of the shell alone would not achieve.
func TestRunProcKillsGroup(t *testing.T) {
	for _, timeout := range []time.Duration{0, 50 * time.Millisecond} {
		fifo := filepath.Join(t.TempDir(), "fifo")
		if err := syscall.Mkfifo(fifo, 0o600); err != nil {
			t.Fatal(err)
		}
		opened := make(chan *os.File, 1)
		go func() {
			f, err := os.Open(fifo) // blocks until the child opens it
			if err != nil {
				t.Error(err)
			}
			opened <- f
		}()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := runProc(ctx, procSpec{prog: "/bin/sh", args: []string{"-c", "sleep 300 > '" + fifo + "' & wait"}, timeout: timeout})
			done <- err
		}()
		var r *os.File
		select {
		case r = <-opened:
		case <-time.After(failsafe):
			t.Fatal("the background child never opened the FIFO")
		}
		if timeout == 0 {
			cancel()
		}
		var err error
		select {
		case err = <-done:
		case <-time.After(failsafe):
			t.Fatal("runProc did not return")
		}
		if timeout == 0 && !errors.Is(err, context.Canceled) {
			t.Errorf("cancel: %v", err)
		}
		if timeout > 0 && !isTimeout(err) {
			t.Errorf("timeout: %v", err)
		}
		eof := make(chan error, 1)
		go func() {
			_, err := io.Copy(io.Discard, r)
			eof <- err
		}()
		select {
		case err := <-eof:
			if err != nil {
				t.Errorf("reading the FIFO: %v", err)
			}
		case <-time.After(failsafe):
			t.Fatal("the background child outlived the cancel")
		}
		r.Close()
		cancel()
	}
}
