package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Subagent tool names and limits (BAE's).
const (
	LaunchSubagentTool      = "launch_subagent"
	LocalSubagentStatusTool = "local_subagent_status"
	// MaxLocalSubagents is how many local subagents may run at once in a
	// session.
	MaxLocalSubagents = 8
	// DefaultSubagentTimeout bounds a subagent whose def sets no Timeout.
	DefaultSubagentTimeout = 600 * time.Second
)

// PromptVia is how a subagent CLI receives its prompt.
type PromptVia string

const (
	// PromptStdin writes the prompt to the CLI's standard input; the
	// command has no {prompt}. The default.
	PromptStdin PromptVia = "stdin"
	// PromptArg substitutes it, shell-quoted, for {prompt} in the command.
	PromptArg PromptVia = "arg"
)

// SubagentDef is one CLI agent launch_subagent can start.
type SubagentDef struct {
	// Harness names it; the model picks one by this name.
	Harness string
	// Command is the shell command: {model} (and, with PromptArg,
	// {prompt}) are substituted shell-quoted; no other placeholder is
	// allowed.
	Command   string
	PromptVia PromptVia // "" means PromptStdin
	// Timeout kills the subagent after that long; zero means
	// DefaultSubagentTimeout.
	Timeout time.Duration
}

// SubagentConfig configures launch_subagent (Harness.AddSubagentTool).
type SubagentConfig struct {
	Subagents []SubagentDef
	// RemoteImage, when set, makes launch_subagent a declaration sent at
	// Connect and Join (subagent_tools): the server runs the subagents in
	// the session's remote sandbox, which must run this image. The fields
	// below are then unused.
	RemoteImage string
	// Target is where this client runs its subagents: TargetNone (this
	// machine), TargetLocal (a container of Image, through Engine) or
	// TargetRemote (session.execRemoteSandbox, which takes no input: every
	// def must use PromptArg).
	Target SandboxTarget
	Image  string
	Engine string
}

// subagentDecl is a remote launch tool as sent in subagent_tools.
type subagentDecl struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Image       string          `json:"image"`
	Subagents   []subagentWire  `json:"subagents"`
}

type subagentWire struct {
	Harness         string    `json:"harness"`
	CommandTemplate string    `json:"command_template"`
	PromptVia       PromptVia `json:"prompt_via"`
	TimeoutSecs     int64     `json:"timeout_secs"`
}

// AddSubagentTool adds launch_subagent, which starts a CLI agent on a
// prompt in the background and answers at once with
// {"subagent_id","harness","model","status":"started"}.
//
// With RemoteImage the server runs it. Otherwise this client does: at
// most MaxLocalSubagents run at once per session; each start, running
// and end (completed, or failed with reason nonzero_exit, spawn_failed or
// timeout) is reported with session.reportLocalSubagent, the end always
// after running; each output stream keeps OutputCap bytes (truncated is
// set when cut). While a session tracks subagents it declares a second
// tool, local_subagent_status ({subagent_id?} → {"subagents":[…]}), with
// session.updateClientTools; an ended subagent is reported by it once,
// then forgotten, and the tool is withdrawn when none is left. The
// profile must allow both names. Input problems are in-band results
// {"error": …}. Session.CancelLocalSubagent cancels one; Session.Close
// cancels all (reason session_close).
func (h *Harness) AddSubagentTool(cfg SubagentConfig) error {
	l, err := newLauncher(cfg)
	if err != nil {
		return err
	}
	def := ToolDef{Name: LaunchSubagentTool, Description: launchDescription(l.names), InputSchema: launchSchema(l.names)}
	if cfg.RemoteImage != "" {
		d := subagentDecl{Name: def.Name, Description: def.Description, InputSchema: def.InputSchema, Image: cfg.RemoteImage}
		for _, sd := range l.order {
			d.Subagents = append(d.Subagents, subagentWire{sd.Harness, sd.Command, sd.PromptVia, int64((sd.Timeout + time.Second - 1) / time.Second)})
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		h.subagent = slices.DeleteFunc(h.subagent, func(x subagentDecl) bool { return x.Name == d.Name })
		h.subagent = append(h.subagent, d)
		return nil
	}
	h.RegisterTool(def, l.launch)
	h.register(tool{def: statusDef(), fn: subagentStatus, hidden: true})
	return nil
}

// launcher is a configured local launch_subagent.
type launcher struct {
	cfg   SubagentConfig
	names []string
	order []SubagentDef // defaults filled
	defs  map[string]SubagentDef
}

func newLauncher(cfg SubagentConfig) (*launcher, error) {
	if len(cfg.Subagents) == 0 {
		return nil, errors.New("client: launch_subagent needs at least one SubagentDef")
	}
	if cfg.RemoteImage == "" && cfg.Target == TargetLocal && strings.TrimSpace(cfg.Image) == "" {
		return nil, errors.New("client: launch_subagent: TargetLocal needs an Image")
	}
	if cfg.Target < TargetNone || cfg.Target > TargetRemote {
		return nil, fmt.Errorf("client: launch_subagent: unknown target %d", cfg.Target)
	}
	l := &launcher{cfg: cfg, defs: map[string]SubagentDef{}}
	for _, d := range cfg.Subagents {
		if strings.TrimSpace(d.Harness) == "" {
			return nil, errors.New("client: launch_subagent: a SubagentDef has no Harness")
		}
		if _, dup := l.defs[d.Harness]; dup {
			return nil, fmt.Errorf("client: launch_subagent: duplicate harness %q", d.Harness)
		}
		if d.PromptVia == "" {
			d.PromptVia = PromptStdin
		}
		if d.Timeout <= 0 {
			d.Timeout = DefaultSubagentTimeout
		}
		if err := checkSubagentCommand(d); err != nil {
			return nil, fmt.Errorf("client: launch_subagent: harness %q: %w", d.Harness, err)
		}
		if cfg.RemoteImage == "" && cfg.Target == TargetRemote && d.PromptVia != PromptArg {
			return nil, fmt.Errorf("client: launch_subagent: harness %q: TargetRemote needs PromptArg (session.execRemoteSandbox takes no input)", d.Harness)
		}
		l.names = append(l.names, d.Harness)
		l.order = append(l.order, d)
		l.defs[d.Harness] = d
	}
	return l, nil
}

// checkSubagentCommand allows only {model} and {prompt}, with {prompt}
// present exactly when the prompt goes as an argument.
func checkSubagentCommand(d SubagentDef) error {
	if strings.TrimSpace(d.Command) == "" {
		return errors.New("empty Command")
	}
	params, err := templateParams(d.Command)
	if err != nil {
		return err
	}
	prompt := false
	for _, p := range params {
		switch p {
		case "model":
		case "prompt":
			prompt = true
		default:
			return fmt.Errorf("command placeholder {%s} is not recognized (only {model} and {prompt} are allowed)", p)
		}
	}
	switch {
	case d.PromptVia != PromptArg && d.PromptVia != PromptStdin:
		return fmt.Errorf("PromptVia %q is neither %q nor %q", d.PromptVia, PromptStdin, PromptArg)
	case d.PromptVia == PromptArg && !prompt:
		return errors.New("command must contain {prompt} when PromptVia is arg")
	case d.PromptVia == PromptStdin && prompt:
		return errors.New("command must not contain {prompt} when PromptVia is stdin (the prompt goes to stdin, never into argv)")
	}
	return nil
}

func launchDescription(names []string) string {
	return "Launch a CLI subagent (" + strings.Join(names, ", ") + ") to work on a task in the background. " +
		`This tool is ASYNCHRONOUS: it returns immediately with a subagent_id and status "started" — it never waits ` +
		"for or returns the subagent's output. The subagent keeps running in the background; call the subagent " +
		"status tool later to check whether it has finished and to retrieve its output."
}

func launchSchema(names []string) json.RawMessage {
	enum, _ := json.Marshal(names)
	return json.RawMessage(`{"type":"object","properties":{` +
		`"harness":{"type":"string","enum":` + string(enum) + `,"description":"Which configured CLI subagent to launch."},` +
		`"model":{"type":"string","description":"The model name passed to the subagent CLI."},` +
		`"prompt":{"type":"string","description":"The task prompt handed to the subagent."}},` +
		`"required":["harness","model","prompt"],"additionalProperties":false}`)
}

func statusDef() ToolDef {
	return ToolDef{
		Name: LocalSubagentStatusTool,
		Description: "Check the status of subagents launched with launch_subagent. Pass a subagent_id to query one " +
			"subagent, or omit it to list all tracked subagents. A subagent that has finished is reported with its " +
			"captured output exactly once.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{"subagent_id":{"type":"string",` +
			`"description":"The subagent to query. Omit to report every tracked subagent."}},"required":[],"additionalProperties":false}`),
	}
}

// plan is how one launch runs.
type plan struct {
	target        SandboxTarget
	engine, image string
	command       string
	stdin         []byte
}

func (l *launcher) launch(ctx context.Context, raw json.RawMessage) (any, error) {
	s, ok := SessionFrom(ctx)
	if !ok {
		return nil, errNoSession
	}
	var in map[string]any
	_ = json.Unmarshal(raw, &in)
	field := func(k string) string {
		v, _ := in[k].(string)
		if strings.TrimSpace(v) == "" {
			return ""
		}
		return v
	}
	harness, model, prompt := field("harness"), field("model"), field("prompt")
	if harness == "" || model == "" || prompt == "" {
		return errorText(`launch_subagent requires string "harness", "model", and "prompt"`), nil
	}
	d, ok := l.defs[harness]
	if !ok {
		return errorText(`unknown harness "` + harness + `"`), nil
	}
	command, err := interpolate(d.Command, map[string]string{"model": model, "prompt": prompt})
	if err != nil {
		return errorText("failed to build subagent command: " + err.Error()), nil
	}
	p := plan{target: l.cfg.Target, engine: l.cfg.Engine, image: l.cfg.Image, command: command}
	if d.PromptVia == PromptStdin {
		p.stdin = []byte(prompt)
	}
	return s.builtin.agentSet(s).launch(ctx, harness, model, d.Timeout, p), nil
}

// subagentStatus is the handler of local_subagent_status.
func subagentStatus(ctx context.Context, raw json.RawMessage) (any, error) {
	s, ok := SessionFrom(ctx)
	if !ok {
		return nil, errNoSession
	}
	return s.builtin.agentSet(s).status(ctx, raw), nil
}

// subagentEntry is a subagent as local_subagent_status reports it.
type subagentEntry struct {
	SubagentID string  `json:"subagent_id"`
	Harness    string  `json:"harness"`
	Model      string  `json:"model"`
	Status     string  `json:"status"`
	ExitCode   *int    `json:"exit_code"`
	Stdout     *string `json:"stdout"`
	Stderr     *string `json:"stderr"`
	Truncated  bool    `json:"truncated"`
	Reason     *string `json:"reason"`
	Detail     *string `json:"detail"`
}

type task struct {
	seq    int
	entry  subagentEntry
	cancel context.CancelFunc
}

// agentSet tracks a session's local subagents. mu serializes every change
// of the set with the reports and tool-list update it causes, so the
// server sees them in order.
type agentSet struct {
	s      *Session
	ctx    context.Context // ends at close: the watchers' lifetime
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu         sync.Mutex
	tasks      map[string]*task
	seq        int
	advertised bool // local_subagent_status is declared to the server
}

func newAgentSet(s *Session) *agentSet {
	ctx, cancel := context.WithCancel(context.Background())
	return &agentSet{s: s, ctx: ctx, cancel: cancel, tasks: map[string]*task{}}
}

// launch starts one subagent and returns the in-band result.
func (a *agentSet) launch(ctx context.Context, harness, model string, timeout time.Duration, p plan) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	running := 0
	for _, t := range a.tasks {
		if t.entry.Status == "running" {
			running++
		}
	}
	if a.ctx.Err() != nil {
		return errorText("the session is closing")
	}
	if running >= MaxLocalSubagents {
		return errorText(fmt.Sprintf("subagent limit reached (max %d per session)", MaxLocalSubagents))
	}
	id := newSubagentID()
	tctx, cancel := context.WithCancel(a.ctx)
	t := &task{seq: a.seq, cancel: cancel, entry: subagentEntry{SubagentID: id, Harness: harness, Model: model, Status: "running"}}
	a.seq++
	a.tasks[id] = t
	a.report(ctx, SubagentReport{State: "start", SubagentID: id, Harness: harness, Model: model})
	ran := make(chan struct{})
	a.wg.Go(func() { a.watch(tctx, t, timeout, p, ran) })
	a.report(ctx, SubagentReport{State: "running", SubagentID: id, Harness: harness, Model: model})
	a.sync(ctx)
	close(ran)
	return jsonText(struct {
		SubagentID string `json:"subagent_id"`
		Harness    string `json:"harness"`
		Model      string `json:"model"`
		Status     string `json:"status"`
	}{id, harness, model, "started"})
}

// watch runs one subagent and records and reports how it ended, after
// its running report (ran closed). A cancel that came first wins.
func (a *agentSet) watch(tctx context.Context, t *task, timeout time.Duration, p plan, ran <-chan struct{}) {
	defer t.cancel()
	pctx, stop := context.WithTimeout(tctx, timeout)
	out, err := a.run(pctx, p)
	stop()
	<-ran
	a.mu.Lock()
	defer a.mu.Unlock()
	if t.entry.Status != "running" || tctx.Err() != nil {
		return
	}
	e := &t.entry
	r := SubagentReport{SubagentID: e.SubagentID, Harness: e.Harness, Model: e.Model, State: "failed"}
	switch {
	case err != nil && errors.Is(pctx.Err(), context.DeadlineExceeded):
		e.Status, r.Reason = "timed_out", "timeout"
	case err != nil:
		e.Status, r.Reason, r.Detail = "failed", "spawn_failed", err.Error()
	default:
		stdout, cutOut := cutUTF8([]byte(out.stdout), OutputCap)
		stderr, cutErr := cutUTF8([]byte(out.stderr), OutputCap)
		so, se, code := string(stdout), string(stderr), out.exit
		e.Stdout, e.Stderr, e.Truncated, e.ExitCode = &so, &se, cutOut || cutErr || out.cutOut || out.cutErr, &code
		r.ExitCode = &code
		if code == 0 {
			e.Status, r.State = "completed", "completed"
		} else {
			e.Status, r.Reason = "failed", "nonzero_exit"
		}
	}
	e.Reason, e.Detail = orNull(r.Reason), orNull(r.Detail)
	a.report(a.ctx, r)
}

// run runs a subagent's command where its plan says.
func (a *agentSet) run(ctx context.Context, p plan) (procOut, error) {
	switch p.target {
	case TargetRemote:
		res, err := a.s.ExecRemoteSandbox(ctx, p.command)
		return procOut{stdout: res.Stdout, stderr: res.Stderr, exit: res.ExitCode}, err
	case TargetLocal:
		bx := a.s.builtin.box(engineCLI(p.engine), p.image)
		id, err := bx.start(ctx, a.s)
		if err != nil {
			return procOut{}, err
		}
		return runProc(ctx, procSpec{prog: bx.cli.prog(), args: []string{"exec", "-i", id, "sh", "-c", p.command}, stdin: p.stdin})
	}
	return runProc(ctx, procSpec{prog: "/bin/sh", args: []string{"-c", p.command}, stdin: p.stdin})
}

// status answers local_subagent_status: one subagent or all, in launch
// order; ended ones are forgotten once reported.
func (a *agentSet) status(ctx context.Context, raw json.RawMessage) string {
	var in struct {
		ID any `json:"subagent_id"`
	}
	_ = json.Unmarshal(raw, &in)
	a.mu.Lock()
	defer a.mu.Unlock()
	var picked []*task
	if id, ok := in.ID.(string); ok {
		t := a.tasks[id]
		if t == nil {
			return errorText("unknown subagent_id")
		}
		picked = []*task{t}
	} else {
		for _, t := range a.tasks {
			picked = append(picked, t)
		}
		slices.SortFunc(picked, func(x, y *task) int { return x.seq - y.seq })
	}
	entries := make([]subagentEntry, len(picked))
	for i, t := range picked {
		entries[i] = t.entry
		if t.entry.Status != "running" {
			delete(a.tasks, t.entry.SubagentID)
		}
	}
	a.sync(ctx)
	return jsonText(struct {
		Subagents []subagentEntry `json:"subagents"`
	}{entries})
}

// cancelTask marks a running task cancelled and kills it; the caller
// holds mu and reports.
func cancelTask(t *task, reason string) bool {
	if t == nil || t.entry.Status != "running" {
		return false
	}
	t.cancel()
	t.entry.Status, t.entry.Reason = "cancelled", orNull(reason)
	return true
}

func (a *agentSet) cancelOne(ctx context.Context, id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	t := a.tasks[id]
	if !cancelTask(t, "explicit") {
		return false
	}
	e := t.entry
	a.report(ctx, SubagentReport{State: "cancelled", SubagentID: id, Harness: e.Harness, Model: e.Model, Reason: "explicit"})
	return true
}

// close cancels every running subagent (reason session_close), forgets
// them all, withdraws the status tool and waits for the watchers.
func (a *agentSet) close(ctx context.Context) {
	a.mu.Lock()
	var ts []*task
	for _, t := range a.tasks {
		ts = append(ts, t)
	}
	slices.SortFunc(ts, func(x, y *task) int { return x.seq - y.seq })
	clear(a.tasks)
	for _, t := range ts {
		if cancelTask(t, "session_close") {
			e := t.entry
			a.report(ctx, SubagentReport{State: "cancelled", SubagentID: e.SubagentID, Harness: e.Harness, Model: e.Model, Reason: "session_close"})
		}
	}
	a.sync(ctx)
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
}

// sync declares local_subagent_status while subagents are tracked and
// withdraws it when none is left (session.updateClientTools with the
// harness's tools, plus the status tool). A failed update is retried at
// the next change. The caller holds mu.
func (a *agentSet) sync(ctx context.Context) {
	want := len(a.tasks) > 0
	if want == a.advertised {
		return
	}
	tools := a.s.h.defs()
	if want {
		tools = append(tools, statusDef())
	}
	err := a.s.Call(ctx, "session.updateClientTools", struct {
		Tools []ToolDef `json:"tools"`
	}{tools}, nil)
	if err != nil {
		a.s.h.c.log.DebugContext(ctx, "client: update client tools for subagents", "err", err)
		return
	}
	a.advertised = want
}

func (a *agentSet) report(ctx context.Context, r SubagentReport) {
	if err := a.s.ReportLocalSubagent(ctx, r); err != nil {
		a.s.h.c.log.DebugContext(ctx, "client: report local subagent", "state", r.State, "err", err)
	}
}

func newSubagentID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "sba_" + hex.EncodeToString(b[:])
}

// SubagentReport is a local subagent lifecycle report.
type SubagentReport struct {
	// State is "start", "running", "completed", "failed" or "cancelled".
	State      string `json:"state"`
	SubagentID string `json:"subagent_id"`
	Harness    string `json:"harness"`
	Model      string `json:"model"`
	Detail     string `json:"detail,omitempty"`
	Reason     string `json:"reason,omitempty"`
	ExitCode   *int   `json:"exit_code,omitempty"`
}

// ReportLocalSubagent records a subagent this client runs itself
// (session.reportLocalSubagent → event session.subagent.<state>).
func (s *Session) ReportLocalSubagent(ctx context.Context, r SubagentReport) error {
	return s.Call(ctx, "session.reportLocalSubagent", r, nil)
}

// CancelLocalSubagent cancels one of this session's local subagents,
// killing its process and reporting it cancelled (reason explicit). It
// returns false for an unknown or already ended id. The entry stays until
// local_subagent_status reports it.
func (s *Session) CancelLocalSubagent(ctx context.Context, id string) bool {
	return s.builtin.agentSet(s).cancelOne(ctx, id)
}

// CancelSubagent cancels a remote (server-run) subagent
// (session.cancelSubagent) and reports whether it was still running. An
// id the server does not track is *RPCError -32014.
func (s *Session) CancelSubagent(ctx context.Context, id string) (wasRunning bool, err error) {
	var out struct {
		WasRunning bool `json:"was_running"`
	}
	err = s.Call(ctx, "session.cancelSubagent", map[string]string{"subagent_id": id}, &out)
	return out.WasRunning, err
}
