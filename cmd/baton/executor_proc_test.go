//go:build unix

package main

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/baton-engine/baton/client/executor/executortest"
)

func makeFIFO(t *testing.T, path string) {
	t.Helper()
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Fatal(err)
	}
}

// readFIFO waits until a command has written to the FIFO at path and
// closed it, and returns what it wrote. The wait is bounded by
// executortest.Patience (a guard, not a synchronisation).
func readFIFO(t *testing.T, path string) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(path) // blocks until a writer opens and closes it
		got <- string(b)
	}()
	select {
	case s := <-got:
		return strings.TrimSpace(s)
	case <-time.After(executortest.Patience):
		// Unblock the reader before failing.
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
		<-got
		t.Fatalf("nothing was written to %s", path)
		return ""
	}
}
