package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// SandboxTarget is where a builtin tool runs its commands.
type SandboxTarget int

const (
	// TargetNone runs commands on this machine through /bin/sh -c, with
	// no isolation.
	TargetNone SandboxTarget = iota
	// TargetLocal runs them in a container of ShellConfig.Image on this
	// machine, started through the container CLI (docker by default) on
	// first use and reused until the session closes.
	TargetLocal
	// TargetRemote runs them in the session's remote sandbox on the
	// server, started with Session.StartRemoteSandbox.
	TargetRemote
)

// RemoteMode says who runs a TargetRemote shell tool.
type RemoteMode int

const (
	// RemoteAuto declares the tool in the session's sandbox_tools: the
	// server runs it and builds its result; the turn does not pause.
	RemoteAuto RemoteMode = iota
	// RemoteManual makes it a client tool whose handler runs the command
	// with session.execRemoteSandbox and returns ShellConfig.Transform's
	// result.
	RemoteManual
)

// ShellCommandTool is the name of the arbitrary-command shell tool.
const ShellCommandTool = "run_shell_command"

// ShellConfig configures a shell tool (Harness.AddShellTool).
type ShellConfig struct {
	// Name and Template make a named tool that runs one command: every
	// {param} of Template becomes a required string input, substituted
	// shell-quoted (in single quotes, so the shell reads one literal
	// word). Without them the tool is
	// run_shell_command, which runs any {command}.
	Name        string
	Description string
	Template    string

	Target SandboxTarget
	// Image is the container image of TargetLocal.
	Image string
	// Engine is the container CLI of TargetLocal: "docker" (the
	// default), "container" (Apple's), or a path to either.
	Engine string

	// Mode and Transform apply to TargetRemote. A nil Transform returns
	// the ExecResult as JSON text.
	Mode      RemoteMode
	Transform func(ExecResult) (any, error)

	// Timeout, when positive, kills a TargetNone or TargetLocal command
	// (its whole process group) that runs longer; the call then fails.
	// Cancelling the tool call's context kills it too.
	Timeout time.Duration
	// MaxOutput bounds each output stream of a TargetNone or TargetLocal
	// command; zero means OutputCap. A cut stream ends with
	// "\n[output truncated]".
	MaxOutput int
}

// ExecResult is what a sandbox command printed and its exit code (-1 when
// a signal ended it).
type ExecResult struct {
	Stdout   string `json:"stdout"`
	Stderr   string `json:"stderr"`
	ExitCode int    `json:"exit_code"`
	// Truncated says a stream was cut at the output cap (local runs only).
	Truncated bool `json:"-"`
}

// truncNote ends an output stream that was cut, as the server's sandbox
// does.
const truncNote = "\n[output truncated]"

// AddShellTool adds a shell tool. A TargetRemote tool in RemoteAuto mode
// is a declaration sent at Connect and Join (sandbox_tools) and run by the
// server; every other one is a client tool whose handler runs the command
// and returns {"stdout","stderr","exit_code"} as JSON text. A command that
// cannot run (sandbox failure, timeout, cancel) is a handler error, which
// the model sees as an is_error result. TargetNone and TargetLocal runs
// are reported with session.reportLocalSandbox, best effort.
//
// Shell tools run only inside Session.Send: their handlers need the
// session (SessionFrom).
func (h *Harness) AddShellTool(cfg ShellConfig) error {
	t, err := newShellTool(cfg)
	if err != nil {
		return err
	}
	if cfg.Target == TargetRemote && cfg.Mode == RemoteAuto {
		h.mu.Lock()
		defer h.mu.Unlock()
		for i := range h.sandbox {
			if h.sandbox[i].Name == t.def.Name {
				h.sandbox[i] = t.def
				return nil
			}
		}
		h.sandbox = append(h.sandbox, t.def)
		return nil
	}
	h.RegisterTool(t.def, t.handle)
	return nil
}

type shellTool struct {
	def    ToolDef
	cfg    ShellConfig
	params []string // nil for run_shell_command
}

func newShellTool(cfg ShellConfig) (*shellTool, error) {
	if cfg.Target < TargetNone || cfg.Target > TargetRemote {
		return nil, fmt.Errorf("client: shell tool: unknown target %d", cfg.Target)
	}
	if cfg.Target == TargetLocal && strings.TrimSpace(cfg.Image) == "" {
		return nil, errors.New("client: shell tool: TargetLocal needs an Image")
	}
	t := &shellTool{cfg: cfg}
	if cfg.Template == "" && cfg.Name == "" {
		t.def = ToolDef{
			Name: ShellCommandTool,
			Description: "Run an arbitrary shell command inside the configured sandbox and return its " +
				"stdout, stderr, and exit code.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string",` +
				`"description":"The shell command to run inside the sandbox."}},"required":["command"],"additionalProperties":false}`),
		}
		return t, nil
	}
	if cfg.Name == "" || cfg.Template == "" {
		return nil, errors.New("client: shell tool: a named tool needs both Name and Template")
	}
	params, err := templateParams(cfg.Template)
	if err != nil {
		return nil, fmt.Errorf("client: shell tool %q: %w", cfg.Name, err)
	}
	t.params = params
	t.def = ToolDef{Name: cfg.Name, Description: cfg.Description, InputSchema: templateSchema(params)}
	return t, nil
}

// templateSchema is the input schema of a named tool: one required string
// per parameter.
func templateSchema(params []string) json.RawMessage {
	type prop struct {
		Type        string `json:"type"`
		Description string `json:"description"`
	}
	props := make(map[string]prop, len(params))
	for _, p := range params {
		props[p] = prop{"string", "Value substituted for {" + p + "} (shell-escaped before use)."}
	}
	b, _ := json.Marshal(struct {
		Type       string          `json:"type"`
		Properties map[string]prop `json:"properties"`
		Required   []string        `json:"required"`
		Additional bool            `json:"additionalProperties"`
	}{"object", props, append([]string{}, params...), false})
	return b
}

// command builds the command line of one call.
func (t *shellTool) command(raw json.RawMessage) (string, error) {
	var in map[string]any
	_ = json.Unmarshal(raw, &in)
	if t.params == nil {
		c, ok := in["command"].(string)
		if !ok {
			return "", errors.New("run_shell_command requires a string `command`")
		}
		return c, nil
	}
	vals := make(map[string]string, len(t.params))
	for k, v := range in {
		if s, ok := v.(string); ok {
			vals[k] = s
		}
	}
	return interpolate(t.cfg.Template, vals)
}

func (t *shellTool) handle(ctx context.Context, raw json.RawMessage) (any, error) {
	s, ok := SessionFrom(ctx)
	if !ok {
		return nil, errNoSession
	}
	command, err := t.command(raw)
	if err != nil {
		return nil, err
	}
	var res ExecResult
	switch t.cfg.Target {
	case TargetNone:
		res, err = s.execHost(ctx, command, t.cfg.Timeout, t.cfg.MaxOutput)
	case TargetLocal:
		res, err = s.execLocal(ctx, t.cfg.Engine, t.cfg.Image, command, t.cfg.Timeout, t.cfg.MaxOutput)
	default:
		res, err = s.ExecRemoteSandbox(ctx, command)
		if err == nil && t.cfg.Transform != nil {
			return t.cfg.Transform(res)
		}
	}
	if err != nil {
		return nil, err
	}
	return jsonText(res), nil
}

// execResult converts a finished process, noting cut streams.
func execResult(o procOut) ExecResult {
	r := ExecResult{Stdout: o.stdout, Stderr: o.stderr, ExitCode: o.exit, Truncated: o.cutOut || o.cutErr}
	if o.cutOut {
		r.Stdout += truncNote
	}
	if o.cutErr {
		r.Stderr += truncNote
	}
	return r
}

// execHost runs command through /bin/sh -c on this machine, reporting
// running, then stopped or error, as an unsandboxed local sandbox.
func (s *Session) execHost(ctx context.Context, command string, timeout time.Duration, max int) (ExecResult, error) {
	s.reportSandbox(ctx, SandboxReport{State: "running"})
	out, err := runProc(ctx, procSpec{prog: "/bin/sh", args: []string{"-c", command}, timeout: timeout, max: max})
	if err != nil {
		s.reportSandbox(ctx, SandboxReport{State: "error", Detail: err.Error()})
		return ExecResult{}, err
	}
	s.reportSandbox(ctx, SandboxReport{State: "stopped"})
	return execResult(out), nil
}

// templateParams returns the distinct {param} names of a command template
// in order of first use. An empty {} or an unterminated { is an error; a
// lone } is literal text.
func templateParams(tmpl string) ([]string, error) {
	var out []string
	err := scanTemplate(tmpl, func(name string) error {
		for _, p := range out {
			if p == name {
				return nil
			}
		}
		out = append(out, name)
		return nil
	}, nil)
	if out == nil {
		out = []string{}
	}
	return out, err
}

// interpolate substitutes every {param} of tmpl with its shell-quoted
// value in one pass: substituted text is never scanned again.
func interpolate(tmpl string, vals map[string]string) (string, error) {
	var b strings.Builder
	err := scanTemplate(tmpl, func(name string) error {
		v, ok := vals[name]
		if !ok {
			return fmt.Errorf("missing required string parameter `%s`", name)
		}
		b.WriteString(shellQuote(v))
		return nil
	}, &b)
	return b.String(), err
}

// scanTemplate calls param for each placeholder of tmpl and copies the
// literal text to lit (when not nil).
func scanTemplate(tmpl string, param func(string) error, lit *strings.Builder) error {
	for {
		i := strings.IndexByte(tmpl, '{')
		if i < 0 {
			if lit != nil {
				lit.WriteString(tmpl)
			}
			return nil
		}
		if lit != nil {
			lit.WriteString(tmpl[:i])
		}
		j := strings.IndexByte(tmpl[i:], '}')
		if j < 0 {
			return errors.New("unterminated `{` in command template")
		}
		name := tmpl[i+1 : i+j]
		if name == "" {
			return errors.New("empty `{}` placeholder in command template")
		}
		if err := param(name); err != nil {
			return err
		}
		tmpl = tmpl[i+j+1:]
	}
}

// shellQuote makes s one literal POSIX shell word: s in single quotes,
// each single quote in s closed, escaped and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
