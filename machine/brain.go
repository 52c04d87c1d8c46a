package machine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/client/executor"
)

// Bounds of the builtin brain's model calls.
const (
	maxModelReply = 16 << 20          // bytes of one Messages API answer
	modelTimeout  = 120 * time.Second // bound of one model call, as the server's provider timeout
	refreshWithin = 10 * time.Minute  // refresh a model token closer than this to expiry
)

// RunCommand is the name of the tool through which a Brain's model runs
// shell commands on the machine.
const RunCommand = "run_command"

// Brain is Baton's own agent loop: each turn it calls the model
// gateway (model_base_url + /v1/messages, Anthropic Messages API, with
// the turn's model_token) until the model answers without tool calls.
// Text becomes agent.message events, thinking agent.thinking; each tool
// call is reported as agent.tool_use and agent.tool_result around
// running it here: one of its tools, run_command on the machine's
// shell, or a client's custom tool (agent.custom_tool_use, answered by
// the platform). Conversations are kept in memory, one per session.
type Brain struct {
	spec  *AgentSpec
	local map[string]localTool
	defs  []json.RawMessage // the local tools as the model sees them
	http  *http.Client
	// timeout bounds one model call, answer included (modelTimeout; tests
	// lower it): the call is not streamed, so a stalled gateway fails it
	// rather than hang the turn.
	timeout time.Duration
	log     *slog.Logger

	mu    sync.Mutex
	convs map[string]*brainConv
}

// localTool runs one tool call on this machine.
type localTool func(ctx context.Context, t *executor.Turn, input json.RawMessage) (executor.Result, error)

// brainConv is a session's transcript in Messages API form.
type brainConv struct {
	msgs []chatMessage
}

type chatMessage struct {
	Role    string            `json:"role"`
	Content []json.RawMessage `json:"content"`
}

// add appends blocks as role, merged into the last message when it has
// the same role (the API wants the roles to alternate).
func (c *brainConv) add(role string, blocks []json.RawMessage) {
	if len(blocks) == 0 {
		return
	}
	if n := len(c.msgs); n > 0 && c.msgs[n-1].Role == role {
		c.msgs[n-1].Content = append(c.msgs[n-1].Content, blocks...)
		return
	}
	c.msgs = append(c.msgs, chatMessage{Role: role, Content: blocks})
}

// NewBrain returns the loop for spec. Its model sees tools (each run
// here with the call's input) and, when shell is not nil, run_command on
// it, besides each turn's custom tools.
func NewBrain(spec *AgentSpec, tools []executor.Tool, shell executor.ProcessHandler, log *slog.Logger) *Brain {
	b := &Brain{spec: spec, local: map[string]localTool{}, http: &http.Client{}, timeout: modelTimeout, log: log, convs: map[string]*brainConv{}}
	for _, tl := range tools {
		b.local[tl.Def.Name] = func(ctx context.Context, t *executor.Turn, in json.RawMessage) (executor.Result, error) {
			return tl.Handle(ctx, executor.Call{SessionID: t.SessionID, Name: tl.Def.Name, Input: in})
		}
		b.defs = append(b.defs, encodeJSON(tl.Def))
	}
	if shell != nil {
		b.local[RunCommand] = func(ctx context.Context, t *executor.Turn, in json.RawMessage) (executor.Result, error) {
			return shellTool(ctx, shell, t.SessionID, in)
		}
		b.defs = append(b.defs, encodeJSON(executor.ToolDef{
			Name:        RunCommand,
			Description: "Run a shell command (sh -c) on this machine, in the work directory or in cwd. Returns its output and exit status.",
			InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"},"cwd":{"type":"string"},"timeout_ms":{"type":"integer"}},"required":["command"]}`),
		}))
	}
	return b
}

func encodeJSON(v any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only for values that always encode
	}
	return b
}

// shellTool runs a run_command call through the machine's shell.
func shellTool(ctx context.Context, shell executor.ProcessHandler, session string, in json.RawMessage) (executor.Result, error) {
	var p struct {
		Command   string `json:"command"`
		Cwd       string `json:"cwd"`
		TimeoutMS int64  `json:"timeout_ms"`
	}
	if err := json.Unmarshal(in, &p); err != nil || p.Command == "" {
		return executor.ErrorResult(RunCommand + ` needs {"command": "…"}`), nil
	}
	res, err := shell.Exec(ctx, executor.ExecRequest{SessionID: session, Command: p.Command, Cwd: p.Cwd,
		Timeout: time.Duration(p.TimeoutMS) * time.Millisecond})
	if ctx.Err() != nil {
		return executor.Result{}, ctx.Err()
	}
	var b strings.Builder
	b.WriteString(res.Stdout)
	if res.Stderr != "" {
		b.WriteString("\n[stderr]\n" + res.Stderr)
	}
	if res.Truncated {
		b.WriteString("\n[output truncated]")
	}
	switch {
	case err != nil:
		fmt.Fprintf(&b, "\n[error: %v]", err)
	case res.ExitCode != 0:
		fmt.Fprintf(&b, "\n[exit status %d]", res.ExitCode)
	}
	r := executor.TextResult(strings.TrimPrefix(b.String(), "\n"))
	r.IsError = err != nil || res.ExitCode != 0
	return r, nil
}

// Open starts a session's conversation, or keeps the one this process
// already has under ref.
func (b *Brain) Open(_ context.Context, sessionID, ref string) (string, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if _, ok := b.convs[sessionID]; !ok {
		if ref != "" {
			b.log.Info("brain: conversation not held here; starting afresh", "session_id", sessionID, "ref", ref)
		}
		b.convs[sessionID] = &brainConv{}
	}
	return sessionID, nil
}

// Close forgets a session's conversation.
func (b *Brain) Close(_ context.Context, sessionID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.convs, sessionID)
	return nil
}

func (b *Brain) conv(sessionID string) *brainConv {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := b.convs[sessionID]
	if c == nil {
		c = &brainConv{}
		b.convs[sessionID] = c
	}
	return c
}

// modelToolUse is a tool_use block of a model reply.
type modelToolUse struct {
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

// Run runs one turn: model calls and tool calls until the model is done
// and no input is waiting.
func (b *Brain) Run(ctx context.Context, t *executor.Turn) error {
	if t.Metadata.ModelBaseURL == "" {
		return errors.New("turn.start carries no model_base_url")
	}
	conv := b.conv(t.SessionID)
	conv.add("user", contentBlocks(t.Input))
	tools, custom := b.toolsFor(t)
	tok := executor.TurnToken{Token: t.Metadata.ModelToken, ExpiresAt: t.Metadata.ModelTokenExpiresAt}
	for step := 0; ; step++ {
		for _, in := range t.Inputs() {
			conv.add("user", contentBlocks(in.Content))
		}
		if step == b.spec.MaxSteps {
			return fmt.Errorf("stopped after %d model calls without a final answer", step)
		}
		b.refresh(ctx, t, &tok)
		reply, err := b.call(ctx, t.Metadata.ModelBaseURL, tok.Token, conv.msgs, tools)
		if err != nil {
			return err
		}
		conv.add("assistant", reply)
		uses, err := emitReply(t, reply)
		if err != nil {
			return err
		}
		if len(uses) == 0 {
			ins := t.Inputs()
			if len(ins) == 0 {
				return nil
			}
			for _, in := range ins {
				conv.add("user", contentBlocks(in.Content))
			}
			continue
		}
		results, err := b.runTools(ctx, t, uses, custom)
		conv.add("user", results) // one result per call, so the next turn's transcript stays valid
		if err != nil {
			return err
		}
	}
}

// toolsFor lists the tools the model gets this turn: the local ones and
// the client's custom tools (whose names local tools shadow).
func (b *Brain) toolsFor(t *executor.Turn) ([]json.RawMessage, map[string]bool) {
	tools := append([]json.RawMessage(nil), b.defs...)
	custom := map[string]bool{}
	for _, d := range t.Metadata.CustomTools {
		if _, shadowed := b.local[d.Name]; shadowed || d.Name == "" {
			continue
		}
		custom[d.Name] = true
		tools = append(tools, encodeJSON(d))
	}
	return tools, custom
}

// refresh replaces a model token that is about to expire; on failure
// the old one is kept.
func (b *Brain) refresh(ctx context.Context, t *executor.Turn, tok *executor.TurnToken) {
	if tok.ExpiresAt.IsZero() || time.Until(tok.ExpiresAt) > refreshWithin {
		return
	}
	fresh, err := t.RefreshModelToken(ctx)
	if err != nil {
		b.log.Warn("brain: model token refresh failed", "session_id", t.SessionID, "err", err)
		return
	}
	*tok = fresh
}

// emitReply emits the reply's thinking and text and returns its tool calls.
func emitReply(t *executor.Turn, reply []json.RawMessage) ([]modelToolUse, error) {
	var text []json.RawMessage
	var uses []modelToolUse
	for _, raw := range reply {
		var blk struct {
			Type     string `json:"type"`
			Thinking string `json:"thinking"`
			modelToolUse
		}
		if err := json.Unmarshal(raw, &blk); err != nil {
			return nil, fmt.Errorf("model reply: %w", err)
		}
		switch blk.Type {
		case baton.BlockText:
			text = append(text, raw)
		case "thinking":
			if _, err := t.Emit(executor.ThinkingEvent(blk.Thinking)); err != nil {
				return nil, err
			}
		case baton.BlockToolUse:
			uses = append(uses, blk.modelToolUse)
		}
	}
	if len(text) > 0 {
		if _, err := t.Emit(executor.MessageEvent(encodeJSON(text))); err != nil {
			return nil, err
		}
	}
	return uses, nil
}

// runTools runs the calls in order and returns one tool_result block per
// call; once ctx ends the remaining calls are answered as cancelled and
// ctx's error is returned with them.
func (b *Brain) runTools(ctx context.Context, t *executor.Turn, uses []modelToolUse, custom map[string]bool) ([]json.RawMessage, error) {
	results := make([]json.RawMessage, 0, len(uses))
	var stop error
	for _, u := range uses {
		var res executor.Result
		switch {
		case stop != nil:
			res = executor.ErrorResult("tool call canceled")
		case custom[u.Name]:
			res, stop = b.customTool(ctx, t, u)
		default:
			res, stop = b.localTool(ctx, t, u)
		}
		if stop != nil && len(res.Content) == 0 {
			res = executor.ErrorResult("tool call canceled")
		}
		results = append(results, encodeJSON(struct {
			Type      string          `json:"type"`
			ToolUseID string          `json:"tool_use_id"`
			Content   json.RawMessage `json:"content"`
			IsError   bool            `json:"is_error,omitempty"`
		}{baton.BlockToolResult, u.ID, res.Content, res.IsError}))
	}
	return results, stop
}

// localTool reports and runs a call of a tool that runs here.
func (b *Brain) localTool(ctx context.Context, t *executor.Turn, u modelToolUse) (executor.Result, error) {
	if _, err := t.Emit(executor.ToolUseEvent(u.ID, u.Name, u.Input, executor.PermissionAllow)); err != nil {
		return executor.Result{}, err
	}
	var res executor.Result
	var err error
	if run := b.local[u.Name]; run != nil {
		res, err = run(ctx, t, u.Input)
	} else {
		res = executor.ErrorResult("no tool named " + u.Name)
	}
	if err != nil { // cancelled: the call still gets its result event
		_, _ = t.Emit(executor.ToolResultEvent(u.ID, executor.ErrorResult("tool call canceled").Content, true))
		return executor.Result{}, err
	}
	if len(res.Content) == 0 {
		res.Content = json.RawMessage("[]")
	}
	if _, err := t.Emit(executor.ToolResultEvent(u.ID, res.Content, res.IsError)); err != nil {
		return executor.Result{}, err
	}
	return res, nil
}

// customTool hands a call to the client that declared the tool and
// waits for its result, up to the custom tool timeout.
func (b *Brain) customTool(ctx context.Context, t *executor.Turn, u modelToolUse) (executor.Result, error) {
	wait, cancel := context.WithTimeout(ctx, b.spec.CustomToolTimeout)
	defer cancel()
	r, err := t.CustomTool(wait, u.Name, u.Input)
	switch {
	case ctx.Err() != nil:
		return executor.Result{}, ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return executor.ErrorResult(fmt.Sprintf("%s: no result within %s", u.Name, b.spec.CustomToolTimeout)), nil
	case err != nil:
		return executor.Result{}, err
	}
	content := r.Content
	if len(bytes.TrimSpace(content)) == 0 {
		content = json.RawMessage("[]")
	}
	return executor.Result{Content: content, IsError: r.IsError}, nil
}

// call makes one Messages API call through the model gateway and returns
// the reply's content blocks.
func (b *Brain) call(ctx context.Context, base, token string, msgs []chatMessage, tools []json.RawMessage) ([]json.RawMessage, error) {
	body, err := json.Marshal(struct {
		Model     string            `json:"model"`
		MaxTokens int               `json:"max_tokens"`
		System    string            `json:"system,omitempty"`
		Messages  []chatMessage     `json:"messages"`
		Tools     []json.RawMessage `json:"tools,omitempty"`
	}{b.spec.Model, b.spec.MaxTokens, b.spec.System, msgs, tools})
	if err != nil {
		return nil, err
	}
	parent := ctx
	ctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	// fail names the bound when it, not the turn, ended the call.
	fail := func(err error) error {
		if parent.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("model gateway: no answer within %s", b.timeout)
		}
		return fmt.Errorf("model gateway: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimRight(base, "/")+"/v1/messages", bytes.NewReader(body))
	if err != nil {
		return nil, fail(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := b.http.Do(req)
	if err != nil {
		return nil, fail(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxModelReply))
	if err != nil {
		return nil, fail(err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("model gateway: HTTP %d: %s", resp.StatusCode, gatewayDetail(raw))
	}
	var reply struct {
		Content []json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(raw, &reply); err != nil {
		return nil, fmt.Errorf("model gateway: undecodable answer: %w", err)
	}
	return reply.Content, nil
}

// gatewayDetail is the message of an error body: the Anthropic shape
// {"error":{"message"}}, the /v1 envelope (the same path), or the start
// of the body.
func gatewayDetail(body []byte) string {
	var env struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &env) == nil && env.Error.Message != "" {
		return env.Error.Message
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}

// contentBlocks reads turn input as content blocks: an array as it is,
// a string (or anything else) as one text block.
func contentBlocks(raw json.RawMessage) []json.RawMessage {
	var blocks []json.RawMessage
	if json.Unmarshal(raw, &blocks) == nil {
		return blocks
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		s = string(raw)
	}
	return []json.RawMessage{encodeJSON(map[string]string{"type": "text", "text": s})}
}

// BlocksText joins the text blocks of content (an array of content
// blocks, or a string as one text block) with newlines.
func BlocksText(raw json.RawMessage) string {
	var parts []string
	for _, blk := range contentBlocks(raw) {
		var b baton.TextBlock
		if json.Unmarshal(blk, &b) == nil && b.Type == baton.BlockText {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

var _ executor.Agent = (*Brain)(nil)
