package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
	"github.com/baton-engine/baton/internal/rawjson"
)

// toolScope is one authorized request to the tools endpoint: whose tools
// it sees and calls. Its MCP server is built once per request (the SDK
// asks for it more than once).
type toolScope struct {
	sessionID string
	actor     string
	once      sync.Once
	server    *sdk.Server
}

type scopeKey struct{}

// toolsHandler serves /v1/sessions/{id}/mcp: it authorizes the request
// (tools token of this session, active turn, current epoch) and hands it
// to a stateless streamable-HTTP MCP server whose tools/list and
// tools/call are the session's server-side tools at that moment.
func (g *Gateway) toolsHandler() http.Handler {
	mcpHandler := sdk.NewStreamableHTTPHandler(func(r *http.Request) *sdk.Server {
		sc, _ := r.Context().Value(scopeKey{}).(*toolScope)
		if sc == nil {
			return nil
		}
		sc.once.Do(func() { sc.server = g.toolServer(sc) })
		return sc.server
	}, &sdk.StreamableHTTPOptions{Stateless: true, JSONResponse: true, Logger: g.log})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sc, err := g.authorizeTools(r)
		if err != nil {
			if baton.ErrorCode(err) == baton.ECodeUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="baton"`)
			}
			httpx.WriteV1Error(w, r, g.log, err)
			return
		}
		if r.Method == http.MethodPost && !g.utf8Body(w, r) {
			return
		}
		mcpHandler.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), scopeKey{}, sc)))
	})
}

// utf8Body reads a POST body (at most MaxBodyBytes) and puts it back for
// the MCP layer, whose encoding/json decoder would take invalid UTF-8 into
// tool arguments that the session then records. A body that is not valid
// UTF-8 is answered as the MCP layer answers a malformed payload: 400,
// plain text. It reports whether the request may go on.
func (g *Gateway) utf8Body(w http.ResponseWriter, r *http.Request) bool {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, g.opts.MaxBodyBytes))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		http.Error(w, fmt.Sprintf("request body exceeds %d bytes", tooBig.Limit), http.StatusRequestEntityTooLarge)
		return false
	case err != nil:
		http.Error(w, "failed to read body", http.StatusBadRequest)
		return false
	case !utf8.Valid(body):
		http.Error(w, "malformed payload: invalid UTF-8", http.StatusBadRequest)
		return false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return true
}

// authorizeTools checks a tools request: a valid tools token for the
// session in the path, of the turn's current epoch, for an active turn.
func (g *Gateway) authorizeTools(r *http.Request) (*toolScope, error) {
	token, err := httpx.Bearer(r)
	if err != nil {
		return nil, err
	}
	grant, err := g.opts.Tokens.VerifyTools(token)
	if err != nil {
		return nil, err
	}
	if grant.SessionID != r.PathValue("id") {
		return nil, baton.Errorf(baton.ECodeForbidden, "the tools token is for another session")
	}
	if e := g.opts.Epochs; e != nil && e.BrainEpoch(grant.SessionID) != grant.Epoch {
		return nil, baton.Errorf(baton.ECodeForbidden, "the tools token's epoch was superseded")
	}
	actor, err := g.activeTurn(grant)
	if err != nil {
		return nil, err
	}
	return &toolScope{sessionID: grant.SessionID, actor: actor}, nil
}

// toolServer is the MCP server of one authorized request.
func (g *Gateway) toolServer(sc *toolScope) *sdk.Server {
	s := sdk.NewServer(&sdk.Implementation{Name: "baton-session-tools", Version: g.opts.Version}, &sdk.ServerOptions{
		Capabilities: &sdk.ServerCapabilities{Tools: &sdk.ToolCapabilities{}},
		Logger:       g.log,
	})
	s.AddReceivingMiddleware(func(next sdk.MethodHandler) sdk.MethodHandler {
		return func(ctx context.Context, method string, req sdk.Request) (sdk.Result, error) {
			switch method {
			case "tools/list":
				return g.listTools(ctx, sc)
			case "tools/call":
				if r, ok := req.(*sdk.CallToolRequest); ok {
					return g.callTool(ctx, sc, r.Params)
				}
			}
			return next(ctx, method, req)
		}
	})
	return s
}

// listTools answers tools/list with the session's server-side tools, in
// one page.
func (g *Gateway) listTools(ctx context.Context, sc *toolScope) (sdk.Result, error) {
	defs, err := g.opts.Engine.SessionTools(ctx, sc.sessionID, sc.actor)
	if err != nil {
		return nil, g.rpcError(err)
	}
	res := &sdk.ListToolsResult{Tools: make([]*sdk.Tool, 0, len(defs))}
	for _, d := range defs {
		t := &sdk.Tool{Name: d.Name, InputSchema: objectSchema(d.InputSchema)}
		if d.Description != nil {
			t.Description = *d.Description
		}
		res.Tools = append(res.Tools, t)
	}
	return res, nil
}

// objectSchema is a tool's input schema as MCP requires it: a JSON object
// schema. Anything else is replaced by {"type":"object"}.
func objectSchema(raw json.RawMessage) json.RawMessage {
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil || m == nil {
		return json.RawMessage(`{"type":"object"}`)
	}
	if _, ok := m["type"]; !ok {
		m["type"] = json.RawMessage(`"object"`)
		return baton.MarshalJSON(m)
	}
	return raw
}

// callTool answers tools/call by running the tool through the engine. A
// tool's failure is an isError result; an unknown tool is an invalid
// params error.
func (g *Gateway) callTool(ctx context.Context, sc *toolScope, p *sdk.CallToolParamsRaw) (sdk.Result, error) {
	if p == nil || p.Name == "" {
		return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "tools/call needs a tool name"}
	}
	content, isErr, err := g.opts.Engine.CallSessionTool(ctx, sc.sessionID, sc.actor, p.Name, p.Arguments)
	if err != nil {
		return nil, g.rpcError(err)
	}
	return toolResult(content, isErr), nil
}

// toolResult converts a tool_result's content (canonical blocks, which
// share MCP's text form) to an MCP result. Content MCP cannot read is
// passed as its JSON text.
func toolResult(content json.RawMessage, isErr bool) *sdk.CallToolResult {
	var res sdk.CallToolResult
	wire := baton.MarshalJSON(map[string]any{"content": content, "isError": isErr})
	if rawjson.Kind(content) == '[' && json.Unmarshal(wire, &res) == nil {
		if res.Content == nil {
			res.Content = []sdk.Content{}
		}
		return &res
	}
	text := string(content)
	if rawjson.Kind(content) == '"' {
		_ = json.Unmarshal(content, &text)
	}
	return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: text}}, IsError: isErr}
}

// rpcError is an engine error as a JSON-RPC error of the MCP server.
func (g *Gateway) rpcError(err error) error {
	switch baton.ErrorCode(err) {
	case baton.ECodeNotFound, baton.ECodeBadRequest, baton.ECodeInvalidParams:
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: baton.ErrorMessage(err)}
	case baton.ECodeNotOpen, baton.ECodeSessionFailed, baton.ECodeForbidden:
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidRequest, Message: baton.ErrorMessage(err)}
	}
	g.log.Error("session tools", slog.Any("err", err))
	return &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "internal error"}
}
