package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"time"
	"unicode/utf8"

	"github.com/baton-engine/baton/internal/proc"
)

// OutputCap is the default bound, in bytes, of each output stream a
// builtin tool keeps from a command or subagent (BAE's 65 536). Longer
// output is cut on a UTF-8 boundary.
const OutputCap = 64 << 10

// procSpec is one process for runProc to run.
type procSpec struct {
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

// killGrace is how long a cancelled process has between SIGTERM and
// SIGKILL, and how long a finished process's output pipes are drained:
// descendants that still hold them must not hold the caller.
const killGrace = 2 * time.Second

// runProc runs p as a process group of its own (package internal/proc: on
// Linux with SIGKILL as its parent-death signal, so that it dies with
// this process). Cancelling ctx or reaching the timeout sends the group
// SIGTERM and, killGrace later, SIGKILL; then runProc returns ctx's error
// or a *timeoutError, and what is left of the group is killed. A process
// that cannot start returns that error; a non-zero exit is a result, not
// an error.
func runProc(ctx context.Context, p procSpec) (procOut, error) {
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
	proc.Group(cmd, killGrace)
	err := proc.Run(runCtx, cmd)
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
