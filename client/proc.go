package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"time"
	"unicode/utf8"
)

// OutputCap is the default bound, in bytes, of each output stream a
// builtin tool keeps from a command or subagent (BAE's 65 536). Longer
// output is cut on a UTF-8 boundary.
const OutputCap = 64 << 10

// proc is one process for runProc to run.
type proc struct {
	prog string
	args []string
	// stdin is written to the process; nil gives it no input (/dev/null).
	stdin []byte
	// timeout, when positive, kills the process (its whole group) after
	// that long.
	timeout time.Duration
	// max bounds each captured stream; <= 0 means OutputCap.
	max int
}

// procOut is what a process printed and how it ended.
type procOut struct {
	stdout, stderr string
	// exit is the exit code, -1 when a signal ended the process.
	exit int
	// cutOut and cutErr say which streams were cut at max.
	cutOut, cutErr bool
}

// timeoutError ends a process that outlived its timeout.
type timeoutError struct{ d time.Duration }

func (e *timeoutError) Error() string { return fmt.Sprintf("command timed out after %s", e.d) }

// waitDelay bounds how long a finished or killed process's output pipes
// are drained: descendants that still hold them must not hold the caller.
const waitDelay = 2 * time.Second

// runProc runs p in a new process group (on Linux with SIGKILL as its
// parent-death signal, so that it dies with this process). Cancelling ctx or reaching the
// timeout kills the whole group; then runProc returns ctx's error or a
// *timeoutError. A process that cannot start returns that error; a
// non-zero exit is a result, not an error.
func runProc(ctx context.Context, p proc) (procOut, error) {
	runCtx := ctx
	if p.timeout > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, p.timeout)
		defer cancel()
	}
	max := p.max
	if max <= 0 {
		max = OutputCap
	}
	stdout, stderr := &capture{max: max}, &capture{max: max}
	cmd := exec.CommandContext(runCtx, p.prog, p.args...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if p.stdin != nil {
		cmd.Stdin = bytes.NewReader(p.stdin)
	}
	ownGroup(cmd)
	cmd.WaitDelay = waitDelay
	// Linux sends the parent-death signal when the thread that started the
	// child exits: a locked thread does not before it is unlocked, here
	// once the child has been waited for.
	runtime.LockOSThread()
	err := cmd.Run()
	runtime.UnlockOSThread()
	st := cmd.ProcessState
	if st == nil {
		return procOut{}, err // never started
	}
	if st.Exited() || runCtx.Err() == nil {
		// Finished on its own, even if the deadline came right after. An
		// error here is only ErrWaitDelay: a descendant kept a pipe open.
		var out procOut
		out.stdout, out.cutOut = stdout.text()
		out.stderr, out.cutErr = stderr.text()
		out.exit = st.ExitCode()
		return out, nil
	}
	if ctx.Err() != nil {
		return procOut{}, ctx.Err()
	}
	return procOut{}, &timeoutError{p.timeout}
}

// capture keeps the first max+1 bytes written to it and discards the
// rest, so the process never blocks on a full pipe.
type capture struct {
	max int
	buf []byte
}

func (c *capture) Write(b []byte) (int, error) {
	if room := c.max + 1 - len(c.buf); room > 0 {
		c.buf = append(c.buf, b[:min(room, len(b))]...)
	}
	return len(b), nil
}

// text returns the kept output, cut to max bytes on a UTF-8 boundary, and
// whether it was cut.
func (c *capture) text() (string, bool) {
	b, cut := cutUTF8(c.buf, c.max)
	return string(b), cut
}

// cutUTF8 returns b cut to at most max bytes without splitting a UTF-8
// sequence, and whether it cut anything. Invalid bytes are kept as they
// are; JSON encoding replaces them later.
func cutUTF8(b []byte, max int) ([]byte, bool) {
	if len(b) <= max {
		return b, false
	}
	n := max
	for i := max; i >= 0 && i > max-utf8.UTFMax; i-- {
		if utf8.RuneStart(b[i]) {
			// The rune starting at b[i] crosses the cut unless it starts
			// at the cut or ends before it: then drop it whole.
			if i < max && !utf8.FullRune(b[i:max]) {
				n = i
			}
			break
		}
	}
	return b[:n], true
}

// isTimeout reports whether err is a *timeoutError.
func isTimeout(err error) bool {
	var t *timeoutError
	return errors.As(err, &t)
}
