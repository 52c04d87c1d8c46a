package store

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// lockChildEnv switches the test binary into the lock-test child: the
// value is the SQLite file it opens. It prints "open" once the store is
// open (or the error), holds it until its stdin closes, then closes it.
const lockChildEnv = "BATON_STORE_LOCK_CHILD"

func lockChild(path string) {
	db, err := Open(context.Background(), Options{URL: path})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(0)
	}
	fmt.Println("open")
	_, _ = io.Copy(io.Discard, os.Stdin)
	if err := db.Close(); err != nil {
		fmt.Fprintln(os.Stderr, "close:", err)
		os.Exit(2)
	}
	os.Exit(0)
}

// wantLocked fails t unless err is ErrLocked with its explanation.
func wantLocked(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: err = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "use PostgreSQL to run several nodes") {
		t.Errorf("message %q does not say what to do", err)
	}
}

func TestSQLiteLockSameProcess(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "baton.db")
	first, err := Open(ctx, Options{URL: path})
	if err != nil {
		t.Fatal(err)
	}
	second, err := Open(ctx, Options{URL: "file:" + path + "?cache=private"})
	if err == nil {
		_ = second.Close()
	}
	wantLocked(t, err)
	// A shared handle neither is refused nor takes the lock.
	shared, err := Open(ctx, Options{URL: path, SharedFile: true})
	if err != nil {
		t.Fatalf("shared open: %v", err)
	}
	if err := shared.Close(); err != nil {
		t.Fatal(err)
	}
	if err := first.Close(); err != nil {
		t.Fatal(err)
	}
	// Closing released the lock.
	again, err := Open(ctx, Options{URL: path})
	if err != nil {
		t.Fatalf("open after close: %v", err)
	}
	if err := again.Close(); err != nil {
		t.Fatal(err)
	}
	if m := mode(t, lockPath(path)); m != 0o600 {
		t.Errorf("lock file mode %#o, want 0600", m)
	}
}

// TestSQLiteLockOtherProcess opens the file in a child process, checks the
// parent is refused while the child holds it and is let in once the child
// closed it, then that the child is refused while the parent holds it.
func TestSQLiteLockOtherProcess(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "baton.db")
	child := func() (stdin io.WriteCloser, line string, wait func() error) {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), lockChildEnv+"="+path)
		cmd.Stderr = os.Stderr
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		l, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("child: %v", err)
		}
		return in, strings.TrimSpace(l), cmd.Wait
	}

	in, line, wait := child()
	if line != "open" {
		_ = in.Close()
		_ = wait()
		t.Fatalf("child could not open a free file: %s", line)
	}
	db, err := Open(ctx, Options{URL: path})
	if err == nil {
		_ = db.Close()
	}
	_ = in.Close() // the child closes its store and exits
	if werr := wait(); werr != nil {
		t.Fatalf("child: %v", werr)
	}
	wantLocked(t, err)

	db, err = Open(ctx, Options{URL: path})
	if err != nil {
		t.Fatalf("open after the child closed: %v", err)
	}
	defer db.Close()
	in, line, wait = child()
	_ = in.Close()
	if werr := wait(); werr != nil {
		t.Fatalf("child: %v", werr)
	}
	if !strings.HasPrefix(line, "error:") || !strings.Contains(line, ErrLocked.Error()) {
		t.Errorf("child opening a held file said %q, want the ErrLocked message", line)
	}
}
