package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/executor/proto"
)

// ImagePrefix starts the sandbox images served by machine-scoped
// executors: "executor:<machine_id>".
const ImagePrefix = "executor:"

// ToolProcessExec is the tool.call name of a remote shell command.
const ToolProcessExec = "process.exec"

// DefaultExecLimit caps each output stream of a remote shell command when
// baton.ExecOptions.Limit is 0 (as the Docker driver does).
const DefaultExecLimit = 1 << 20

// ErrNoStdin refuses an exec with standard input: process.exec has no
// stdin, so a command that needs one cannot run on an executor shell.
var ErrNoStdin = &baton.Error{Code: baton.ECodeUnavailable,
	Message: "executor remote shells cannot take standard input (process.exec has no stdin); pass the input in the command instead"}

// MachineOf returns the machine id of an "executor:<machine_id>" image.
func MachineOf(image string) (string, bool) {
	id, ok := strings.CutPrefix(image, ImagePrefix)
	if !ok || id == "" {
		return "", false
	}
	return id, true
}

// Shell is a baton.SandboxDriver whose sandboxes are sessions on
// machine-scoped executors with the process capability: Start binds a new
// executor session (session.assign), Exec sends tool.call "process.exec"
// {command, timeout_ms?} and reads {stdout, stderr, exit_code}, Stop sends
// session.stop. A sandbox's id (sbx_…) is also its session id on the
// executor. StartFor also mounts the Baton session's files in the sandbox
// (fs.mount, see mount.go), which Stop unmounts first. Close it before the
// Hub.
type Shell struct {
	hub       *Hub
	profileOf func(ctx context.Context, sessionID string) (string, error) // nil: no profile_id

	ctx  context.Context // ends at Close
	stop context.CancelFunc
	wg   sync.WaitGroup // background stops

	mu        sync.Mutex
	sandboxes map[string]*Binding
	stopping  map[*Binding]chan struct{} // stopped while detached: stop again on resume
}

var (
	_ baton.SandboxDriver        = (*Shell)(nil)
	_ baton.SessionSandboxDriver = (*Shell)(nil)
)

// NewShell returns a Shell running sandboxes through h.
// profileOf, when not nil, names the profile of a Baton session, for the
// metadata of session.assign.
func NewShell(h *Hub, profileOf func(ctx context.Context, sessionID string) (string, error)) *Shell {
	ctx, stop := context.WithCancel(context.Background())
	return &Shell{hub: h, profileOf: profileOf, ctx: ctx, stop: stop, sandboxes: map[string]*Binding{}, stopping: map[*Binding]chan struct{}{}}
}

// Close gives up the stops still waiting for a detached executor.
func (s *Shell) Close() error {
	s.stop()
	s.wg.Wait()
	return nil
}

// Owns reports whether id is one of this Shell's sandboxes.
func (s *Shell) Owns(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sandboxes[id] != nil
}

// EnsureImage checks the image's form; whether its machine exists is the
// caller's business (the Shell knows only live executors).
func (s *Shell) EnsureImage(_ context.Context, image string) error {
	if _, ok := MachineOf(image); !ok {
		return fmt.Errorf("image %q is not of the form %s<machine_id>", image, ImagePrefix)
	}
	return nil
}

// Start binds a new sandbox to a connected executor of the image's
// machine that offers a shell, least loaded first.
func (s *Shell) Start(ctx context.Context, image string) (string, error) {
	return s.StartFor(ctx, "", image)
}

// StartFor is Start for Baton session sessionID: when the hub mints views
// (Options.Files) and the executor declared capabilities.fs.fuse, the
// session's files are mounted in the sandbox before it is returned, and
// mounted again after every resume of the executor. A mount the executor
// refuses fails the start (and stops the sandbox).
func (s *Shell) StartFor(ctx context.Context, sessionID, image string) (string, error) {
	id, b, err := s.start(ctx, sessionID, image)
	if err != nil || sessionID == "" {
		return id, err
	}
	if err := s.hub.mountFiles(ctx, b, sessionID); err != nil && !errors.Is(err, ErrDetached) { // detached: mounted on resume
		if serr := s.Stop(context.WithoutCancel(ctx), id); serr != nil {
			s.hub.log.Warn("executor: stopping a sandbox whose files did not mount", slog.String("sandbox_id", id), slog.Any("error", serr))
		}
		return "", fmt.Errorf("mount the session's files on executor %s: %w", b.ExecutorID(), err)
	}
	return id, nil
}

// start binds a new sandbox; the executor's session events go to the log
// of Baton session sessionID ("" refuses them).
func (s *Shell) start(ctx context.Context, sessionID, image string) (string, *Binding, error) {
	machine, ok := MachineOf(image)
	if !ok {
		return "", nil, fmt.Errorf("image %q is not of the form %s<machine_id>", image, ImagePrefix)
	}
	meta := proto.AssignMetadata{Source: proto.SourceHarness}
	if s.profileOf != nil && sessionID != "" {
		pid, err := s.profileOf(ctx, sessionID)
		if err != nil {
			return "", nil, fmt.Errorf("profile of session %s: %w", sessionID, err)
		}
		meta.ProfileID = pid
	}
	id := baton.NewID("sbx_")
	b, err := s.hub.Assign(ctx, Target{MachineID: machine, Capability: CapabilityProcess}, Assignment{
		SessionID: id,
		Metadata:  meta,
		Hooks:     Hooks{OnResume: s.onResume},
		Events:    sessionID,
	})
	switch {
	case errors.Is(err, ErrNoExecutor) && !s.connected(machine):
		return "", nil, fmt.Errorf("no executor of machine %s with a shell (capability process) is connected", machine)
	case errors.Is(err, ErrNoExecutor), errors.Is(err, ErrOverCapacity):
		return "", nil, fmt.Errorf("every executor shell of machine %s is at capacity (process.max_sessions)", machine)
	case err != nil:
		return "", nil, err
	}
	s.mu.Lock()
	s.sandboxes[id] = b
	s.mu.Unlock()
	return id, b, nil
}

// connected reports whether a shell executor of machine is connected
// (when Assign found none free, all of them are full).
func (s *Shell) connected(machine string) bool {
	for _, in := range s.hub.Executors(Target{MachineID: machine, Capability: CapabilityProcess}) {
		if in.Connected {
			return true
		}
	}
	return false
}

// execOutput is process.exec's result content.
type execOutput struct {
	Stdout    *string `json:"stdout"`
	Stderr    string  `json:"stderr"`
	ExitCode  int     `json:"exit_code"`
	Truncated bool    `json:"truncated"`
	Error     string  `json:"error"`
}

// Exec runs `sh -c command` on the sandbox's executor, in the directory
// of its session's workspace view when the files are mounted (cwd, e.g.
// "/sessions/sbx_1/workspace", which the executor maps to where it
// mounted the view). opt.Stdin is
// refused (ErrNoStdin); opt.Limit (default DefaultExecLimit) caps each
// stream. ctx's deadline, if any, is sent as timeout_ms. A command that
// could not run or was stopped is an error carrying what output there
// was; a non-zero exit is a result.
func (s *Shell) Exec(ctx context.Context, id, command string, opt baton.ExecOptions) (baton.ExecResult, error) {
	if opt.Stdin != nil {
		return baton.ExecResult{}, ErrNoStdin
	}
	s.mu.Lock()
	b := s.sandboxes[id]
	s.mu.Unlock()
	if b == nil {
		return baton.ExecResult{}, fmt.Errorf("unknown executor sandbox %s", id)
	}
	input := map[string]any{"command": command}
	if cwd := s.hub.mountedCwd(b); cwd != "" {
		input["cwd"] = cwd // the session's files: a relative path names one of them
	}
	var timeout time.Duration
	if dl, ok := ctx.Deadline(); ok {
		timeout = max(time.Until(dl), time.Millisecond)
		input["timeout_ms"] = timeout.Milliseconds()
	}
	res, err := b.Call(ctx, baton.NewID("call_"), ToolProcessExec, baton.MarshalJSON(input), timeout)
	if err != nil {
		return baton.ExecResult{}, shellError(err, b)
	}
	r, err := execResult(res.Content, opt.Limit)
	if err != nil {
		return r, fmt.Errorf("executor %s: %w", b.ExecutorID(), err)
	}
	return r, nil
}

// execResult reads process.exec's content {stdout, stderr, exit_code,
// truncated?, error?}, each stream cut at limit bytes (DefaultExecLimit
// when limit <= 0). An error member is an error returned with the
// output; anything but that shape is an error.
func execResult(content json.RawMessage, limit int) (baton.ExecResult, error) {
	var out execOutput
	if json.Unmarshal(content, &out) != nil || out.Stdout == nil {
		return baton.ExecResult{}, fmt.Errorf("process.exec answered %s", clip(string(content), 512))
	}
	if limit <= 0 {
		limit = DefaultExecLimit
	}
	r := baton.ExecResult{ExitCode: out.ExitCode, Truncated: out.Truncated}
	var cut1, cut2 bool
	r.Stdout, cut1 = cutUTF8(*out.Stdout, limit)
	r.Stderr, cut2 = cutUTF8(out.Stderr, limit)
	r.Truncated = r.Truncated || cut1 || cut2
	if out.Error != "" {
		return r, errors.New(out.Error)
	}
	return r, nil
}

// shellError explains a failed process.exec.
func shellError(err error, b *Binding) error {
	switch {
	case errors.Is(err, ErrResumeWindow):
		return fmt.Errorf("the executor shell of this sandbox disconnected and did not come back in time (%w)", err)
	case errors.Is(err, ErrExecutorClosed):
		return fmt.Errorf("the executor shell of this sandbox was stopped; start a new sandbox (%w)", err)
	case errors.Is(err, ErrSessionEnded), errors.Is(err, ErrSessionLost):
		return fmt.Errorf("the executor shell of this sandbox is gone (%w)", err)
	}
	return fmt.Errorf("executor %s: process.exec: %w", b.ExecutorID(), err)
}

// Stop ends the sandbox: session.stop to its executor, which stops every
// process of it and reports session.ended. An unknown id is not an error.
// When the executor is away the stop is sent when it resumes.
func (s *Shell) Stop(ctx context.Context, id string) error {
	s.mu.Lock()
	b := s.sandboxes[id]
	delete(s.sandboxes, id)
	s.mu.Unlock()
	if b == nil || isDone(b) {
		return nil
	}
	// Registered first, so that a resume racing with the refusal below
	// still wakes the later stop.
	wake := make(chan struct{}, 1)
	s.mu.Lock()
	s.stopping[b] = wake
	s.mu.Unlock()
	err := s.end(ctx, b)
	if errors.Is(err, ErrDetached) {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.stopLater(b, wake)
		}()
		return nil
	}
	s.forget(b)
	if err != nil && isDone(b) {
		return nil // it ended anyway
	}
	return err
}

// end unmounts the sandbox's files, flushing what was written to them,
// and sends session.stop.
func (s *Shell) end(ctx context.Context, b *Binding) error {
	switch err := s.hub.unmountFiles(ctx, b); {
	case errors.Is(err, ErrDetached):
		return err
	case err != nil && !isDone(b):
		s.hub.log.Warn("executor: unmounting a sandbox's files", slog.String("sandbox_id", b.SessionID()), slog.Any("error", err))
	}
	_, err := b.Stop(ctx, "sandbox stopped")
	return err
}

func (s *Shell) forget(b *Binding) {
	s.mu.Lock()
	delete(s.stopping, b)
	s.mu.Unlock()
}

// stopLater sends session.stop once b's executor resumes, unless the
// binding ends first or the Shell closes.
func (s *Shell) stopLater(b *Binding, wake <-chan struct{}) {
	defer s.forget(b)
	for {
		select {
		case <-wake:
		case <-b.Done():
			return
		case <-s.ctx.Done():
			return
		}
		if err := s.end(s.ctx, b); !errors.Is(err, ErrDetached) {
			if err != nil && s.ctx.Err() == nil && !isDone(b) {
				s.hub.log.Warn("executor: stopping a sandbox after resume", slog.String("sandbox_id", b.SessionID()), slog.Any("error", err))
			}
			return
		}
	}
}

// onResume mounts the sandbox's files again for the new epoch, then
// wakes a stop that waited for the executor.
func (s *Shell) onResume(b *Binding) {
	if err := s.hub.remountFiles(s.ctx, b); err != nil && !errors.Is(err, ErrDetached) && !isDone(b) {
		s.hub.log.Warn("executor: mounting a sandbox's files after a resume", slog.String("sandbox_id", b.SessionID()), slog.Any("error", err))
	}
	s.mu.Lock()
	ch := s.stopping[b]
	s.mu.Unlock()
	if ch != nil {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// cutUTF8 keeps at most n bytes of s, cut on a rune boundary.
func cutUTF8(s string, n int) (string, bool) {
	if len(s) <= n {
		return s, false
	}
	i := n
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i], true
}

// clip shortens s for an error message.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	out, _ := cutUTF8(s, n)
	return out + "…"
}
