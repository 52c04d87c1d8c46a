package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// Config tells a Harness where and how to connect.
type Config struct {
	// BaseURL is the client port, e.g. "http://127.0.0.1:8080".
	BaseURL string
	// ClientKey (bae_…) opens and joins sessions.
	ClientKey string
	// ClientVersion is recorded in session.open / session.join; optional.
	ClientVersion string
	// HTTPClient carries every request; nil means http.DefaultClient. Do
	// not set a Timeout on it: sendMessage and subscribe responses stream
	// for as long as a turn or subscription lasts. Bound calls with their
	// context instead.
	HTTPClient *http.Client
	// Logger receives debug records of every call; nil discards them.
	Logger *slog.Logger
	// MaxFrameSize bounds one NDJSON frame and one REST response body;
	// zero means DefaultMaxFrameSize (64 MiB). A frame over it ends the
	// call with a *TransportError that names the limit. The terminal
	// sendMessage frame holds every event of the turn, large tool results
	// and transcripts included, so raise it for sessions that move big
	// payloads.
	MaxFrameSize int
}

// ToolHandler runs one client-side tool call. A string result is sent as
// text content, a []Block result as content blocks, and any other value
// as its JSON encoding in text form. An error is sent as an is_error
// result; it does not end the loop. ctx is the context of Session.Send.
type ToolHandler func(ctx context.Context, input json.RawMessage) (result any, err error)

// Harness holds the configuration, client-side tools and hooks shared by
// the sessions it opens. Its methods are safe for concurrent use; tools
// and hooks changed after Connect apply to later tool calls.
type Harness struct {
	c *conn

	mu       sync.RWMutex
	tools    []tool         // registration order: the order declared to the server
	sandbox  []ToolDef      // Auto-mode sandbox tools, declared as sandbox_tools
	subagent []subagentDecl // remote subagent launch tools, declared as subagent_tools
	hooks    hooks
}

type tool struct {
	def ToolDef
	fn  ToolHandler
	// hidden tools run when called but are not declared at open or by
	// UpdateTools (local_subagent_status, declared while subagents run).
	hidden bool
}

type hooks struct {
	event   func(Event)
	call    func(ToolCall)
	result  func(ToolCall, ToolResult)
	message func(Message)
	err     func(error)
}

// NewHarness returns a harness for cfg.
func NewHarness(cfg Config) *Harness {
	c := &conn{
		base:    strings.TrimRight(cfg.BaseURL, "/"),
		key:     cfg.ClientKey,
		version: cfg.ClientVersion,
		hc:      cfg.HTTPClient,
		log:     cfg.Logger,
		max:     cfg.MaxFrameSize,
	}
	if c.hc == nil {
		c.hc = http.DefaultClient
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.max <= 0 {
		c.max = DefaultMaxFrameSize
	}
	return &Harness{c: c}
}

// RegisterTool declares a client-side tool and its handler, replacing any
// tool of the same name. Tools registered before Connect or Join are
// declared to the server; later ones need Session.UpdateTools.
func (h *Harness) RegisterTool(def ToolDef, fn ToolHandler) {
	h.register(tool{def: def, fn: fn})
}

func (h *Harness) register(t tool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.tools {
		if h.tools[i].def.Name == t.def.Name {
			h.tools[i] = t
			return
		}
	}
	h.tools = append(h.tools, t)
}

// RemoveTool forgets the tool called name.
func (h *Harness) RemoveTool(name string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := range h.tools {
		if h.tools[i].def.Name == name {
			h.tools = append(h.tools[:i], h.tools[i+1:]...)
			return
		}
	}
}

// OnEvent sets the hook that receives every session.event notification of
// a Send, live, in arrival order (BAE's on_event). Events this client
// inserted itself (its own client.message.send and tool results) are in
// Reply.Events but not streamed.
func (h *Harness) OnEvent(fn func(Event)) { h.setHook(func(k *hooks) { k.event = fn }) }

// OnToolCall sets the hook called with each client tool call, in tool_use
// order, before the handlers run (BAE's before_tool_call).
func (h *Harness) OnToolCall(fn func(ToolCall)) { h.setHook(func(k *hooks) { k.call = fn }) }

// OnToolResult sets the hook called with each call and its result, in
// tool_use order, after all handlers of the pause returned and before the
// results are sent (BAE's after_tool_call).
func (h *Harness) OnToolResult(fn func(ToolCall, ToolResult)) {
	h.setHook(func(k *hooks) { k.result = fn })
}

// OnMessage sets the hook called with every assistant message received,
// including those that pause for tool calls (BAE's after_receive).
func (h *Harness) OnMessage(fn func(Message)) { h.setHook(func(k *hooks) { k.message = fn }) }

// OnError sets the hook called with each *ToolError and with the error
// that ends a Send.
func (h *Harness) OnError(fn func(error)) { h.setHook(func(k *hooks) { k.err = fn }) }

func (h *Harness) setHook(set func(*hooks)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	set(&h.hooks)
}

func (h *Harness) snapshotHooks() hooks {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.hooks
}

// handler returns the handler of the tool called name.
func (h *Harness) handler(name string) (ToolHandler, bool) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	for _, t := range h.tools {
		if t.def.Name == name {
			return t.fn, true
		}
	}
	return nil, false
}

// defs returns the declarations of the registered tools, schemas filled.
func (h *Harness) defs() []ToolDef {
	h.mu.RLock()
	defer h.mu.RUnlock()
	out := make([]ToolDef, 0, len(h.tools))
	for _, t := range h.tools {
		if t.hidden {
			continue
		}
		d := t.def
		if len(bytes.TrimSpace(d.InputSchema)) == 0 {
			d.InputSchema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		out = append(out, d)
	}
	return out
}

// Connect opens a new session declaring the registered tools, then
// registers this client as a driver. If the registration fails the error
// is returned and the session, already created, is left open.
func (h *Harness) Connect(ctx context.Context) (*Session, error) {
	return h.open(ctx, "/api/v1/sessions")
}

// Join attaches to the existing session sessionID (same profile, possibly
// another client key) with its own tool set, then registers this client as
// a driver. The returned Session has its own session key.
func (h *Harness) Join(ctx context.Context, sessionID string) (*Session, error) {
	return h.open(ctx, "/api/v1/sessions/"+url.PathEscape(sessionID)+"/join")
}

type openRequest struct {
	ClientVersion string         `json:"client_version,omitempty"`
	Tools         []ToolDef      `json:"tools"`
	SandboxTools  []ToolDef      `json:"sandbox_tools,omitempty"`
	SubagentTools []subagentDecl `json:"subagent_tools,omitempty"`
}

type openResponse struct {
	SessionID  string  `json:"session_id"`
	SessionKey string  `json:"session_key"`
	Profile    Profile `json:"profile"`
}

func (h *Harness) open(ctx context.Context, path string) (*Session, error) {
	var resp openResponse
	body := openRequest{ClientVersion: h.c.version, Tools: h.defs()}
	h.mu.RLock()
	body.SandboxTools = append([]ToolDef(nil), h.sandbox...)
	body.SubagentTools = append([]subagentDecl(nil), h.subagent...)
	h.mu.RUnlock()
	if err := h.c.rest(ctx, http.MethodPost, path, h.c.key, body, &resp); err != nil {
		return nil, err
	}
	if resp.SessionID == "" || resp.SessionKey == "" {
		return nil, &TransportError{Op: "POST " + path, Err: errors.New("response lacks session_id or session_key")}
	}
	s := &Session{ID: resp.SessionID, Key: resp.SessionKey, Profile: resp.Profile, h: h}
	if err := s.register(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

// conn is the HTTP side shared by a harness and its sessions.
type conn struct {
	base    string
	key     string
	version string
	hc      *http.Client
	log     *slog.Logger
	max     int
	readers sync.Pool // *frameReader, reused from stream to stream
}

// rest performs one JSON REST call authenticated with token and decodes a
// 2xx body into out (when out is not nil).
func (c *conn) rest(ctx context.Context, method, path, token string, in, out any) error {
	op := method + " " + path
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return &TransportError{Op: op, Err: err}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return &TransportError{Op: op, Err: err}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "application/json")
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	c.log.DebugContext(ctx, "client rest", "op", op)
	resp, err := c.hc.Do(req)
	if err != nil {
		return c.fail(ctx, op, err)
	}
	defer resp.Body.Close()
	body, err := c.readBody(resp.Body)
	if err != nil {
		return c.fail(ctx, op, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		e := apiError(resp.StatusCode, body)
		c.log.DebugContext(ctx, "client rest error", "op", op, "status", e.Status, "type", e.Type)
		return e
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return &TransportError{Op: op, Err: err}
	}
	return nil
}

// readBody reads a whole REST body within the size bound.
func (c *conn) readBody(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(c.max)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > c.max {
		return nil, &sizeError{what: "response body", limit: c.max}
	}
	return b, nil
}

// fail maps a transport failure: the context's error when ctx is done,
// else a *TransportError.
func (c *conn) fail(ctx context.Context, op string, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return &TransportError{Op: op, Err: err}
}
