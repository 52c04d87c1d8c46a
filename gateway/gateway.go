package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/auth"
	"github.com/baton-engine/baton/internal/httpx"
	"github.com/baton-engine/baton/provider"
	"github.com/baton-engine/baton/provider/anthropic"
	"github.com/baton-engine/baton/provider/openai"
)

// DefaultMaxBody bounds a model request: whole conversations travel in it.
const DefaultMaxBody = 32 << 20

// Routes of the client port, and the path the model base URL names.
const (
	ModelBasePath    = "/v1/model"
	routeMessages    = "POST " + ModelBasePath + "/v1/messages"
	routeCompletions = "POST " + ModelBasePath + "/v1/chat/completions"
	routeTools       = "/v1/sessions/{id}/mcp"
)

// Tokens verifies model and tools tokens (auth.TurnTokens).
type Tokens interface {
	VerifyModel(token string) (*auth.TurnGrant, error)
	VerifyTools(token string) (*auth.TurnGrant, error)
}

// Engine is what the gateway asks of the engine: whether a brain turn is
// active and who acts in it, and the model and tool calls themselves.
type Engine interface {
	// TurnActor returns the acting client key id of the session's active
	// brain turn turnID (events of its calls are attributed to it); ok is
	// false when the turn is not active.
	TurnActor(sessionID, turnID string) (actor string, ok bool)
	ModelCall(ctx context.Context, sessionID, actor string, req *baton.ProviderRequest) (*baton.ProviderResponse, error)
	SessionTools(ctx context.Context, sessionID, actor string) ([]baton.ToolDef, error)
	CallSessionTool(ctx context.Context, sessionID, actor, name string, input json.RawMessage) (json.RawMessage, bool, error)
}

// Epochs reports the current binding epoch of a brain session, which
// tools tokens are bound to (the executor hub).
type Epochs interface {
	// BrainEpoch returns the epoch of the session's agent binding, or 0
	// when it has none.
	BrainEpoch(sessionID string) int64
}

// Options configure a Gateway.
type Options struct {
	Tokens Tokens
	Engine Engine
	// Epochs, when set, refuses tools tokens of a superseded epoch.
	Epochs Epochs
	Logger *slog.Logger // nil discards
	// MaxBodyBytes bounds a model request (DefaultMaxBody when <= 0).
	MaxBodyBytes int64
	// Version is reported by the MCP server.
	Version string
}

// Gateway serves the model gateway and the session tools endpoint.
type Gateway struct {
	opts  Options
	log   *slog.Logger
	tools http.Handler
}

// New returns a Gateway.
func New(opts Options) *Gateway {
	g := &Gateway{opts: opts, log: opts.Logger}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	if g.opts.MaxBodyBytes <= 0 {
		g.opts.MaxBodyBytes = DefaultMaxBody
	}
	g.tools = g.toolsHandler()
	return g
}

// Routes registers the gateway's routes on mux.
func (g *Gateway) Routes(mux *http.ServeMux) {
	mux.Handle(routeMessages, g.model(anthropicAPI))
	mux.Handle(routeCompletions, g.model(openaiAPI))
	mux.Handle(routeTools, g.tools)
}

// api is one model API the gateway speaks; its wire format is the
// provider package's.
type api struct {
	decode    func(body []byte) (*baton.ProviderRequest, any, error)
	write     func(w http.ResponseWriter, r *provider.Reply, in any) error
	fail      func(w http.ResponseWriter, status int, msg string)
	idPrefix  string
	apiKeyHdr bool // the token may come as x-api-key
}

var anthropicAPI = &api{
	decode: func(body []byte) (*baton.ProviderRequest, any, error) { return anthropic.DecodeRequest(body) },
	write: func(w http.ResponseWriter, r *provider.Reply, in any) error {
		return anthropic.WriteReply(w, r, in.(*anthropic.Request).Stream)
	},
	fail:      anthropic.WriteError,
	idPrefix:  "msg_",
	apiKeyHdr: true,
}

var openaiAPI = &api{
	decode: func(body []byte) (*baton.ProviderRequest, any, error) { return openai.DecodeRequest(body) },
	write: func(w http.ResponseWriter, r *provider.Reply, in any) error {
		return openai.WriteReply(w, r, in.(*openai.ChatRequest))
	},
	fail:     openai.WriteError,
	idPrefix: "chatcmpl-",
}

// model serves one model API: token, active turn, body, provider chain,
// reply — every failure in that API's error shape.
func (g *Gateway) model(a *api) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		grant, err := g.modelGrant(r, a)
		if err != nil {
			a.fail(w, http.StatusUnauthorized, baton.ErrorMessage(err))
			return
		}
		ctx := r.Context()
		actor, err := g.activeTurn(grant)
		if err != nil {
			g.fail(w, r, a, err)
			return
		}
		body, err := httpx.ReadJSON(w, r, g.opts.MaxBodyBytes)
		if err != nil {
			g.fail(w, r, a, err)
			return
		}
		req, in, err := a.decode(body)
		if err != nil {
			g.fail(w, r, a, err)
			return
		}
		resp, err := g.opts.Engine.ModelCall(ctx, grant.SessionID, actor, req)
		if err != nil {
			g.fail(w, r, a, err)
			return
		}
		var model string
		switch in := in.(type) {
		case *anthropic.Request:
			model = in.Model
		case *openai.ChatRequest:
			model = in.Model
		}
		if err := a.write(w, newReply(resp, model, a.idPrefix), in); err != nil {
			g.log.Debug("model gateway: write reply", slog.Any("err", err))
		}
	})
}

// modelGrant verifies the request's model token: the bearer token, or
// (Anthropic clients) the x-api-key header.
func (g *Gateway) modelGrant(r *http.Request, a *api) (*auth.TurnGrant, error) {
	token, err := httpx.Bearer(r)
	if err != nil && a.apiKeyHdr {
		if k := r.Header.Get("X-Api-Key"); k != "" {
			token, err = k, nil
		}
	}
	if err != nil {
		return nil, err
	}
	return g.opts.Tokens.VerifyModel(token)
}

// errInactive refuses calls for a turn that ended.
var errInactive = baton.Errorf(baton.ECodeForbidden, "the turn is not active")

// activeTurn checks that the grant's turn is active and returns its
// acting client key id.
func (g *Gateway) activeTurn(grant *auth.TurnGrant) (string, error) {
	actor, ok := g.opts.Engine.TurnActor(grant.SessionID, grant.TurnID)
	if !ok {
		return "", errInactive
	}
	return actor, nil
}

// status maps an error to the gateway's HTTP status: 400 for a bad
// request, 403 for a turn or session that is no longer active, 502 when
// every provider failed, 500 otherwise.
func status(err error) int {
	var rej *httpx.Rejection
	if errors.As(err, &rej) {
		return rej.Status
	}
	switch baton.ErrorCode(err) {
	case baton.ECodeBadRequest, baton.ECodeInvalidParams:
		return http.StatusBadRequest
	case baton.ECodePayloadTooLarge:
		return http.StatusRequestEntityTooLarge
	case baton.ECodeUnauthorized:
		return http.StatusUnauthorized
	case baton.ECodeForbidden, baton.ECodeNotOpen, baton.ECodeSessionFailed, baton.ECodeSessionClosed:
		return http.StatusForbidden
	case baton.ECodeNotFound:
		return http.StatusNotFound
	case baton.ECodeUnavailable:
		return http.StatusBadGateway
	}
	return http.StatusInternalServerError
}

// fail writes err in a's error shape; internal errors are logged and
// answered with a generic message.
func (g *Gateway) fail(w http.ResponseWriter, r *http.Request, a *api, err error) {
	if r.Context().Err() != nil {
		return // the caller is gone
	}
	st := status(err)
	msg := baton.ErrorMessage(err)
	var rej *httpx.Rejection
	if errors.As(err, &rej) {
		msg = rej.Text
	}
	if st == http.StatusInternalServerError {
		g.log.Error("model gateway", slog.String("path", r.URL.Path), slog.Any("err", err))
		msg = "internal error"
	}
	a.fail(w, st, msg)
}

// Origin returns the client origin executors reach this server at:
// public (BATON_PUBLIC_URL) when set, else the listener's URL, without a
// trailing slash.
func Origin(public string, listener func() string) func() string {
	return func() string {
		if public != "" {
			return strings.TrimRight(public, "/")
		}
		return strings.TrimRight(listener(), "/")
	}
}
