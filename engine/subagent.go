package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/baton-engine/baton"
)

// Remote subagents (BAE's engine): a model calls a launch tool a client
// declared in subagent_tools, and the engine runs the harness's command in
// the session's remote sandbox on a goroutine it owns. The turn does not
// wait: the model polls remote_subagent_status, which reports a finished
// subagent once and then forgets it. Tracking is in memory only.

// Subagent defaults and limits.
const (
	DefaultMaxSubagents    = 8
	DefaultSubagentTimeout = 600 * time.Second
	// subagentOutputCap caps each output stream of a subagent, in bytes.
	subagentOutputCap = 65536
)

// Subagent statuses as the status tool reports them.
const (
	agentRunning   = "running"
	agentCompleted = "completed"
	agentFailed    = "failed"
	agentTimedOut  = "timed_out"
	agentCancelled = "cancelled"
)

// statusToolDef is the status tool as the provider sees it (BAE's engine).
var statusToolDef = json.RawMessage(`{"name":"remote_subagent_status","description":"Check the status of subagents launched with launch_subagent. Pass a subagent_id to query one subagent, or omit it to list all tracked subagents. A subagent that has finished is reported with its captured output exactly once.","input_schema":{"type":"object","properties":{"subagent_id":{"type":"string","description":"The subagent to query. Omit to report every tracked subagent."}},"required":[],"additionalProperties":false}}`)

// Why a subagent's context ended.
var (
	errAgentTimeout   = errors.New("subagent timed out")
	errAgentCancelled = errors.New("subagent cancelled")
	errSandboxStopped = errors.New("remote sandbox stopped")
	errEngineClosed   = errors.New("engine closed")
)

// subagent is one launched remote subagent. The identity fields are set
// at launch; the state fields are guarded by subagents.mu.
type subagent struct {
	id, harness, model string
	actor              string // the launching client key id
	sandbox            string // the sandbox it runs in
	cancel             context.CancelCauseFunc

	status         string
	exitCode       *int
	stdout, stderr *string
	truncated      bool
	reason, detail *string
	// unlogged is an end a sandbox stop recorded, for the subagent's
	// goroutine to log once its command has returned.
	unlogged *outcome
}

// agentView is one status tool entry; fields are in key order, as BAE
// writes them.
type agentView struct {
	Detail    *string `json:"detail"`
	ExitCode  *int    `json:"exit_code"`
	Harness   string  `json:"harness"`
	Model     string  `json:"model"`
	Reason    *string `json:"reason"`
	Status    string  `json:"status"`
	Stderr    *string `json:"stderr"`
	Stdout    *string `json:"stdout"`
	ID        string  `json:"subagent_id"`
	Truncated bool    `json:"truncated"`
}

func (ag *subagent) view() agentView {
	return agentView{
		Detail: ag.detail, ExitCode: ag.exitCode, Harness: ag.harness, Model: ag.model, Reason: ag.reason,
		Status: ag.status, Stderr: ag.stderr, Stdout: ag.stdout, ID: ag.id, Truncated: ag.truncated,
	}
}

// payload is the base of every lifecycle event of ag.
func (ag *subagent) payload() map[string]any {
	return map[string]any{"dispatch": runsRemote, "subagent_id": ag.id, "harness": ag.harness, "model": ag.model, "detail": nil}
}

// agentSet is one session's subagents in launch order.
type agentSet struct {
	byID  map[string]*subagent
	order []*subagent
}

// subagents tracks every session's remote subagents and owns their
// goroutines: Close cancels them and waits.
type subagents struct {
	max     int
	timeout time.Duration

	mu       sync.Mutex
	closed   bool
	sessions map[string]*agentSet // only non-empty sets
	wg       sync.WaitGroup
}

// newSubagents returns an empty tracker: limit 0 means the default, a
// negative limit allows none; timeout <= 0 means the default.
func newSubagents(limit int, timeout time.Duration) *subagents {
	switch {
	case limit == 0:
		limit = DefaultMaxSubagents
	case limit < 0:
		limit = 0
	}
	if timeout <= 0 {
		timeout = DefaultSubagentTimeout
	}
	return &subagents{max: limit, timeout: timeout, sessions: map[string]*agentSet{}}
}

// tracked reports whether the session has subagents to report.
func (s *subagents) tracked(sessionID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[sessionID] != nil
}

// add starts tracking ag unless a launch check fails (BAE's engine
// steps 3–5), in which case it returns the in-band error. The checks and
// the insert are one step, so parallel launches cannot pass the cap.
func (s *subagents) add(a *actor, ag *subagent, image, tool string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.sessions[a.id]
	running := 0
	if set != nil {
		for _, x := range set.order {
			if x.status == agentRunning {
				running++
			}
		}
	}
	if running >= s.max {
		return fmt.Sprintf("subagent limit reached (max %d per session)", s.max)
	}
	a.mu.Lock()
	closed := a.closed
	a.mu.Unlock()
	sb := a.runningSandbox()
	if sb == nil || closed || s.closed { // a closing session has no sandbox
		return fmt.Sprintf("no remote sandbox is running for tool '%s'; call session.startRemoteSandbox first", tool)
	}
	if sb.image != image {
		return fmt.Sprintf("remote sandbox image mismatch: subagent declared %q but the running sandbox uses %q", image, sb.image)
	}
	if set == nil {
		set = &agentSet{byID: map[string]*subagent{}}
		s.sessions[a.id] = set
	}
	ag.sandbox, ag.status = sb.id, agentRunning
	set.byID[ag.id] = ag
	set.order = append(set.order, ag)
	s.wg.Add(1)
	return ""
}

// removeLocked forgets one subagent of a session.
func (s *subagents) removeLocked(sessionID string, ag *subagent) {
	set := s.sessions[sessionID]
	if set == nil || set.byID[ag.id] != ag {
		return
	}
	delete(set.byID, ag.id)
	for i, x := range set.order {
		if x == ag {
			set.order = append(set.order[:i], set.order[i+1:]...)
			break
		}
	}
	if len(set.order) == 0 {
		delete(s.sessions, sessionID)
	}
}

// undo forgets a launch whose start could not be logged; its goroutine
// never ran.
func (s *subagents) undo(sessionID string, ag *subagent) {
	s.mu.Lock()
	s.removeLocked(sessionID, ag)
	s.mu.Unlock()
	ag.cancel(nil)
	s.wg.Done()
}

// outcome is how a subagent's command ended.
type outcome struct {
	status, event  string
	reason, detail *string
	exitCode       *int
	stdout, stderr *string
	truncated      bool
}

// record sets ag's end to o; the caller holds subagents.mu.
func (ag *subagent) record(o *outcome) {
	ag.status, ag.reason, ag.detail, ag.exitCode = o.status, o.reason, o.detail, o.exitCode
	ag.stdout, ag.stderr, ag.truncated = o.stdout, o.stderr, o.truncated
}

// finish is called once by ag's goroutine when its command has returned,
// with how it ended (nil when its context was ended by someone else). It
// returns the end to log: the one a sandbox stop recorded, else o if ag is
// still tracked and running (which it records), else nil — a cancel, a
// close or shutdown got there first and logged the end, or chose not to.
func (s *subagents) finish(sessionID string, ag *subagent, o *outcome) *outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u := ag.unlogged; u != nil {
		ag.unlogged = nil
		return u
	}
	set := s.sessions[sessionID]
	if o == nil || set == nil || set.byID[ag.id] != ag || ag.status != agentRunning {
		return nil
	}
	ag.record(o)
	return o
}

// report answers the status tool and evicts every finished subagent it
// reports. It returns the result object and whether it is an error.
func (s *subagents) report(sessionID string, input json.RawMessage) (any, bool) {
	var in map[string]any
	_ = json.Unmarshal(input, &in)
	id, one := in["subagent_id"].(string)
	unknown := map[string]string{"error": "unknown subagent_id"}

	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.sessions[sessionID]
	var listed []*subagent
	switch {
	case one && (set == nil || set.byID[id] == nil):
		return unknown, true
	case one:
		listed = []*subagent{set.byID[id]}
	case set != nil:
		listed = append(listed, set.order...)
	}
	views := make([]agentView, 0, len(listed))
	for _, ag := range listed {
		views = append(views, ag.view())
		if ag.status != agentRunning {
			s.removeLocked(sessionID, ag)
		}
	}
	return map[string]any{"subagents": views}, false
}

// cancel cancels one running subagent at the caller's request. It reports
// whether the subagent was tracked and whether it was running.
func (s *subagents) cancel(sessionID, id string) (ag *subagent, tracked, wasRunning bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.sessions[sessionID]
	if set == nil || set.byID[id] == nil {
		return nil, false, false
	}
	ag = set.byID[id]
	if ag.status != agentRunning {
		return ag, true, false
	}
	reason := "explicit"
	ag.status, ag.reason = agentCancelled, &reason
	ag.cancel(errAgentCancelled)
	return ag, true, true
}

// drop forgets a closed session's subagents, cancelling the running ones,
// which it returns in launch order.
func (s *subagents) drop(sessionID string) []*subagent {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.sessions[sessionID]
	delete(s.sessions, sessionID)
	if set == nil {
		return nil
	}
	var running []*subagent
	for _, ag := range set.order {
		if ag.status == agentRunning {
			reason := "session_close"
			ag.status, ag.reason = agentCancelled, &reason
			ag.cancel(errAgentCancelled)
			running = append(running, ag)
		}
	}
	return running
}

// sandboxStopped ends the running subagents of a sandbox about to be
// stopped: each is failed at once, as a killed exec (exit code -1, no
// output), which frees its slot, and its command is aborted; its
// goroutine logs the end once the command has returned. It runs before
// the driver stops the sandbox, so no command sees the stop as an error
// of its own.
func (s *subagents) sandboxStopped(sessionID, sandboxID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	set := s.sessions[sessionID]
	if set == nil {
		return
	}
	for _, ag := range set.order {
		if ag.status == agentRunning && ag.sandbox == sandboxID {
			code, empty, reason := -1, "", "nonzero_exit"
			o := &outcome{status: agentFailed, event: baton.EventSubagentFailed, reason: &reason, exitCode: &code, stdout: &empty, stderr: &empty}
			ag.record(o)
			ag.unlogged = o
			ag.cancel(errSandboxStopped)
		}
	}
}

// close cancels every running subagent without recording anything (a
// restart loses them, as in BAE) and waits for their goroutines.
func (s *subagents) close() {
	s.mu.Lock()
	s.closed = true
	for _, set := range s.sessions {
		for _, ag := range set.order {
			if ag.status == agentRunning {
				ag.cancel(errEngineClosed)
			}
		}
	}
	s.sessions = map[string]*agentSet{}
	s.mu.Unlock()
	s.wg.Wait()
}

// dispatchSubagent runs a launch call or the status tool. Every failure is
// an in-band {"error": …} result; only a failure to persist events stops
// the turn.
func (tc *turnCtx) dispatchSubagent(u toolUse, ts *toolset) (json.RawMessage, error) {
	var (
		out   any
		isErr bool
	)
	if u.Name == reservedToolName {
		out, isErr = tc.e.subs.report(tc.a.id, u.Input)
	} else {
		var err error
		if out, isErr, err = tc.launch(u, ts.agents); err != nil {
			return nil, err
		}
	}
	content := textContent(string(baton.MarshalJSON(out)))
	err := tc.emit(baton.NewEvent(tc.a.id, tc.t.actor, baton.EventToolResult, map[string]any{
		"tool_use_id": u.ID, "dispatch": baton.DispatchSubagent, "is_error": isErr, "content": content,
	}))
	return toolResult(u.ID, content, isErr), err
}

// launch starts a subagent (BAE's engine steps 1–7) and returns its
// started acknowledgement without waiting for it.
func (tc *turnCtx) launch(u toolUse, decls []baton.SubagentToolDef) (any, bool, error) {
	e, sid := tc.e, tc.a.id
	fail := func(format string, args ...any) (any, bool, error) {
		return map[string]string{"error": fmt.Sprintf(format, args...)}, true, nil
	}
	var in map[string]any // keys match exactly, unlike a struct's fields
	_ = json.Unmarshal(u.Input, &in)
	harness, _ := in["harness"].(string)
	model, _ := in["model"].(string)
	prompt, _ := in["prompt"].(string)
	if strings.TrimSpace(harness) == "" || strings.TrimSpace(model) == "" || strings.TrimSpace(prompt) == "" {
		return fail(`launch_subagent requires string "harness", "model", and "prompt"`)
	}
	tool, def := findHarness(decls, u.Name, harness)
	if def == nil {
		return fail("unknown harness %q", harness)
	}
	ctx, cancel := context.WithCancelCause(context.Background())
	ag := &subagent{id: baton.NewID(baton.PrefixSubagent), harness: harness, model: model, actor: tc.t.actor, cancel: cancel}
	if msg := e.subs.add(tc.a, ag, tool.Image, u.Name); msg != "" {
		cancel(nil)
		return fail("%s", msg)
	}
	if err := tc.emit(baton.NewEvent(sid, ag.actor, baton.EventSubagentStart, ag.payload())); err != nil {
		e.subs.undo(sid, ag)
		return nil, false, err
	}
	job := agentJob{command: interpolate(def.CommandTemplate, model, prompt, def.PromptVia), timeout: e.subs.timeout}
	if def.PromptVia != "arg" {
		job.stdin = []byte(prompt)
	}
	if def.TimeoutSecs != nil {
		job.timeout = time.Duration(min(*def.TimeoutSecs, uint64(math.MaxInt64/int64(time.Second)))) * time.Second
	}
	ready := make(chan struct{})
	go e.runSubagent(ctx, sid, ag, job, ready)
	err := tc.emit(baton.NewEvent(sid, ag.actor, baton.EventSubagentRunning, ag.payload()))
	close(ready) // the command starts only once running is logged
	if err != nil {
		return nil, false, err
	}
	e.log.Info("subagent launched", "session_id", sid, "subagent_id", ag.id, "harness", harness)
	return map[string]string{"subagent_id": ag.id, "harness": harness, "model": model, "status": "started"}, false, nil
}

// findHarness returns the first declaration named tool and its harness.
func findHarness(decls []baton.SubagentToolDef, tool, harness string) (*baton.SubagentToolDef, *baton.SubagentDef) {
	for i := range decls {
		if decls[i].Name != tool {
			continue
		}
		for j := range decls[i].Subagents {
			if decls[i].Subagents[j].Harness == harness {
				return &decls[i], &decls[i].Subagents[j]
			}
		}
		return nil, nil
	}
	return nil, nil
}

// agentJob is the command a subagent runs.
type agentJob struct {
	command string
	stdin   []byte // the prompt, for prompt_via "stdin"
	timeout time.Duration
}

// runSubagent runs ag's command once its launch is logged, records how it
// ended and logs the terminal event, attributed to the launching client.
func (e *Engine) runSubagent(ctx context.Context, sessionID string, ag *subagent, job agentJob, ready <-chan struct{}) {
	defer e.subs.wg.Done()
	defer ag.cancel(nil)
	<-ready // closed by the launch right after it logs running
	rctx, stop := e.withTimeout(ctx, job.timeout, errAgentTimeout)
	var (
		res baton.ExecResult
		err = rctx.Err() // cancelled already: the outcome still says why
	)
	if err == nil {
		res, err = e.sandboxes.Exec(rctx, ag.sandbox, job.command, baton.ExecOptions{Stdin: job.stdin, Limit: subagentOutputCap})
	}
	cause := context.Cause(rctx) // nil unless rctx ended; read before stop ends it
	stop()
	if end := e.subs.finish(sessionID, ag, agentOutcome(res, err, cause)); end != nil {
		e.logEnd(sessionID, ag, end)
	}
}

// agentOutcome is how a subagent's exec ended: a timeout, a result (exit
// 0 completed, else failed), or an error of the exec itself (a spawn
// failure). It is nil when the subagent's context was ended by a cancel,
// a close, a sandbox stop or shutdown, which record the end themselves.
func agentOutcome(res baton.ExecResult, err, cause error) *outcome {
	str := func(s string) *string { return &s }
	switch {
	case cause == errAgentTimeout:
		return &outcome{status: agentTimedOut, event: baton.EventSubagentFailed, reason: str("timeout")}
	case err == nil:
		code := res.ExitCode
		o := &outcome{status: agentCompleted, event: baton.EventSubagentCompleted, exitCode: &code,
			stdout: &res.Stdout, stderr: &res.Stderr, truncated: res.Truncated}
		if code != 0 {
			o.status, o.event, o.reason = agentFailed, baton.EventSubagentFailed, str("nonzero_exit")
		}
		return o
	case cause != nil:
		return nil
	default:
		return &outcome{status: agentFailed, event: baton.EventSubagentFailed, reason: str("spawn_failed"), detail: str(err.Error())}
	}
}

// logEnd logs the terminal event of ag, attributed to the launching client.
func (e *Engine) logEnd(sessionID string, ag *subagent, o *outcome) {
	p := ag.payload()
	if o.detail != nil {
		p["detail"] = *o.detail
	}
	p["exit_code"] = o.exitCode
	if o.event == baton.EventSubagentFailed {
		p["reason"] = *o.reason
	}
	if err := e.store.Append(e.ctx, baton.NewEvent(sessionID, ag.actor, o.event, p)); err != nil {
		e.log.Error("log subagent end", "session_id", sessionID, "subagent_id", ag.id, "err", err)
	}
	e.log.Info("subagent ended", "session_id", sessionID, "subagent_id", ag.id, "status", o.status)
}

// cancelSubagent is session.cancelSubagent once its params are checked
// (BAE's client API).
func (e *Engine) cancelSubagent(sessionID, actor, id string) (any, error) {
	ag, tracked, wasRunning := e.subs.cancel(sessionID, id)
	if !tracked {
		return nil, baton.Errorf(baton.ECodeNoSubagent, "subagent_not_found: no tracked subagent %q for this session", id)
	}
	if wasRunning {
		p := ag.payload()
		p["reason"] = "explicit"
		if err := e.store.Append(e.ctx, baton.NewEvent(sessionID, actor, baton.EventSubagentCancelled, p)); err != nil {
			e.log.Error("log subagent cancel", "session_id", sessionID, "subagent_id", id, "err", err)
		}
	}
	return map[string]any{"cancelled": true, "subagent_id": id, "was_running": wasRunning}, nil
}

// endSubagents cancels a closed session's running subagents, logging one
// cancellation each (reason session_close, attributed to actor), and
// forgets them all.
func (e *Engine) endSubagents(ctx context.Context, sessionID, actor string) {
	running := e.subs.drop(sessionID)
	if len(running) == 0 {
		return
	}
	evs := make([]*baton.Event, len(running))
	for i, ag := range running {
		p := ag.payload()
		p["reason"] = "session_close"
		evs[i] = baton.NewEvent(sessionID, actor, baton.EventSubagentCancelled, p)
	}
	if err := e.store.Append(ctx, evs...); err != nil {
		e.log.Error("log subagent cancels at close", "session_id", sessionID, "err", err)
	}
}

// interpolate fills a validated command template in one pass: {model}
// becomes the shell-quoted model, {prompt} the shell-quoted prompt for
// prompt_via "arg" and nothing for "stdin". Substituted text is never
// scanned again.
func interpolate(tmpl, model, prompt, promptVia string) string {
	quotedPrompt := ""
	if promptVia == "arg" {
		quotedPrompt = shellQuote(prompt)
	}
	return strings.NewReplacer("{model}", shellQuote(model), "{prompt}", quotedPrompt).Replace(tmpl)
}

// shellQuote wraps s in single quotes for sh; a quote inside s ends the
// quoting, is escaped with a backslash, and reopens it.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
