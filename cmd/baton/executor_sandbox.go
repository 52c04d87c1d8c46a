package main

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
	"github.com/baton-engine/baton/sandbox"
)

// boxDriver runs sandboxes: the process driver, or a fake in tests.
type boxDriver interface {
	baton.SandboxDriver
	sandbox.Cleaner
}

// sandboxShell serves process.exec in sandboxes of the process driver
// (Linux namespace jails over a root filesystem directory): one per
// session, started by its first command and stopped once it has been
// idle for the idle timeout, or when the executor stops. Commands of a
// session share its sandbox's /work and /tmp; nothing of the host's
// work directory is visible in it.
type sandboxShell struct {
	driver boxDriver
	image  string
	max    int
	idle   time.Duration
	log    *slog.Logger
	// mounts is where [files] mounts session views on the host ("": no
	// [files]); the sandboxes do not see them, so a cwd there (a remote
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
	busy  int           // commands running, under sandboxShell.mu
	last  time.Time     // when the last command ended, under sandboxShell.mu
}

// openSandboxShell makes the process driver ready for p.Image, with its
// state under workDir/.sandboxes, removes what an earlier run left
// there and starts the idle sweeper.
func openSandboxShell(ctx context.Context, p *execProcess, workDir string, log *slog.Logger) (*sandboxShell, error) {
	d := sandbox.NewProcess(sandbox.ProcessOptions{
		RootfsDir: p.RootfsDir, StateDir: filepath.Join(workDir, ".sandboxes"), OutputCap: p.MaxOutput, Logger: log,
	})
	if err := d.EnsureImage(ctx, p.Image); err != nil {
		return nil, usageErr(fmt.Errorf("configuration error: process.image %q: %w", p.Image, err))
	}
	if n, err := d.Cleanup(ctx); err != nil {
		log.Warn("sandbox cleanup", "removed", n, "err", err)
	}
	s := newSandboxShell(d, p, log)
	s.open()
	return s, nil
}

func newSandboxShell(d boxDriver, p *execProcess, log *slog.Logger) *sandboxShell {
	return &sandboxShell{driver: d, image: p.Image, max: p.MaxOutput, idle: p.IdleTimeout, log: log,
		boxes: map[string]*sessionBox{}, stop: make(chan struct{})}
}

// open starts the sweeper, which checks for idle sandboxes a few times
// per idle timeout.
func (s *sandboxShell) open() {
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
func (s *sandboxShell) Close() {
	close(s.stop)
	s.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if n, err := s.driver.Cleanup(ctx); err != nil {
		s.log.Warn("sandbox cleanup", "removed", n, "err", err)
	}
}

// hostMount reports whether dir lies where [files] mounts views on the
// host.
func (s *sandboxShell) hostMount(dir string) bool {
	if s.mounts == "" {
		return false
	}
	rel, err := filepath.Rel(s.mounts, dir)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// Exec runs req.Command in the session's sandbox, in req.Cwd when set
// (relative to the sandbox's working directory) and not a host mount of
// session files (hostMount).
func (s *sandboxShell) Exec(ctx context.Context, req executor.ExecRequest) (executor.ExecResult, error) {
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
func (s *sandboxShell) acquire(ctx context.Context, session string) (*sessionBox, error) {
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

func (s *sandboxShell) release(b *sessionBox) {
	s.mu.Lock()
	b.busy--
	b.last = time.Now()
	s.mu.Unlock()
}

// sweep stops the sandboxes idle for longer than the idle timeout at
// now.
func (s *sandboxShell) sweep(now time.Time) {
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
