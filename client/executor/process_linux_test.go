package executor

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestShellDiesWithExecutor: the shell of a process.exec is killed when
// the executor's process is (its parent-death signal).
func TestShellDiesWithExecutor(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pid")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	parent := exec.Command(exe)
	parent.Env = append(os.Environ(), envShellParent+"=echo $$ > "+fifo+"; exec sleep 300")
	if err := parent.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { parent.Process.Kill(); parent.Wait() }()
	got := make(chan string, 1)
	go func() {
		b, _ := os.ReadFile(fifo) // until the shell has written and closed it
		got <- strings.TrimSpace(string(b))
	}()
	var shell int
	select {
	case s := <-got:
		if shell, err = strconv.Atoi(s); err != nil {
			t.Fatalf("pid %q", s)
		}
	case <-time.After(patience):
		parent.Process.Kill()
		if f, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close() // unblocks the reader
		}
		<-got
		t.Fatal("the shell never started")
	}
	defer syscall.Kill(shell, syscall.SIGKILL) // a failing run leaves nothing behind
	parent.Process.Kill()
	parent.Wait()
	tick := time.NewTicker(10 * time.Millisecond) // polls a condition; never decides the outcome
	defer tick.Stop()
	for deadline := time.Now().Add(patience); !ended(shell); <-tick.C {
		if time.Now().After(deadline) {
			t.Fatalf("the shell %d outlived its executor", shell)
		}
	}
}

// ended reports whether process pid has exited (gone, or a zombie).
func ended(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return len(f) > 0 && (f[0] == "Z" || f[0] == "X")
}
