package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/pelletier/go-toml/v2"

	"github.com/baton-engine/baton/client/executor"
	"github.com/baton-engine/baton/config"
	"github.com/baton-engine/baton/machine"
)

// Defaults of executor.toml.
const (
	defaultToolTimeout   = 5 * time.Minute
	defaultToolOutput    = 64 << 10 // bytes of stdout (and of stderr) a tool keeps
	maxToolOutput        = 8 << 20  // well under the protocol's 16 MiB message
	defaultSandboxIdle   = 10 * time.Minute
	defaultAgentModel    = "default"
	defaultAgentTokens   = 4096
	defaultAgentSteps    = 25
	defaultCustomTimeout = 10 * time.Minute
)

// execConfig is a validated executor.toml.
type execConfig struct {
	Tools   []machine.ToolSpec
	Process *machine.ProcessSpec
	Agent   *machine.AgentSpec
	Files   *execFiles

	file string
	keys *config.Locator
}

// execFiles is [files]: how a machine mounts the session file views
// fs.mount hands it.
type execFiles struct {
	Root         string        // views are mounted below it; "" is --work-dir, relative is from --work-dir
	Mode         string        // executor.MountAuto, MountFUSE or MountSync
	SyncInterval time.Duration // 0: the SDK default
	AllowOther   bool
}

// configError is a problem in executor.toml, positioned when it can be.
type configError struct {
	File         string
	Line, Column int
	Msg          string
}

func (e *configError) Error() string {
	if e.Line > 0 {
		return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
	}
	return e.File + ": " + e.Msg
}

// The document as decoded, before validation. Unknown keys fail the
// decode (DisallowUnknownFields) with their position.
type (
	execFile struct {
		Tools   []execToolFile   `toml:"tools"`
		Process *execProcessFile `toml:"process"`
		Agent   *execAgentFile   `toml:"agent"`
		Files   *execFilesFile   `toml:"files"`
	}
	execFilesFile struct {
		Root         string `toml:"root"`
		Mode         string `toml:"mode"`
		SyncInterval string `toml:"sync_interval"`
		AllowOther   bool   `toml:"allow_other"`
	}
	execToolFile struct {
		Name        string `toml:"name"`
		Description string `toml:"description"`
		InputSchema any    `toml:"input_schema"` // a JSON string or a table
		Command     any    `toml:"command"`      // an array of strings or a script
		Timeout     string `toml:"timeout"`
		MaxOutput   *int   `toml:"max_output"`
	}
	execProcessFile struct {
		MaxSessions int    `toml:"max_sessions"`
		MaxOutput   *int   `toml:"max_output"`
		Isolate     bool   `toml:"isolate"`
		Image       string `toml:"image"`
		RootfsDir   string `toml:"rootfs_dir"`
		IdleTimeout string `toml:"idle_timeout"`
	}
	execAgentFile struct {
		Type              string   `toml:"type"`
		MaxSessions       int      `toml:"max_sessions"`
		Model             string   `toml:"model"`
		MaxTokens         int      `toml:"max_tokens"`
		System            string   `toml:"system"`
		MaxSteps          int      `toml:"max_steps"`
		CustomToolTimeout string   `toml:"custom_tool_timeout"`
		Command           []string `toml:"command"`
		Timeout           string   `toml:"timeout"`
	}
)

// toolName is what a model provider accepts as a tool name.
var toolName = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// parseExecConfig decodes and validates executor.toml; file names it in
// errors (*configError).
func parseExecConfig(file string, data []byte) (cfg *execConfig, err error) {
	data = data[:len(data):len(data)]
	defer func() {
		if r := recover(); r != nil { // a decoder bug must not take the executor down
			cfg, err = nil, &configError{File: file, Msg: fmt.Sprintf("cannot parse: %v", r)}
		}
	}()
	var f execFile
	if err := toml.NewDecoder(bytes.NewReader(data)).DisallowUnknownFields().Decode(&f); err != nil {
		return nil, decodeError(file, err)
	}
	c := &execConfig{file: file, keys: config.LocateKeyParts(data)}
	seen := map[string]bool{}
	for i := range f.Tools {
		t, err := c.tool(i, &f.Tools[i])
		if err != nil {
			return nil, err
		}
		if seen[t.Def.Name] {
			return nil, c.errorf(fmt.Sprintf("tools.%d.name", i), "tools[%d].name: tool %q is declared twice", i, t.Def.Name)
		}
		seen[t.Def.Name] = true
		c.Tools = append(c.Tools, t)
	}
	if f.Process != nil {
		if c.Process, err = c.process(f.Process); err != nil {
			return nil, err
		}
	}
	if f.Agent != nil {
		if c.Agent, err = c.agent(f.Agent); err != nil {
			return nil, err
		}
	}
	if f.Files != nil {
		if c.Files, err = c.files(f.Files); err != nil {
			return nil, err
		}
	}
	return c, nil
}

func (c *execConfig) files(f *execFilesFile) (*execFiles, error) {
	x := &execFiles{Root: f.Root, Mode: f.Mode, AllowOther: f.AllowOther}
	switch x.Mode {
	case "":
		x.Mode = executor.MountAuto
	case executor.MountAuto, executor.MountFUSE, executor.MountSync:
	default:
		return nil, c.errorf("files.mode", "files.mode: %q must be %q, %q or %q", f.Mode, executor.MountAuto, executor.MountFUSE, executor.MountSync)
	}
	var err error
	if f.SyncInterval != "" {
		if x.SyncInterval, err = c.duration("files.sync_interval", "files.sync_interval", f.SyncInterval); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// decodeError positions a go-toml error.
func decodeError(file string, err error) error {
	var sm *toml.StrictMissingError
	if errors.As(err, &sm) && len(sm.Errors) > 0 {
		e := sm.Errors[0]
		line, col := e.Position()
		return &configError{File: file, Line: line, Column: col, Msg: "unknown key " + strconv.Quote(strings.Join(e.Key(), "."))}
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		line, col := de.Position()
		return &configError{File: file, Line: line, Column: col, Msg: strings.TrimPrefix(de.Error(), "toml: ")}
	}
	return &configError{File: file, Msg: strings.TrimPrefix(err.Error(), "toml: ")}
}

func (c *execConfig) errorf(path, format string, args ...any) error {
	line, col := c.keys.Position(path)
	return &configError{File: c.file, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
}

func (c *execConfig) tool(i int, f *execToolFile) (machine.ToolSpec, error) {
	at := fmt.Sprintf("tools.%d", i)
	show := fmt.Sprintf("tools[%d]", i)
	t := machine.ToolSpec{Timeout: defaultToolTimeout, MaxOutput: defaultToolOutput}
	switch {
	case f.Name == "":
		return t, c.errorf(at, "%s: missing key \"name\"", show)
	case !toolName.MatchString(f.Name):
		return t, c.errorf(at+".name", "%s.name: %q must be 1 to 64 letters, digits, '_' or '-'", show, f.Name)
	}
	t.Def = executor.ToolDef{Name: f.Name, Description: f.Description}
	schema, params, err := c.schema(at+".input_schema", show+".input_schema", f.InputSchema)
	if err != nil {
		return t, err
	}
	t.Def.InputSchema, t.Params = schema, params
	if t.Argv, t.Script, err = c.command(at, show, f.Command, params); err != nil {
		return t, err
	}
	if f.Timeout != "" {
		if t.Timeout, err = c.duration(at+".timeout", show+".timeout", f.Timeout); err != nil {
			return t, err
		}
	}
	if f.MaxOutput != nil {
		if t.MaxOutput, err = c.outputCap(at+".max_output", show+".max_output", *f.MaxOutput); err != nil {
			return t, err
		}
	}
	return t, nil
}

// schema checks input_schema, given as a JSON string or a TOML table,
// and returns it as JSON with its property names.
func (c *execConfig) schema(at, show string, v any) (json.RawMessage, []string, error) {
	var raw []byte
	switch s := v.(type) {
	case nil:
		return nil, nil, nil // the SDK sends the empty object schema
	case string:
		raw = []byte(s)
	case map[string]any:
		b, err := json.Marshal(s)
		if err != nil {
			return nil, nil, c.errorf(at, "%s: %v", show, err)
		}
		raw = b
	default:
		return nil, nil, c.errorf(at, "%s: expected a JSON object in a string, or a table", show)
	}
	var obj struct {
		Type       any                        `json:"type"`
		Properties map[string]json.RawMessage `json:"properties"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, nil, c.errorf(at, "%s: not a JSON object: %v", show, err)
	}
	if obj.Type != "object" {
		return nil, nil, c.errorf(at, "%s: \"type\" must be \"object\"", show)
	}
	params := make([]string, 0, len(obj.Properties))
	for p := range obj.Properties {
		params = append(params, p)
	}
	slices.Sort(params)
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, nil, c.errorf(at, "%s: %v", show, err)
	}
	return buf.Bytes(), params, nil
}

// command checks a tool's command: an argv array whose elements may each
// be one whole {param}, or a sh -c script with {param}s anywhere.
func (c *execConfig) command(at, show string, v any, params []string) ([]string, string, error) {
	at, show = at+".command", show+".command"
	switch cmd := v.(type) {
	case nil:
		return nil, "", c.errorf(strings.TrimSuffix(at, ".command"), "%s: missing key \"command\"", strings.TrimSuffix(show, ".command"))
	case string:
		if strings.TrimSpace(cmd) == "" {
			return nil, "", c.errorf(at, "%s: the script is empty", show)
		}
		if err := checkTemplate(cmd, params); err != nil {
			return nil, "", c.errorf(at, "%s: %v", show, err)
		}
		return nil, cmd, nil
	case []any:
		if len(cmd) == 0 {
			return nil, "", c.errorf(at, "%s: the command is empty", show)
		}
		argv := make([]string, len(cmd))
		for i, e := range cmd {
			s, ok := e.(string)
			if !ok {
				return nil, "", c.errorf(fmt.Sprintf("%s.%d", at, i), "%s[%d]: expected a string", show, i)
			}
			argv[i] = s
		}
		if err := checkArgv(argv, params, "the program"); err != nil {
			return nil, "", c.errorf(at, "%s: %v", show, err)
		}
		return argv, "", nil
	default:
		return nil, "", c.errorf(at, "%s: expected an array of strings or a script string", show)
	}
}

// checkArgv allows placeholders of params only as whole elements after
// the first (what they become is one argument, never parsed by a shell).
func checkArgv(argv, params []string, first string) error {
	if argv[0] == "" {
		return fmt.Errorf("%s is empty", first)
	}
	for i, a := range argv {
		names := machine.Placeholders(a)
		if len(names) == 0 {
			continue
		}
		whole := len(names) == 1 && a == "{"+names[0]+"}"
		switch {
		case i == 0:
			return fmt.Errorf("%s cannot be a placeholder", first)
		case !whole:
			return fmt.Errorf("element %d: a placeholder must be a whole element (%q); use a script string to embed one", i, a)
		case !slices.Contains(params, names[0]):
			return fmt.Errorf("element %d: {%s} is not a property of input_schema", i, names[0])
		}
	}
	return nil
}

// checkTemplate requires every placeholder of a script to name a param.
func checkTemplate(script string, params []string) error {
	for _, n := range machine.Placeholders(script) {
		if !slices.Contains(params, n) {
			return fmt.Errorf("{%s} is not a property of input_schema (write ${%s} for a shell variable)", n, n)
		}
	}
	return nil
}

func (c *execConfig) duration(at, show, s string) (time.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, c.errorf(at, "%s: %q is not a positive duration such as \"30s\"", show, s)
	}
	return d, nil
}

func (c *execConfig) outputCap(at, show string, n int) (int, error) {
	if n <= 0 || n > maxToolOutput {
		return 0, c.errorf(at, "%s: %d must be between 1 and %d bytes", show, n, maxToolOutput)
	}
	return n, nil
}

func (c *execConfig) count(at, show string, n int) error {
	if n < 0 {
		return c.errorf(at, "%s: %d must not be negative", show, n)
	}
	return nil
}

func (c *execConfig) process(f *execProcessFile) (*machine.ProcessSpec, error) {
	p := &machine.ProcessSpec{MaxSessions: f.MaxSessions, MaxOutput: executor.DefaultMaxOutput, Isolate: f.Isolate,
		Image: f.Image, RootfsDir: f.RootfsDir, IdleTimeout: defaultSandboxIdle}
	if err := c.count("process.max_sessions", "process.max_sessions", f.MaxSessions); err != nil {
		return nil, err
	}
	var err error
	if f.MaxOutput != nil {
		if p.MaxOutput, err = c.outputCap("process.max_output", "process.max_output", *f.MaxOutput); err != nil {
			return nil, err
		}
	}
	if f.IdleTimeout != "" {
		if p.IdleTimeout, err = c.duration("process.idle_timeout", "process.idle_timeout", f.IdleTimeout); err != nil {
			return nil, err
		}
	}
	if !f.Isolate {
		for _, k := range []string{"image", "rootfs_dir", "idle_timeout"} {
			if c.keys.Has("process." + k) {
				return nil, c.errorf("process."+k, "process.%s: only used with isolate = true", k)
			}
		}
		return p, nil
	}
	switch {
	case runtime.GOOS != "linux":
		return nil, c.errorf("process.isolate", "process.isolate: the process sandbox needs Linux")
	case f.Image == "":
		return nil, c.errorf("process", "process: isolate = true needs \"image\"")
	case f.RootfsDir == "":
		return nil, c.errorf("process", "process: isolate = true needs \"rootfs_dir\"")
	}
	return p, nil
}

func (c *execConfig) agent(f *execAgentFile) (*machine.AgentSpec, error) {
	a := &machine.AgentSpec{Type: f.Type, MaxSessions: f.MaxSessions, Model: f.Model, MaxTokens: f.MaxTokens,
		System: f.System, MaxSteps: f.MaxSteps, CustomToolTimeout: defaultCustomTimeout, Command: f.Command}
	if a.Type == "" {
		a.Type = machine.AgentBuiltin
	}
	if a.Model == "" {
		a.Model = defaultAgentModel
	}
	if err := c.count("agent.max_sessions", "agent.max_sessions", f.MaxSessions); err != nil {
		return nil, err
	}
	only := func(kind string, keys ...string) error {
		for _, k := range keys {
			if c.keys.Has("agent." + k) {
				return c.errorf("agent."+k, "agent.%s: only used with type = %q", k, kind)
			}
		}
		return nil
	}
	var err error
	switch a.Type {
	case machine.AgentBuiltin:
		if err := only(machine.AgentCommand, "command", "timeout"); err != nil {
			return nil, err
		}
		if a.MaxTokens == 0 {
			a.MaxTokens = defaultAgentTokens
		} else if a.MaxTokens < 0 {
			return nil, c.errorf("agent.max_tokens", "agent.max_tokens: %d must be positive", a.MaxTokens)
		}
		if a.MaxSteps == 0 {
			a.MaxSteps = defaultAgentSteps
		} else if a.MaxSteps < 0 {
			return nil, c.errorf("agent.max_steps", "agent.max_steps: %d must be positive", a.MaxSteps)
		}
		if f.CustomToolTimeout != "" {
			if a.CustomToolTimeout, err = c.duration("agent.custom_tool_timeout", "agent.custom_tool_timeout", f.CustomToolTimeout); err != nil {
				return nil, err
			}
		}
	case machine.AgentCommand:
		if err := only(machine.AgentBuiltin, "max_tokens", "system", "max_steps", "custom_tool_timeout"); err != nil {
			return nil, err
		}
		if len(a.Command) == 0 {
			return nil, c.errorf("agent", "agent: type = \"command\" needs \"command\"")
		}
		if err := checkArgv(a.Command, agentParams, "the program"); err != nil {
			return nil, c.errorf("agent.command", "agent.command: %v", err)
		}
		if f.Timeout != "" {
			if a.Timeout, err = c.duration("agent.timeout", "agent.timeout", f.Timeout); err != nil {
				return nil, err
			}
		}
	default:
		return nil, c.errorf("agent.type", "agent.type: %q must be %q or %q", a.Type, machine.AgentBuiltin, machine.AgentCommand)
	}
	return a, nil
}

// agentParams are the placeholders of agent.command.
var agentParams = []string{"model", "session_id", "turn_id"}

// forScope checks that the file fits the executor's scope: tools for an
// environment; a shell and/or a brain for a machine, whose [[tools]] are
// the builtin brain's own.
func (c *execConfig) forScope(kind string) error {
	if kind == executor.ScopeEnvironment {
		switch {
		case c.Process != nil:
			return c.errorf("process", "[process] is for machines (--machine), not environments")
		case c.Agent != nil:
			return c.errorf("agent", "[agent] is for machines (--machine), not environments")
		case c.Files != nil:
			return c.errorf("files", "[files] is for machines (--machine), not environments")
		case len(c.Tools) == 0:
			return &configError{File: c.file, Msg: "an environment executor needs at least one [[tools]] entry"}
		}
		return nil
	}
	if len(c.Tools) > 0 && (c.Agent == nil || c.Agent.Type != machine.AgentBuiltin) {
		return c.errorf("tools.0", "[[tools]] on a machine are the builtin brain's tools: they need [agent] with type = %q", machine.AgentBuiltin)
	}
	return nil
}
