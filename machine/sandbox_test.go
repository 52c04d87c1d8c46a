package machine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/client/executor"
)

// fakeBoxes is a sandbox driver that records what it is asked to do.
type fakeBoxes struct {
	mu       sync.Mutex
	n        int
	started  []string
	stopped  []string
	execs    []string
	cleanups int
	fail     error // Start's error, when set
}

func (f *fakeBoxes) EnsureImage(context.Context, string) error { return nil }

func (f *fakeBoxes) Start(_ context.Context, image string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.fail != nil {
		return "", f.fail
	}
	f.n++
	id := fmt.Sprintf("box%d-%s", f.n, image)
	f.started = append(f.started, id)
	return id, nil
}

func (f *fakeBoxes) Exec(ctx context.Context, id, command string, opt baton.ExecOptions) (baton.ExecResult, error) {
	f.mu.Lock()
	f.execs = append(f.execs, id+": "+command)
	f.mu.Unlock()
	if strings.Contains(command, "wait-for-cancel") {
		<-ctx.Done()
		return baton.ExecResult{}, ctx.Err()
	}
	return baton.ExecResult{Stdout: fmt.Sprintf("ran in %s (limit %d)", id, opt.Limit), ExitCode: 3}, nil
}

func (f *fakeBoxes) Stop(_ context.Context, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = append(f.stopped, id)
	return nil
}

func (f *fakeBoxes) Cleanup(context.Context) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups++
	return 0, nil
}

func (f *fakeBoxes) record() (started, stopped, execs []string, cleanups int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.started...), append([]string(nil), f.stopped...), append([]string(nil), f.execs...), f.cleanups
}

// TestSandboxShell: one sandbox per session, started on its
// first command and reused, cwd honoured, timeouts reported as
// executor.ErrTimeout, idle sandboxes stopped, everything cleaned up on
// Close.
func TestSandboxShell(t *testing.T) {
	t.Parallel()
	d := &fakeBoxes{}
	s := NewSandboxShell(d, &ProcessSpec{Image: "img", MaxOutput: 99, IdleTimeout: time.Minute}, filepath.FromSlash("/srv/mnt"), slog.New(slog.DiscardHandler))
	ctx := context.Background()

	res, err := s.Exec(ctx, executor.ExecRequest{SessionID: "a", Command: "echo 1"})
	if err != nil || res != (executor.ExecResult{Stdout: "ran in box1-img (limit 99)", ExitCode: 3}) {
		t.Fatalf("exec: %+v %v", res, err)
	}
	if _, err := s.Exec(ctx, executor.ExecRequest{SessionID: "a", Command: "echo 2", Cwd: "sub dir"}); err != nil {
		t.Fatal(err)
	}
	// A host mount of session files (a remote sandbox's workspace, sent by
	// default) is not visible in the sandbox: the command runs as it is.
	if _, err := s.Exec(ctx, executor.ExecRequest{SessionID: "a", Command: "echo 2b", Cwd: filepath.FromSlash("/srv/mnt/sessions/a/workspace")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Exec(ctx, executor.ExecRequest{SessionID: "b", Command: "echo 3"}); err != nil {
		t.Fatal(err)
	}
	_, err = s.Exec(ctx, executor.ExecRequest{SessionID: "b", Command: "wait-for-cancel", Timeout: 10 * time.Millisecond})
	if !errors.Is(err, executor.ErrTimeout) || !strings.Contains(err.Error(), "after 10ms") {
		t.Errorf("timed-out exec: %v, want executor.ErrTimeout", err)
	}
	if _, err := s.Exec(ctx, executor.ExecRequest{SessionID: "b"}); err == nil {
		t.Error("an empty command ran")
	}

	// A busy sandbox outlives the idle timeout; an idle one does not.
	busy, err := s.acquire(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	s.sweep(time.Now().Add(2 * time.Minute))
	s.release(busy)
	started, stopped, execs, _ := d.record()
	if diff := cmp.Diff([]string{"box1-img", "box2-img"}, started); diff != "" {
		t.Errorf("started (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"box1-img"}, stopped); diff != "" {
		t.Errorf("stopped (-want +got):\n%s", diff)
	}
	wantExecs := []string{"box1-img: echo 1", "box1-img: cd 'sub dir' || exit 1\necho 2", "box1-img: echo 2b", "box2-img: echo 3", "box2-img: wait-for-cancel"}
	if diff := cmp.Diff(wantExecs, execs); diff != "" {
		t.Errorf("execs (-want +got):\n%s", diff)
	}
	// The session's next command gets a fresh sandbox.
	if _, err := s.Exec(ctx, executor.ExecRequest{SessionID: "a", Command: "echo 4"}); err != nil {
		t.Fatal(err)
	}
	if started, _, _, _ := d.record(); len(started) != 3 {
		t.Errorf("started %v, want a third sandbox", started)
	}

	s.Open()
	s.Close()
	if _, _, _, cleanups := d.record(); cleanups != 1 {
		t.Errorf("%d cleanups on Close, want 1", cleanups)
	}
}

// TestSandboxShellStartFails reports the driver's error and tries
// afresh on the next command.
func TestSandboxShellStartFails(t *testing.T) {
	t.Parallel()
	d := &fakeBoxes{fail: errors.New("no namespaces")}
	s := NewSandboxShell(d, &ProcessSpec{Image: "img", IdleTimeout: time.Minute}, "", slog.New(slog.DiscardHandler))
	_, err := s.Exec(context.Background(), executor.ExecRequest{SessionID: "a", Command: "true"})
	if err == nil || err.Error() != "start sandbox: no namespaces" {
		t.Fatalf("exec: %v", err)
	}
	d.mu.Lock()
	d.fail = nil
	d.mu.Unlock()
	if _, err := s.Exec(context.Background(), executor.ExecRequest{SessionID: "a", Command: "true"}); err != nil {
		t.Errorf("second exec: %v", err)
	}
}
