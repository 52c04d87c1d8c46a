package sandbox

import (
	"strconv"
	"unicode/utf8"

	"github.com/baton-engine/baton"
)

// Output caps, shared by the drivers. Each output stream of an exec keeps
// its first bytes up to a cap, cut on a UTF-8 boundary. Under the driver's
// own cap (an exec that sets no limit: session.execRemoteSandbox and
// Auto-mode sandbox tools) a cut stream ends with a note, within the cap,
// saying how many of its bytes are missing:
//
//	…last kept line
//	[output truncated: 1234 more bytes]
//
// An exec with its own limit (a remote subagent's output, an executor's
// shell) gets the bare cut: its caller reports the cut with Truncated.

// outputBuffers returns the stdout and stderr buffers of an exec with the
// given limit on a driver whose cap is driverCap.
func outputBuffers(limit, driverCap int) (stdout, stderr *capBuffer) {
	n, note := outputLimit(limit, driverCap), limit <= 0
	return &capBuffer{max: n, note: note}, &capBuffer{max: n, note: note}
}

// outputLimit is the cap of each output stream of an exec: its own limit,
// else the driver's cap, else DefaultOutputCap.
func outputLimit(limit, driverCap int) int {
	if limit > 0 {
		return limit
	}
	if driverCap > 0 {
		return driverCap
	}
	return DefaultOutputCap
}

// execResult is the result of an exec with the given output and exit code.
func execResult(stdout, stderr *capBuffer, code int) baton.ExecResult {
	return baton.ExecResult{Stdout: stdout.String(), Stderr: stderr.String(), ExitCode: code,
		Truncated: stdout.dropped > 0 || stderr.dropped > 0}
}

// capBuffer keeps the first max bytes written and counts the rest; with
// note set, a cut is noted in the text.
type capBuffer struct {
	max     int
	note    bool
	buf     []byte
	dropped int64
}

func (c *capBuffer) Write(p []byte) (int, error) {
	room := c.max - len(c.buf)
	if room >= len(p) {
		c.buf = append(c.buf, p...)
	} else {
		if room > 0 {
			c.buf = append(c.buf, p[:room]...)
		}
		c.dropped += int64(len(p) - max(room, 0))
	}
	return len(p), nil
}

// String returns the kept bytes. After a cut, an incomplete UTF-8
// sequence at the end is dropped too, and with note set the text ends
// with truncationNote, for which kept bytes make room: the result is at
// most max bytes. A cap too small for the note gives the bare cut.
func (c *capBuffer) String() string {
	if c.dropped == 0 {
		return string(c.buf)
	}
	kept := trimPartialRune(c.buf)
	total := int64(len(c.buf)) + c.dropped
	if !c.note || len(truncationNote(nil, total)) > c.max {
		return string(kept)
	}
	for {
		note := truncationNote(kept, total-int64(len(kept)))
		if len(kept)+len(note) <= c.max {
			return string(kept) + note
		}
		// kept shrinks every round, at worst to nothing, which fits.
		kept = trimPartialRune(kept[:max(c.max-len(note), 0)])
	}
}

// truncationNote is the line ending an output cut after kept, with n of
// its bytes missing.
func truncationNote(kept []byte, n int64) string {
	note := "[output truncated: " + strconv.FormatInt(n, 10) + " more bytes]"
	if len(kept) > 0 && kept[len(kept)-1] != '\n' {
		note = "\n" + note
	}
	return note
}

// trimPartialRune drops a trailing incomplete UTF-8 sequence.
func trimPartialRune(b []byte) []byte {
	for i := 1; i <= utf8.UTFMax && i <= len(b); i++ {
		c := b[len(b)-i]
		if c < utf8.RuneSelf {
			return b // ASCII: nothing partial after it
		}
		if utf8.RuneStart(c) {
			if !utf8.FullRune(b[len(b)-i:]) {
				return b[:len(b)-i]
			}
			return b
		}
	}
	return b
}
