package client

import (
	"bufio"
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
)

// Lifetime says how long a registered client outlives its last ping. The
// zero value is "never".
type Lifetime struct {
	// TTL, when positive, ends the client TTL after its last ping (5 s to
	// 1 h, whole seconds). The handle pings every TTL/2 on its own.
	TTL time.Duration
}

// Never is the lifetime of a client that stays until deleted.
func Never() Lifetime { return Lifetime{} }

// TTL is the lifetime of a client that lapses d after its last ping.
func TTL(d time.Duration) Lifetime { return Lifetime{TTL: d} }

// RegisteredTool is one tool a registered client serves. The model sees
// it as client__{assigned name}__{Name}.
type RegisteredTool struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the input; nil means
	// {"type":"object"}.
	Parameters json.RawMessage
	// Handler answers calls, as for a Harness tool: a string result is
	// text, []Block blocks, anything else its JSON; an error is an
	// is_error result. ctx ends at the call's deadline or at Close.
	Handler ToolHandler
}

// V1Error is a /v1 error response: {"error":{"code","message"}}.
type V1Error struct {
	Status  int
	Code    string
	Message string
}

func (e *V1Error) Error() string {
	return fmt.Sprintf("client: %d %s: %s", e.Status, e.Code, e.Message)
}

// RegisteredClient is a live registration: it pings on its own (ttl
// lifetimes), serves its tools from the calls stream, reconnecting with
// backoff after transport errors and 5xx answers, until Close, or until
// the server answers 404 (the client is gone), 401 (the credential is
// revoked, e.g. its session closed) or 403 (the credential may not manage
// the session): then Done closes and Err says which.
type RegisteredClient struct {
	ID        string
	Name      string // the assigned name
	SessionID string

	base, path, token string
	hc                *http.Client
	max               int // Config.MaxFrameSize: the longest call line read
	log               *slog.Logger
	ttl               time.Duration

	mu       sync.RWMutex
	handlers map[string]ToolHandler
	expires  *time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	done   chan struct{}
	err    error // why the background loops stopped; set before done closes
}

// RegisterClient registers a client named name on sessionID (ses_ or UUID
// form) with a session key or a client key holding session.manage, and
// starts serving tools. Only cfg.BaseURL, HTTPClient and Logger are used.
func RegisterClient(ctx context.Context, cfg Config, sessionID, token, name string, lifetime Lifetime, tools ...RegisteredTool) (*RegisteredClient, error) {
	hc := cfg.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &RegisteredClient{
		SessionID: sessionID, base: strings.TrimRight(cfg.BaseURL, "/"), token: token,
		hc: hc, log: log, ttl: lifetime.TTL, handlers: map[string]ToolHandler{}, done: make(chan struct{}),
		max: cfg.MaxFrameSize,
	}
	if c.max <= 0 {
		c.max = DefaultMaxFrameSize
	}
	lt := map[string]any{"type": "never"}
	if lifetime.TTL > 0 {
		lt = map[string]any{"type": "ttl", "data": map[string]any{"seconds": int(lifetime.TTL / time.Second)}}
	}
	var out struct {
		ID        string     `json:"id"`
		Name      string     `json:"name"`
		ExpiresAt *time.Time `json:"expires_at"`
	}
	body := map[string]any{"lifetime": lt, "name": name, "tools": c.setTools(tools)}
	if err := c.do(ctx, "POST", "/v1/sessions/"+sessionID+"/clients", body, &out); err != nil {
		return nil, err
	}
	c.ID, c.Name, c.expires = out.ID, out.Name, out.ExpiresAt
	c.path = "/v1/sessions/" + sessionID + "/clients/" + out.ID
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.wg.Add(1)
	go c.serve()
	if c.ttl > 0 {
		c.wg.Add(1)
		go c.pinger()
	}
	go func() {
		c.wg.Wait()
		close(c.done)
	}()
	return c, nil
}

// setTools installs handlers and returns the wire form of tools.
func (c *RegisteredClient) setTools(tools []RegisteredTool) []map[string]any {
	wire := make([]map[string]any, len(tools))
	handlers := make(map[string]ToolHandler, len(tools))
	for i, t := range tools {
		params := t.Parameters
		if params == nil {
			params = json.RawMessage(`{"type":"object"}`)
		}
		wire[i] = map[string]any{"name": t.Name, "description": t.Description, "parameters": params}
		handlers[t.Name] = t.Handler
	}
	c.mu.Lock()
	c.handlers = handlers
	c.mu.Unlock()
	return wire
}

// ReplaceTools replaces the client's tools; the model sees the new set
// from its next call.
func (c *RegisteredClient) ReplaceTools(ctx context.Context, tools ...RegisteredTool) error {
	c.mu.RLock()
	old := c.handlers
	c.mu.RUnlock()
	wire := c.setTools(tools)
	if err := c.do(ctx, "PUT", c.path+"/tools", map[string]any{"tools": wire}, nil); err != nil {
		c.mu.Lock()
		c.handlers = old
		c.mu.Unlock()
		return err
	}
	return nil
}

// Ping extends a ttl client now and returns its new expiry (nil: never).
func (c *RegisteredClient) Ping(ctx context.Context) (*time.Time, error) {
	var out struct {
		ExpiresAt *time.Time `json:"expires_at"`
	}
	if err := c.do(ctx, "POST", c.path+"/ping", nil, &out); err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.expires = out.ExpiresAt
	c.mu.Unlock()
	return out.ExpiresAt, nil
}

// Done is closed when the background loops stop: after Close, Abort,
// once the server says the client is gone or refuses its credential, or
// when a call is larger than Config.MaxFrameSize (see Err).
func (c *RegisteredClient) Done() <-chan struct{} { return c.done }

// Err waits for Done and returns why the loops stopped: the *V1Error of
// the 404, 401 or 403 that ended them, an error naming Config.MaxFrameSize
// for a call too large to read, or nil after Close or Abort.
func (c *RegisteredClient) Err() error {
	<-c.done
	return c.err
}

// Abort stops pinging and serving without telling the server, as a
// crashed client would; the registration lapses by its ttl.
func (c *RegisteredClient) Abort() {
	c.cancel()
	<-c.done
}

// Close stops the loops and deletes the registration.
func (c *RegisteredClient) Close(ctx context.Context) error {
	c.Abort()
	err := c.do(ctx, "DELETE", c.path, nil, nil)
	var v1 *V1Error
	if errors.As(err, &v1) && v1.Status == http.StatusNotFound {
		return nil // already gone
	}
	return err
}

// stop ends the loops because the client is gone server-side or its
// credential is refused.
func (c *RegisteredClient) stop(err error) {
	c.mu.Lock()
	if c.err == nil {
		c.err = err
	}
	c.mu.Unlock()
	c.log.Info("registered client stopped", "client_id", c.ID, "err", err)
	c.cancel()
}

// final reports whether err is an answer no retry can change: 404 (the
// client is gone), 401 (the credential is unknown or revoked) or 403 (it
// lacks the scope), or a call line over Config.MaxFrameSize (the server
// would send it again on every connect). Transport errors and 5xx are
// worth retrying.
func final(err error) bool {
	if errors.Is(err, errFrameTooLarge) {
		return true
	}
	var v1 *V1Error
	if !errors.As(err, &v1) {
		return false
	}
	switch v1.Status {
	case http.StatusNotFound, http.StatusUnauthorized, http.StatusForbidden:
		return true
	}
	return false
}

// pinger pings every ttl/2.
func (c *RegisteredClient) pinger() {
	defer c.wg.Done()
	t := time.NewTicker(c.ttl / 2)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
			_, err := c.Ping(c.ctx)
			if final(err) {
				c.stop(err)
				return
			}
			if err != nil && c.ctx.Err() == nil {
				c.log.Warn("registered client ping", "client_id", c.ID, "err", err)
			}
		}
	}
}

// serve reads the calls stream, reconnecting with backoff, until the
// client is gone or closed.
func (c *RegisteredClient) serve() {
	defer c.wg.Done()
	backoff := 50 * time.Millisecond
	for c.ctx.Err() == nil {
		got, err := c.stream()
		if final(err) {
			c.stop(err)
			return
		}
		if err == nil && !got {
			// The server ended the stream: the client expired or was
			// deleted, or its session closed. One more connect tells
			// which (404 or 401 ends the loop).
			backoff = 50 * time.Millisecond
		} else if got {
			backoff = 50 * time.Millisecond
		}
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, 5*time.Second)
	}
}

// stream runs one calls-stream connection; got reports whether any call
// arrived.
func (c *RegisteredClient) stream() (got bool, err error) {
	req, err := http.NewRequestWithContext(c.ctx, "GET", c.base+c.path+"/calls", nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Accept", "application/x-ndjson")
	resp, err := c.hc.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return false, v1Error(resp)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, min(64<<10, c.max)), c.max)
	for sc.Scan() {
		var call struct {
			CallID    string          `json:"call_id"`
			Tool      string          `json:"tool"`
			Input     json.RawMessage `json:"input"`
			ToolUseID string          `json:"tool_use_id"`
			Deadline  time.Time       `json:"deadline"`
		}
		if err := json.Unmarshal(sc.Bytes(), &call); err != nil {
			return got, err
		}
		got = true
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.answer(call.CallID, call.Tool, call.Input, call.Deadline)
		}()
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		// The server would send the same call again on every connect.
		return got, &sizeError{what: "call", limit: c.max}
	}
	return got, sc.Err()
}

// answer runs one call's handler and posts its result.
func (c *RegisteredClient) answer(callID, tool string, input json.RawMessage, deadline time.Time) {
	ctx := c.ctx
	if !deadline.IsZero() {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, deadline)
		defer cancel()
	}
	c.mu.RLock()
	h := c.handlers[tool]
	c.mu.RUnlock()
	var (
		content json.RawMessage
		isErr   bool
	)
	if h == nil {
		content, _ = json.Marshal("no handler for tool " + tool)
		isErr = true
	} else {
		v, err := safeCall(ctx, h, input)
		if err == nil {
			content, err = resultContent(v)
		}
		if err != nil {
			content, _ = json.Marshal(err.Error())
			isErr = true
		}
	}
	body := map[string]any{"content": content, "is_error": isErr}
	if err := c.do(c.ctx, "POST", c.path+"/calls/"+callID+"/result", body, nil); err != nil && c.ctx.Err() == nil {
		c.log.Warn("registered client result", "client_id", c.ID, "call_id", callID, "err", err)
	}
}

// safeCall runs h, turning a panic into an error.
func safeCall(ctx context.Context, h ToolHandler, input json.RawMessage) (v any, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("tool handler panicked: %v", p)
		}
	}()
	return h(ctx, input)
}

// do performs one /v1 JSON call.
func (c *RegisteredClient) do(ctx context.Context, method, path string, in, out any) error {
	var rd io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return &TransportError{Op: method + " " + path, Err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return v1Error(resp)
	}
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, DefaultMaxFrameSize)).Decode(out); err != nil {
		return &TransportError{Op: method + " " + path, Err: err}
	}
	return nil
}

// v1Error reads a /v1 error envelope.
func v1Error(resp *http.Response) *V1Error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var env struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	e := &V1Error{Status: resp.StatusCode}
	if json.Unmarshal(b, &env) == nil && env.Error.Code != "" {
		e.Code, e.Message = env.Error.Code, env.Error.Message
	} else {
		e.Message = strings.TrimSpace(string(b))
	}
	return e
}
