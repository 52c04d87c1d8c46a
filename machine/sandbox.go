package machine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/client/executor"
)

// SandboxDriver runs the sandboxes of a SandboxShell: the process
// driver (package sandbox), or a fake in tests.
type SandboxDriver interface {
	baton.SandboxDriver
	// Cleanup removes every sandbox of the driver, running or left by an
	// earlier run, and returns how many it removed.
	Cleanup(ctx context.Context) (int, error)
}

// SandboxShell serves process.exec in sandboxes of the process driver
// (Linux namespace jails over a root filesystem directory): one per
// session, started by its first command and stopped once it has been
// idle for the idle timeout, or when the executor stops. Commands of a
// session share its sandbox's /work and /tmp; nothing of the host's
// work directory is visible in it.
type SandboxShell struct {
	driver SandboxDriver
	image  string
	max    int
	idle   time.Duration
	log    *slog.Logger
	// mounts is where session file views are mounted on the host ("":
	// none); the sandboxes do not see them, so a cwd there (a remote
	// sandbox's workspace, which the server sends by default) is dropped.
	mounts string

	mu    sync.Mutex
	boxes map[string]*sessionBox // by session id

	stop chan struct{}
	wg   sync.WaitGroup
}

// sessionBox is one session's sandbox.
type sessionBox struct {
	ready chan struct{} // closed once started (or failed)
	id    string        // set before ready closes
	err   error         // set before ready closes
	busy  int           // commands running, under SandboxShell.mu
	last  time.Time     // when the last command ended, under SandboxShell.mu
}

// NewSandboxShell returns the shell that runs commands in sandboxes of
// d, of image p.Image, keeping p.MaxOutput bytes of each stream and
// stopping a session's sandbox once it has been idle for p.IdleTimeout.
// mounts is where session files are mounted on the host ("" for none).
// d must be ready for the image; Open starts the idle sweeper and Close
// stops it and removes every sandbox of d.
func NewSandboxShell(d SandboxDriver, p *ProcessSpec, mounts string, log *slog.Logger) *SandboxShell {
	return &SandboxShell{driver: d, image: p.Image, max: p.MaxOutput, idle: p.IdleTimeout, mounts: mounts, log: log,
		boxes: map[string]*sessionBox{}, stop: make(chan struct{})}
}

// Open starts the sweeper, which checks for idle sandboxes a few times
// per idle timeout.
func (s *SandboxShell) Open() {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(max(s.idle/4, time.Second))
		defer t.Stop()
		for {
			select {
			case <-s.stop:
				return
			case now := <-t.C:
				s.sweep(now)
			}
		}
	}()
}

// Close stops the sweeper and every sandbox.
func (s *SandboxShell) Close() {
	close(s.stop)
	s.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if n, err := s.driver.Cleanup(ctx); err != nil {
		s.log.Warn("sandbox cleanup", "removed", n, "err", err)
	}
}

// hostMount reports whether dir lies where session file views are
// mounted on the host.
func (s *SandboxShell) hostMount(dir string) bool {
	if s.mounts == "" {
		return false
	}
	rel, err := filepath.Rel(s.mounts, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// Exec runs req.Command in the session's sandbox, in req.Cwd when set
// (relative to the sandbox's working directory) and not a host mount of
// session files (hostMount).
func (s *SandboxShell) Exec(ctx context.Context, req executor.ExecRequest) (executor.ExecResult, error) {
	fail := executor.ExecResult{ExitCode: -1}
	if req.Command == "" {
		return fail, errors.New("command is empty")
	}
	b, err := s.acquire(ctx, req.SessionID)
	if err != nil {
		return fail, err
	}
	defer s.release(b)
	cmd := req.Command
	if req.Cwd != "" && !s.hostMount(req.Cwd) {
		cmd = "cd " + shQuote(req.Cwd) + " || exit 1\n" + cmd
	}
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	res, err := s.driver.Exec(ctx, b.id, cmd, baton.ExecOptions{Limit: s.max})
	switch {
	case errors.Is(err, context.DeadlineExceeded) && req.Timeout > 0:
		return fail, fmt.Errorf("%w after %s", executor.ErrTimeout, req.Timeout)
	case err != nil:
		return fail, err
	}
	return executor.ExecResult{Stdout: res.Stdout, Stderr: res.Stderr, ExitCode: res.ExitCode, Truncated: res.Truncated}, nil
}

// acquire returns the session's sandbox, starting it on first use, and
// counts a command in it.
func (s *SandboxShell) acquire(ctx context.Context, session string) (*sessionBox, error) {
	s.mu.Lock()
	b := s.boxes[session]
	starter := b == nil
	if starter {
		b = &sessionBox{ready: make(chan struct{})}
		s.boxes[session] = b
	}
	b.busy++
	s.mu.Unlock()
	if starter {
		b.id, b.err = s.driver.Start(ctx, s.image)
		if b.err == nil {
			s.log.Info("sandbox started", "session_id", session, "sandbox_id", b.id, "image", s.image)
		}
		close(b.ready)
	}
	select {
	case <-b.ready:
	case <-ctx.Done():
		s.release(b)
		return nil, ctx.Err()
	}
	if b.err != nil {
		s.mu.Lock()
		if s.boxes[session] == b {
			delete(s.boxes, session) // the next command tries afresh
		}
		b.busy--
		s.mu.Unlock()
		return nil, fmt.Errorf("start sandbox: %w", b.err)
	}
	return b, nil
}

func (s *SandboxShell) release(b *sessionBox) {
	s.mu.Lock()
	b.busy--
	b.last = time.Now()
	s.mu.Unlock()
}

// sweep stops the sandboxes idle for longer than the idle timeout at
// now.
func (s *SandboxShell) sweep(now time.Time) {
	var stale []string
	s.mu.Lock()
	for session, b := range s.boxes {
		select {
		case <-b.ready:
		default:
			continue // still starting
		}
		if b.busy == 0 && b.err == nil && now.Sub(b.last) >= s.idle {
			stale = append(stale, b.id)
			delete(s.boxes, session)
		}
	}
	s.mu.Unlock()
	for _, id := range stale {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := s.driver.Stop(ctx, id); err != nil {
			s.log.Warn("sandbox stop", "sandbox_id", id, "err", err)
		} else {
			s.log.Info("sandbox stopped (idle)", "sandbox_id", id)
		}
		cancel()
	}
}

var _ executor.ProcessHandler = (*SandboxShell)(nil)
