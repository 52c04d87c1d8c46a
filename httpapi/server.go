package httpapi

import (
	"log/slog"
	"net/http"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/filearea"
	"github.com/baton-engine/baton/internal/httpx"
)

// Options configure a client-port server.
type Options struct {
	Addr         string       // listen address, e.g. "0.0.0.0:8080" or "127.0.0.1:0"
	Logger       *slog.Logger // nil discards
	MaxBodyBytes int64        // request body limit; <= 0 means httpx.DefaultMaxBody
	MaxRPCBytes  int64        // /rpc request limit (tool results can be large); <= 0 means DefaultMaxRPC
	// MaxInflightBytes is the budget of request bytes handled at once
	// (a sendMessage's until its turn ends); past it a request is refused
	// at once. <= 0 means DefaultMaxInflight.
	MaxInflightBytes int64

	// BodyTimeout bounds how long a request may take to send its whole
	// body (httpx.DefaultBodyTimeout when <= 0); a stalled body is 408.
	// WriteTimeout bounds each write of an NDJSON stream
	// (httpx.DefaultWriteTimeout when <= 0): a client that stops reading
	// ends its stream and releases its subscription.
	BodyTimeout  time.Duration
	WriteTimeout time.Duration

	Auth      baton.Authenticator
	Sessions  baton.SessionService
	Events    baton.EventLog
	Turns     baton.TurnService    // the JSON-RPC session loop
	Sandboxes baton.SandboxService // its sandbox and subagent methods

	// Clients and V1Store serve the /v1 registered-client routes; both
	// nil leaves them unrouted.
	Clients baton.ClientService
	V1Store V1Store

	// ExecutorTokens serves the executor token exchange under /v1 (nil
	// leaves it unrouted).
	ExecutorTokens baton.ExecutorTokens
	// Executors serves GET /v1/executors/connect, the executor WebSocket
	// (the executor hub; nil leaves it unrouted).
	Executors http.Handler
	// Mount registers further routes of the client port: the model
	// gateway and the session tools endpoint (package gateway). They are
	// not resources, so idempotency keys do not cover them. Mount is
	// called twice, on the routing mux and on one that only tells the
	// mounted routes apart, so it must only register routes.
	Mount func(*http.ServeMux)

	// Files serves session files (/api/v1/sessions/{id}/files/…) and
	// artifact downloads; with ExecutorTokens also artifact uploads, and
	// with ViewTokens the executor file service (/v1/fs/…). Epochs, when
	// set, makes the file service refuse view tokens of an earlier
	// binding. FileLimits caps files and artifacts (zero values take the
	// filearea defaults). Nil Files leaves all of it unrouted.
	Files      filearea.Store
	ViewTokens filearea.ViewTokens
	Epochs     filearea.Epochs
	FileLimits filearea.Limits

	// Guards in front of every route (docs/api.md, registered session clients): idempotency
	// receipts (nil: Idempotency-Key is ignored), the per-credential rate
	// limit (RateLimit requests/s with RateBurst; 0 turns it off) and the
	// minimum Client-Version (nil: no check).
	Receipts         baton.ReceiptStore
	RateLimit        float64
	RateBurst        int
	MinClientVersion *Version

	// Route, when set, wraps every route inside the access log and ahead
	// of the guards: in a cluster it sends a request about a session
	// another node owns to that node (package cluster's Forward), so the
	// owner's guards and handlers serve it.
	Route func(http.Handler) http.Handler
}

// Server is the client-port HTTP server. Open, URL, Shutdown and Close come
// from the embedded httpx.Server.
type Server struct {
	*httpx.Server
	opts       Options
	log        *slog.Logger
	handler    http.Handler
	fileLimits filearea.Limits
	bufs       bufPool // NDJSON stream buffers
	inflight   *inflight
}

// New returns a server for opts; it does not bind until Open.
func New(opts Options) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{opts: opts, log: log, inflight: &inflight{max: opts.MaxInflightBytes}}
	if s.inflight.max <= 0 {
		s.inflight.max = DefaultMaxInflight
	}
	mux := http.NewServeMux()
	s.routes(mux)
	var h http.Handler = s.pathGuard(httpx.Routes(mux))
	h = s.mountedBypass(h, Idempotency(IdempotencyOptions{Receipts: opts.Receipts, MaxBody: opts.MaxBodyBytes, Logger: log, Caller: s.idemCaller}, h))
	h = ClientVersion(opts.MinClientVersion, h)
	h = s.guardInflight(h)
	h = NewRateLimiter(RateLimitOptions{Rate: opts.RateLimit, Burst: opts.RateBurst}).Wrap(h)
	if opts.Route != nil {
		h = opts.Route(h)
	}
	s.handler = httpx.AccessLog(log, h)
	s.Server = httpx.NewServer(opts.Addr, s.handler, log)
	s.Server.SetBodyTimeout(opts.BodyTimeout)
	return s
}

// mountedBypass sends requests for Mount's routes to plain and every
// other one to guarded, so that the idempotency guard needs no list of
// routes owned by other packages.
func (s *Server) mountedBypass(plain, guarded http.Handler) http.Handler {
	if s.opts.Mount == nil {
		return guarded
	}
	mounted := http.NewServeMux()
	s.opts.Mount(mounted)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mounted.Handler(r); pattern != "" {
			plain.ServeHTTP(w, r)
			return
		}
		guarded.ServeHTTP(w, r)
	})
}

// Handler returns the server's complete handler (access log included), for
// tests and for embedding.
func (s *Server) Handler() http.Handler { return s.handler }

// routes registers every client-port route.
func (s *Server) routes(mux *http.ServeMux) {
	mux.Handle("GET /healthz", http.HandlerFunc(healthz))
	s.handle(mux, "GET /api/v1/meta", meta)
	s.handle(mux, "POST /api/v1/sessions", s.openSession)
	s.handle(mux, "POST /api/v1/sessions/{id}/join", s.joinSession)
	s.handle(mux, "GET /api/v1/sessions/{id}/participants", s.participants)
	s.handle(mux, "GET /api/v1/sessions/{id}/events", s.events)
	s.handle(mux, "DELETE /api/v1/sessions/{id}", s.closeSession)
	mux.HandleFunc("POST /api/v1/sessions/{id}/rpc", s.rpc)
	s.v1Routes(mux)
	s.executorRoutes(mux)
	if s.opts.Executors != nil {
		mux.Handle("GET /v1/executors/connect", s.opts.Executors)
	}
	s.fileRoutes(mux)
	if s.opts.Mount != nil {
		s.opts.Mount(mux)
	}
}

// handle registers h under pattern with the shared error rendering.
func (s *Server) handle(mux *http.ServeMux, pattern string, h httpx.HandlerFunc) {
	mux.Handle(pattern, httpx.Handle(s.log, h))
}

// clientKey authenticates r with a client key (BAE's client API).
func (s *Server) clientKey(r *http.Request) (*baton.Key, error) {
	token, err := httpx.Bearer(r)
	if err != nil {
		return nil, err
	}
	key, err := s.opts.Auth.ClientKey(r.Context(), token)
	if baton.ErrorCode(err) == baton.ECodeUnauthorized {
		return nil, baton.Errorf(baton.ECodeUnauthorized, "invalid client key")
	}
	return key, err
}

// sessionKey authenticates r with a session key bound to sessionID; an
// unknown session is 401 like any other unmatched key.
func (s *Server) sessionKey(r *http.Request, sessionID string) (*baton.Key, error) {
	token, err := httpx.Bearer(r)
	if err != nil {
		return nil, err
	}
	key, err := s.opts.Auth.SessionKey(r.Context(), sessionID, token)
	if baton.ErrorCode(err) == baton.ECodeUnauthorized {
		return nil, baton.Errorf(baton.ECodeUnauthorized, "invalid session key")
	}
	return key, err
}
