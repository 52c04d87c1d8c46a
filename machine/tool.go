package machine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/baton-engine/baton/client/executor"
	"github.com/baton-engine/baton/internal/proc"
	"github.com/baton-engine/baton/internal/supervisor"
)

// killGrace is how long a cancelled child's process group has between
// SIGTERM and SIGKILL.
const killGrace = 2 * time.Second

// childProc is one process for runChild.
type childProc struct {
	argv    []string
	dir     string
	env     []string // nil inherits
	stdin   []byte
	timeout time.Duration // 0: none
	max     int           // bytes kept of each stream
}

// childOut is what a child printed and how it exited.
type childOut struct {
	stdout, stderr string
	cutOut, cutErr bool
	exit           int // 128+signal for a signalled child
}

// errChildTimeout ends a child that outlived its timeout.
var errChildTimeout = errors.New("timed out")

// runChild runs c in a process group of its own with its stdin written
// from c.stdin. Cancelling ctx or reaching the timeout sends the group
// SIGTERM and, killGrace later, SIGKILL; runChild then returns ctx's
// error or errChildTimeout with whatever output there was. Whatever the
// child left running in its group is killed when it exits. A non-zero
// exit is an outcome, not an error.
func runChild(ctx context.Context, c childProc) (childOut, error) {
	run := ctx
	if c.timeout > 0 {
		var cancel context.CancelFunc
		run, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	stdout, stderr := &capBuf{max: c.max}, &capBuf{max: c.max}
	cmd := exec.CommandContext(run, c.argv[0], c.argv[1:]...)
	cmd.Dir, cmd.Env = c.dir, c.env
	cmd.Stdin = bytes.NewReader(c.stdin)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	proc.Group(cmd, killGrace)
	supervisor.Wrap(cmd)
	err := proc.Run(run, cmd)
	proc.Kill(cmd) // what it left running too
	out := childOut{exit: -1}
	out.stdout, out.cutOut = stdout.text()
	out.stderr, out.cutErr = stderr.text()
	if cmd.ProcessState == nil {
		return out, err // never started
	}
	if run.Err() != nil && !cmd.ProcessState.Exited() { // stopped by the cancel or the timeout
		if ctx.Err() != nil {
			return out, ctx.Err()
		}
		return out, errChildTimeout
	}
	out.exit = proc.ExitCode(cmd.ProcessState)
	return out, nil
}

// capBuf keeps the first max bytes written to it and drops the rest, so
// that the child never blocks on a full pipe.
type capBuf struct {
	mu  sync.Mutex
	max int
	buf []byte
	cut bool
}

func (b *capBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	keep := min(len(p), max(b.max-len(b.buf), 0))
	b.buf = append(b.buf, p[:keep]...)
	b.cut = b.cut || keep < len(p)
	return len(p), nil
}

// text returns what was kept, without a rune split by the cap, and
// whether anything was dropped.
func (b *capBuf) text() (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s := b.buf
	if b.cut {
		for n := 0; n < utf8.UTFMax && len(s) > 0 && !utf8.Valid(s); n++ {
			s = s[:len(s)-1]
		}
	}
	return string(s), b.cut
}

// NewTool returns the SDK tool that runs spec in dir with env (nil
// inherits this process's environment). Its stdout is the result; a
// non-zero exit, a timeout or a command that cannot start is an
// is_error result; a cancelled call kills the command's process group.
func NewTool(spec ToolSpec, dir string, env []string) executor.Tool {
	r := &toolRunner{spec: spec, dir: dir, env: env}
	return executor.Tool{Def: spec.Def, Handle: func(ctx context.Context, c executor.Call) (executor.Result, error) {
		return r.run(ctx, c.Input)
	}}
}

// toolRunner runs a command-backed tool in the work directory.
type toolRunner struct {
	spec ToolSpec
	dir  string
	env  []string
}

// run runs the tool with input: its stdout is the result; a non-zero
// exit, a timeout or a command that cannot start is an is_error result;
// a cancelled ctx returns ctx's error.
func (r *toolRunner) run(ctx context.Context, input json.RawMessage) (executor.Result, error) {
	if len(bytes.TrimSpace(input)) == 0 || bytes.Equal(bytes.TrimSpace(input), []byte("null")) {
		input = json.RawMessage("{}")
	}
	vals, err := inputValues(input)
	if err != nil {
		return executor.ErrorResult(err.Error()), nil
	}
	argv := r.argv(vals)
	out, err := runChild(ctx, childProc{argv: argv, dir: r.dir, env: r.env, stdin: input, timeout: r.spec.Timeout, max: r.spec.MaxOutput})
	name := r.spec.Def.Name
	switch {
	case ctx.Err() != nil:
		return executor.Result{}, ctx.Err()
	case errors.Is(err, errChildTimeout):
		return executor.ErrorResult(withOutput(fmt.Sprintf("%s timed out after %s", name, r.spec.Timeout), out)), nil
	case err != nil:
		return executor.ErrorResult(fmt.Sprintf("%s: cannot run %s: %v", name, argv[0], err)), nil
	case out.exit != 0:
		return executor.ErrorResult(withOutput(fmt.Sprintf("%s failed with exit status %d", name, out.exit), out)), nil
	}
	return executor.TextResult(out.stdout + cutNote(out.cutOut, r.spec.MaxOutput)), nil
}

// argv renders the command for input values: a script runs with sh -c,
// its placeholders shell-quoted; an argv's whole-element placeholders
// become one argument each, as they are.
func (r *toolRunner) argv(vals map[string]string) []string {
	if r.spec.Script != "" {
		return []string{"/bin/sh", "-c", fillScript(r.spec.Script, func(name string) string { return shQuote(vals[name]) })}
	}
	return expandArgv(r.spec.Argv, vals)
}

// expandArgv replaces each element that is one whole placeholder by its
// value.
func expandArgv(tmpl []string, vals map[string]string) []string {
	out := make([]string, len(tmpl))
	for i, a := range tmpl {
		out[i] = a
		if names := Placeholders(a); len(names) == 1 && a == "{"+names[0]+"}" {
			out[i] = vals[names[0]]
		}
	}
	return out
}

// withOutput appends what a failed command printed: stderr, or stdout
// when stderr is empty.
func withOutput(msg string, out childOut) string {
	text, cut := out.stderr, out.cutErr
	if strings.TrimSpace(text) == "" {
		text, cut = out.stdout, out.cutOut
	}
	if strings.TrimSpace(text) == "" {
		return msg
	}
	note := ""
	if cut {
		note = "\n[output truncated]"
	}
	return msg + ":\n" + text + note
}

func cutNote(cut bool, limit int) string {
	if !cut {
		return ""
	}
	return fmt.Sprintf("\n[output truncated at %d bytes]", limit)
}

// inputValues reads a tool input object as placeholder values: strings
// as they are, null as "", anything else as compact JSON.
func inputValues(input json.RawMessage) (map[string]string, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(input, &m); err != nil || m == nil {
		return nil, errors.New("the tool input must be a JSON object")
	}
	vals := make(map[string]string, len(m))
	for k, v := range m {
		var s string
		switch {
		case json.Unmarshal(v, &s) == nil:
			vals[k] = s
		case string(v) == "null":
			vals[k] = ""
		default:
			var b bytes.Buffer
			if json.Compact(&b, v) != nil {
				return nil, fmt.Errorf("input %s is not valid JSON", strconv.Quote(k))
			}
			vals[k] = b.String()
		}
	}
	return vals, nil
}

// fillScript replaces every placeholder of s (see Placeholders) with f of
// its name, in one pass: substituted text is never scanned again.
func fillScript(s string, f func(name string) string) string {
	var b strings.Builder
	last := 0
	scanPlaceholders(s, func(start, end int) {
		b.WriteString(s[last:start])
		b.WriteString(f(s[start+1 : end-1]))
		last = end
	})
	b.WriteString(s[last:])
	return b.String()
}

// shQuote makes s one literal word for sh.
func shQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// Placeholders returns the names of the {name} placeholders of s, in
// order: a {name} whose name is letters, digits and '_', not starting
// with a digit, and that does not follow a '$' (a shell's ${VAR} is
// left alone). These are the placeholders NewTool and CommandAgent fill
// in.
func Placeholders(s string) []string {
	var out []string
	scanPlaceholders(s, func(start, end int) { out = append(out, s[start+1:end-1]) })
	return out
}

// scanPlaceholders calls f with the bounds [start, end) of each
// placeholder of s (see Placeholders).
func scanPlaceholders(s string, f func(start, end int)) {
	for i := 0; i < len(s); i++ {
		if s[i] != '{' || (i > 0 && s[i-1] == '$') {
			continue
		}
		j := i + 1
		for j < len(s) && isNameByte(s[j], j == i+1) {
			j++
		}
		if j > i+1 && j < len(s) && s[j] == '}' {
			f(i, j+1)
			i = j
		}
	}
}

func isNameByte(b byte, first bool) bool {
	switch {
	case b == '_', b >= 'a' && b <= 'z', b >= 'A' && b <= 'Z':
		return true
	case b >= '0' && b <= '9':
		return !first
	}
	return false
}
