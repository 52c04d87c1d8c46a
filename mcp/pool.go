// Package mcp is Baton's MCP client pool: it connects the MCP servers a
// session's profile names (stdio, streamable HTTP and SSE, through the
// official Go SDK), lists their tools and runs tools/call for the engine.
//
// Connections live in memory, keyed by session. A session connects each
// server at most once per process, on its first Tools call; after a restart
// the next turn's Tools call connects again. CloseSession closes them and
// stops stdio servers.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"time"

	"github.com/baton-engine/baton"
	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// maxBody bounds one HTTP response body that is not an event stream (a
// JSON-RPC reply or an error body), as the provider caps a non-streamed
// reply. Event streams are bounded per event by the SDK instead and may be
// long-lived, so they are not capped in total.
const maxBody = 32 << 20

// DefaultCallTimeout bounds one connect or tools/call when Options leave it
// zero (BATON_MCP_CALL_TIMEOUT).
const DefaultCallTimeout = 30 * time.Second

// Options configure a Pool.
type Options struct {
	// CallTimeout bounds one connect (with its tools/list) and one
	// tools/call; default DefaultCallTimeout.
	CallTimeout time.Duration
	// LookupEnv resolves ${VAR} in commands, args and headers (default
	// os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// Version is reported as the client version in the handshake.
	Version string
	Logger  *slog.Logger
	// Wrap, when set, is called with the command of each stdio server
	// before it starts, and may change it: for example to run it under a
	// supervisor that kills its whole process tree when this process dies.
	// The command transport signals the command's process alone.
	Wrap func(*exec.Cmd)
}

// Pool implements baton.MCPPool.
type Pool struct {
	opts   Options
	log    *slog.Logger
	client *sdk.Client
	// maxBody caps a non-event-stream HTTP response (maxBody; tests lower it).
	maxBody int64

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool
}

var _ baton.MCPPool = (*Pool)(nil)

// session is one session's connections. mu serializes connecting, so a
// server is dialled once even when two turns race.
type session struct {
	mu    sync.Mutex
	conns map[string]*conn // connected servers by name
	tried map[string]bool  // servers already attempted, connected or not
	gone  bool             // closed; late connections are closed at once
}

// conn is one live server connection.
type conn struct {
	cs    *sdk.ClientSession
	tools []baton.MCPTool
	http  *http.Transport // nil for stdio
	// stop ends the connection's own context, which a remote transport's
	// long-lived streams (the SSE GET) run under.
	stop context.CancelFunc
}

// Open returns a ready Pool.
func Open(opts Options) (*Pool, error) {
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.Version == "" {
		opts.Version = "dev"
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return &Pool{
		opts: opts, log: log, maxBody: maxBody,
		client:   sdk.NewClient(&sdk.Implementation{Name: "baton", Version: opts.Version}, nil),
		sessions: make(map[string]*session),
	}, nil
}

// Close closes every session's connections. Later Tools calls connect
// nothing.
func (p *Pool) Close() error {
	p.mu.Lock()
	p.closed = true
	ids := make([]string, 0, len(p.sessions))
	for id := range p.sessions {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	for _, id := range ids {
		p.CloseSession(id)
	}
	return nil
}

// Sessions returns how many sessions have at least one live server
// connection (the activity summary's live MCP sessions).
func (p *Pool) Sessions() int {
	p.mu.Lock()
	ss := make([]*session, 0, len(p.sessions))
	for _, s := range p.sessions {
		ss = append(ss, s)
	}
	p.mu.Unlock()
	n := 0
	for _, s := range ss {
		s.mu.Lock()
		if !s.gone && len(s.conns) > 0 {
			n++
		}
		s.mu.Unlock()
	}
	return n
}

// Tools connects the servers not yet attempted for the session and
// returns the tools of the connected ones, in servers' order.
func (p *Pool) Tools(ctx context.Context, sessionID string, servers []baton.MCPServer) ([]baton.MCPTool, error) {
	if len(servers) == 0 {
		return nil, nil
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, errors.New("MCP pool is closed")
	}
	s := p.sessions[sessionID]
	if s == nil {
		s = &session{conns: map[string]*conn{}, tried: map[string]bool{}}
		p.sessions[sessionID] = s
	}
	p.mu.Unlock()

	s.mu.Lock()
	defer s.mu.Unlock()
	var out []baton.MCPTool
	for _, srv := range servers {
		if !s.tried[srv.Name] && !s.gone {
			s.tried[srv.Name] = true
			c, err := p.connect(ctx, srv)
			if err != nil {
				p.log.Error("MCP connect failed", "session_id", sessionID, "server", srv.Name, "err", err)
			} else {
				s.conns[srv.Name] = c
			}
		}
		if c := s.conns[srv.Name]; c != nil {
			out = append(out, c.tools...)
		}
	}
	return out, nil
}

// connect dials one server and lists its tools. The transport runs under
// a context of its own that outlives this call (the SSE transport keeps
// its event stream on it); the caller's ctx and the call timeout bound
// only the handshake.
func (p *Pool) connect(ctx context.Context, srv baton.MCPServer) (*conn, error) {
	life, stop := context.WithCancel(context.WithoutCancel(ctx))
	c := &conn{stop: stop}
	abort := time.AfterFunc(p.opts.CallTimeout, stop)
	defer abort.Stop()
	unhook := context.AfterFunc(ctx, stop)
	defer unhook()
	ctx = life
	expand := func(s string) (string, error) { return baton.ExpandVars(s, p.opts.LookupEnv) }
	var t, legacy sdk.Transport // legacy: tried when t cannot connect
	switch srv.Transport {
	case baton.MCPStdio:
		command, err := expand(srv.Command)
		if err != nil {
			stop()
			return nil, fmt.Errorf("command: %w", err)
		}
		args := make([]string, len(srv.Args))
		for i, a := range srv.Args {
			if args[i], err = expand(a); err != nil {
				stop()
				return nil, fmt.Errorf("args[%d]: %w", i, err)
			}
		}
		// Not CommandContext: the child outlives this connect call.
		cmd := exec.Command(command, args...)
		if p.opts.Wrap != nil {
			p.opts.Wrap(cmd)
		}
		t = &sdk.CommandTransport{Command: cmd, TerminateDuration: time.Second}
	case baton.MCPHTTP, baton.MCPSSE:
		headers := make(map[string]string, len(srv.Headers))
		for k, v := range srv.Headers {
			x, err := expand(v)
			if err != nil {
				stop()
				return nil, fmt.Errorf("header %s: %w", k, err)
			}
			headers[k] = x
		}
		c.http = http.DefaultTransport.(*http.Transport).Clone()
		hc := &http.Client{Transport: headerTripper{base: c.http, headers: headers, max: p.maxBody}}
		// Both speak Streamable HTTP, as BAE does; "sse" then falls back to
		// the older HTTP+SSE transport, which BAE cannot reach.
		t = &sdk.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: hc, DisableStandaloneSSE: true}
		if srv.Transport == baton.MCPSSE {
			legacy = &sdk.SSEClientTransport{Endpoint: srv.URL, HTTPClient: hc}
		}
	default:
		stop()
		return nil, fmt.Errorf("unknown transport %q", srv.Transport)
	}
	cs, err := p.client.Connect(ctx, t, nil)
	if err != nil && legacy != nil && ctx.Err() == nil {
		cs, err = p.client.Connect(ctx, legacy, nil)
	}
	if err != nil {
		c.closeIdle()
		return nil, err
	}
	c.cs = cs
	res, err := cs.ListTools(ctx, &sdk.ListToolsParams{})
	if err != nil {
		c.close()
		return nil, fmt.Errorf("tools/list: %w", err)
	}
	for _, tool := range res.Tools {
		if tool == nil || tool.Name == "" {
			continue
		}
		var schema json.RawMessage
		if tool.InputSchema != nil {
			if schema, err = json.Marshal(tool.InputSchema); err != nil {
				schema = nil
			}
		}
		c.tools = append(c.tools, baton.MCPTool{Server: srv.Name, Name: tool.Name, Description: tool.Description, InputSchema: schema})
	}
	return c, nil
}

// Call runs tools/call on the session's connection to server, bounded by
// the call timeout; when ctx ends first the SDK sends
// notifications/cancelled to the server.
func (p *Pool) Call(ctx context.Context, sessionID, server, tool string, input json.RawMessage) (json.RawMessage, bool, error) {
	p.mu.Lock()
	s := p.sessions[sessionID]
	p.mu.Unlock()
	var c *conn
	if s != nil {
		s.mu.Lock()
		c = s.conns[server]
		s.mu.Unlock()
	}
	if c == nil {
		return nil, false, fmt.Errorf("MCP connect failed: server '%s' is not connected", server)
	}
	if len(input) == 0 || string(input) == "null" {
		input = json.RawMessage(`{}`)
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.CallTimeout)
	defer cancel()
	res, err := c.cs.CallTool(ctx, &sdk.CallToolParams{Name: tool, Arguments: input})
	if err != nil {
		var werr *jsonrpc.Error
		switch {
		case errors.As(err, &werr):
			return nil, false, fmt.Errorf("MCP protocol error: [%d] %s", werr.Code, werr.Message)
		case errors.Is(ctx.Err(), context.DeadlineExceeded):
			return nil, false, errors.New("MCP transport error: timed out awaiting tools/call response")
		case errors.Is(err, sdk.ErrConnectionClosed):
			return nil, false, errors.New("MCP transport error: MCP server closed the connection")
		}
		return nil, false, fmt.Errorf("MCP transport error: %v", err)
	}
	raw, err := json.Marshal(res)
	if err != nil {
		return nil, false, fmt.Errorf("MCP protocol error: encode result: %v", err)
	}
	return raw, res.IsError, nil
}

// CloseSession closes the session's connections; stdio children get their
// stdin closed, then SIGTERM, then SIGKILL, and are reaped.
func (p *Pool) CloseSession(sessionID string) {
	p.mu.Lock()
	s := p.sessions[sessionID]
	delete(p.sessions, sessionID)
	p.mu.Unlock()
	if s == nil {
		return
	}
	s.mu.Lock()
	s.gone = true
	conns := s.conns
	s.conns = map[string]*conn{}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for name, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := c.close(); err != nil {
				p.log.Debug("MCP close", "session_id", sessionID, "server", name, "err", err)
			}
		}()
	}
	wg.Wait()
}

func (c *conn) close() error {
	err := c.cs.Close()
	c.closeIdle()
	return err
}

func (c *conn) closeIdle() {
	c.stop()
	if c.http != nil {
		c.http.CloseIdleConnections()
	}
}

// headerTripper adds the server's configured headers to every request and
// caps each response body that is not an event stream at max bytes.
type headerTripper struct {
	base    http.RoundTripper
	headers map[string]string
	max     int64
}

func (h headerTripper) RoundTrip(r *http.Request) (*http.Response, error) {
	if len(h.headers) > 0 {
		r = r.Clone(r.Context())
		for k, v := range h.headers {
			r.Header.Set(k, v)
		}
	}
	resp, err := h.base.RoundTrip(r)
	if err != nil || resp.Body == nil || eventStream(resp) {
		return resp, err
	}
	resp.Body = &limitBody{rc: resp.Body, left: h.max, max: h.max}
	return resp, nil
}

func eventStream(resp *http.Response) bool {
	mt, _, err := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return err == nil && mt == "text/event-stream"
}

// limitBody reads at most max bytes of a response body and then fails,
// rather than truncating the body silently.
type limitBody struct {
	rc   io.ReadCloser
	left int64 // bytes still allowed
	max  int64
}

func (b *limitBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, fmt.Errorf("mcp: response body is larger than %d bytes", b.max)
	}
	// Read one byte past the limit to tell "exactly max" from "more".
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.rc.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		n += int(b.left) // drop the byte past the limit
		return n, fmt.Errorf("mcp: response body is larger than %d bytes", b.max)
	}
	return n, err
}

func (b *limitBody) Close() error { return b.rc.Close() }
