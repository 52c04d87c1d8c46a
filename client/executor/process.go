package executor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/baton-engine/baton/internal/proc"
)

// ProcessHandler runs remote shell commands: the tool.call "process.exec"
// with input {command, cwd?, timeout_ms?}. Exec returns the command's
// output and exit code; it returns an error (with whatever output there
// was) when the command could not start or was stopped by ctx.
type ProcessHandler interface {
	Exec(ctx context.Context, req ExecRequest) (ExecResult, error)
}

// ExecRequest is one process.exec.
type ExecRequest struct {
	SessionID string
	Command   string
	// Cwd is the directory to run in, as the harness sent it, except that
	// a path in a view of the session's files mounted here (the harness
	// sends a remote sandbox's workspace view path, such as
	// "/sessions/sbx_1/workspace") is the local directory where it is
	// mounted (below FileMounts.Root).
	Cwd     string
	Timeout time.Duration // 0: none
}

// ExecResult is process.exec's content.
type ExecResult struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
	// Truncated is set when either stream passed its cap.
	Truncated bool `json:"truncated,omitempty"`
}

// DefaultMaxOutput caps each of stdout and stderr of a Shell command.
const DefaultMaxOutput = 1 << 20

// ErrTimeout is Shell's error for a command stopped by its timeout.
var ErrTimeout = errors.New("executor: command timed out")

// Shell is the default ProcessHandler: `sh -c command` in Dir (or in
// cwd, relative to Dir), in a process group of its own (package
// internal/proc). On cancel or timeout the group gets SIGTERM and,
// KillGrace later, SIGKILL for whatever is left of it once the shell has
// ended. On Linux the shell also gets SIGKILL when the
// executor's process dies (a parent-death signal); what the shell started
// survives that unless Wrap takes care of it. Each output stream keeps its
// first MaxOutput bytes.
type Shell struct {
	Dir       string        // work directory; "" is the process's
	Env       []string      // nil inherits the executor's environment
	MaxOutput int           // per stream; 0 is DefaultMaxOutput
	KillGrace time.Duration // 0 is 2s
	// Wrap, when set, is called with each command once Shell has set it
	// up, right before it starts; it may change it, for example to run it
	// under a supervisor that kills the whole process group when the
	// executor dies. Cancellation still signals the group of the process
	// that starts.
	Wrap func(*exec.Cmd)
}

// Exec runs req.Command.
func (s *Shell) Exec(ctx context.Context, req ExecRequest) (ExecResult, error) {
	if req.Command == "" {
		return ExecResult{ExitCode: -1}, errors.New("command is empty")
	}
	dir := s.Dir
	if req.Cwd != "" {
		if filepath.IsAbs(req.Cwd) || dir == "" {
			dir = req.Cwd
		} else {
			dir = filepath.Join(dir, req.Cwd)
		}
	}
	if dir != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return ExecResult{ExitCode: -1}, fmt.Errorf("cwd %q is not a directory", dir)
		}
	}
	if req.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, req.Timeout)
		defer cancel()
	}
	limit := s.MaxOutput
	if limit <= 0 {
		limit = DefaultMaxOutput
	}
	grace := s.KillGrace
	if grace <= 0 {
		grace = 2 * time.Second
	}
	stdout, stderr := &capped{max: limit}, &capped{max: limit}
	cmd := exec.CommandContext(ctx, "sh", "-c", req.Command)
	cmd.Dir, cmd.Env = dir, s.Env
	cmd.Stdout, cmd.Stderr = stdout, stderr
	proc.Group(cmd, grace)
	if s.Wrap != nil {
		s.Wrap(cmd)
	}
	err := proc.Run(ctx, cmd)
	res := ExecResult{Stdout: stdout.String(), Stderr: stderr.String(), Truncated: stdout.cut || stderr.cut}
	var ee *exec.ExitError
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		res.ExitCode = -1
		if req.Timeout > 0 {
			return res, fmt.Errorf("%w after %s", ErrTimeout, req.Timeout)
		}
		return res, ErrTimeout
	case ctx.Err() != nil:
		res.ExitCode = -1
		return res, ctx.Err()
	case errors.As(err, &ee):
		res.ExitCode = proc.ExitCode(ee.ProcessState)
		return res, nil
	case err != nil && !errors.Is(err, exec.ErrWaitDelay):
		res.ExitCode = -1
		return res, err
	}
	return res, nil
}

// execTool serves tool.call "process.exec" through Config.Process.
func (e *Executor) execTool(ctx context.Context, c Call) (Result, error) {
	var in struct {
		Command   string `json:"command"`
		Cwd       string `json:"cwd"`
		TimeoutMS int64  `json:"timeout_ms"`
	}
	if err := json.Unmarshal(orEmpty(c.Input, "{}"), &in); err != nil {
		return ErrorResult("invalid process.exec input: " + err.Error()), nil
	}
	if in.Command == "" {
		return ErrorResult("invalid process.exec input: command is required"), nil
	}
	if e.files != nil {
		in.Cwd = e.files.localPath(c.SessionID, in.Cwd) // a mounted view of the session's files
	}
	res, err := e.cfg.Process.Exec(ctx, ExecRequest{SessionID: c.SessionID, Command: in.Command, Cwd: in.Cwd,
		Timeout: time.Duration(in.TimeoutMS) * time.Millisecond})
	out := struct {
		ExecResult
		Error string `json:"error,omitempty"`
	}{ExecResult: res}
	if err != nil {
		out.Error = err.Error()
	}
	r, jerr := JSONResult(out)
	if jerr != nil {
		return Result{}, jerr
	}
	r.IsError = err != nil
	return r, nil
}

// capped keeps the first max bytes written to it.
type capped struct {
	mu  sync.Mutex
	buf []byte
	max int
	cut bool
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - len(c.buf); room < len(p) {
		c.buf = append(c.buf, p[:max(room, 0)]...)
		c.cut = true
	} else {
		c.buf = append(c.buf, p...)
	}
	return len(p), nil
}

func (c *capped) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return string(c.buf)
}
