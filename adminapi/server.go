package adminapi

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
)

// Options configure an admin-port server.
type Options struct {
	Addr         string       // must be a loopback IP literal and a port, e.g. "127.0.0.1:8081"
	Logger       *slog.Logger // nil discards
	MaxBodyBytes int64        // request body limit; <= 0 means httpx.DefaultMaxBody

	Auth     baton.Authenticator // nil disables admin authentication (dangerous mode)
	Store    baton.Store
	Sessions baton.SessionService
	Images   baton.ImageProvisioner // nil: nothing is provisioned, sandbox-status is empty

	// PendingUses returns the key last-use times not yet written to the
	// store (auth batches those writes); the key list shows the later of
	// these and the store's. nil: the store's alone.
	PendingUses func() map[string]time.Time

	Registry       *baton.Registry // nil: empty registries
	RedactedConfig any             // JSON-marshalable; served verbatim at GET /admin/v1/config

	// Executors serves the environment, machine and credential routes
	// (nil leaves them unrouted). Revoker, when set, is told of every
	// credential revoked here, directly or by deleting its owner.
	Executors baton.ExecutorStore
	Revoker   baton.ExecutorRevoker

	// Nodes lists the cluster's nodes at GET /admin/v1/nodes; nil (on
	// SQLite) answers that this Baton is a single node.
	Nodes baton.NodeRegistry
	// Leases, set with Nodes, names each open session's owner node in
	// the session list (owner_node_id).
	Leases baton.LeaseStore
}

// Server is the admin-port HTTP server. URL, Shutdown and Close come from
// the embedded httpx.Server; Open checks the address first.
type Server struct {
	*httpx.Server
	opts    Options
	log     *slog.Logger
	handler http.Handler
}

// New returns a server for opts; it does not bind until Open.
func New(opts Options) *Server {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.Registry == nil {
		opts.Registry = &baton.Registry{}
	}
	s := &Server{opts: opts, log: log}
	mux := http.NewServeMux()
	s.routes(mux)
	s.handler = httpx.AccessLog(log, s.authenticated(httpx.Routes(mux)))
	s.Server = httpx.NewServer(opts.Addr, s.handler, log)
	return s
}

// Handler returns the server's complete handler (access log included).
func (s *Server) Handler() http.Handler { return s.handler }

// Open checks that the address is loopback, then binds it.
func (s *Server) Open(ctx context.Context) error {
	if err := CheckAddr(s.opts.Addr); err != nil {
		return err
	}
	return s.Server.Open(ctx)
}

// CheckAddr reports whether addr is an admin listen address: an IP literal
// (not a host name) that is loopback (127.0.0.0/8 or ::1), and a port.
func CheckAddr(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("admin address %q: %w", addr, err)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return fmt.Errorf("admin address %q: invalid port %q", addr, port)
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("admin address %q: the host must be an IP address", addr)
	}
	if ip.Is4In6() || !ip.IsLoopback() { // as BAE, ::ffff:127.0.0.1 is not loopback
		return fmt.Errorf("admin address %s is not a loopback address; the admin port only listens on 127.0.0.0/8 or ::1", addr)
	}
	return nil
}

// routes registers every admin route.
func (s *Server) routes(mux *http.ServeMux) {
	s.handle(mux, "POST /admin/v1/profiles", s.createProfile)
	s.handle(mux, "GET /admin/v1/profiles", s.listProfiles)
	s.handle(mux, "GET /admin/v1/profiles/{id}", s.getProfile)
	s.handle(mux, "PUT /admin/v1/profiles/{id}", s.replaceProfile)
	s.handle(mux, "DELETE /admin/v1/profiles/{id}", s.deleteProfile)

	s.handle(mux, "POST /admin/v1/keys", s.createKey)
	s.handle(mux, "GET /admin/v1/keys", s.listKeys)
	s.handle(mux, "DELETE /admin/v1/keys/{id}", s.deleteKey)

	s.handle(mux, "GET /admin/v1/sessions", s.listSessions)
	s.handle(mux, "GET /admin/v1/sessions/{id}/events", s.sessionEvents)

	s.handle(mux, "GET /admin/v1/mcp-servers", s.mcpServers)
	s.handle(mux, "GET /admin/v1/providers", s.providers)
	s.handle(mux, "GET /admin/v1/config", s.config)
	s.handle(mux, "GET /admin/v1/sandbox-status", s.sandboxStatus)
	s.handle(mux, "GET /admin/v1/nodes", s.listNodes)

	s.executorRoutes(mux)
}

// handle registers h under pattern with the shared error rendering.
func (s *Server) handle(mux *http.ServeMux, pattern string, h httpx.HandlerFunc) {
	mux.Handle(pattern, httpx.Handle(s.log, h))
}

// authenticated checks the admin bearer token before next runs (BAE's admin API)
// for every request, as BAE's router-wide layer does: without a valid
// token an unknown path or a wrong method is 401 too, not 404 or 405. A bad
// header or an unknown token is 401; a lookup failure is 500 "admin
// authentication failed".
func (s *Server) authenticated(next http.Handler) http.Handler {
	if s.opts.Auth == nil {
		return next
	}
	return httpx.Handle(s.log, func(w http.ResponseWriter, r *http.Request) error {
		token, err := httpx.Bearer(r)
		if err != nil {
			return err
		}
		if err := s.opts.Auth.AdminKey(r.Context(), token); err != nil {
			if baton.ErrorCode(err) == baton.ECodeUnauthorized {
				return baton.Errorf(baton.ECodeUnauthorized, "invalid admin key")
			}
			httpx.WriteInternal(w, r, s.log, err, "admin authentication failed")
			return nil
		}
		next.ServeHTTP(w, r)
		return nil
	})
}

// readBody reads a JSON request body and decodes it as an object.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (httpx.Object, error) {
	body, err := httpx.ReadJSON(w, r, s.opts.MaxBodyBytes)
	if err != nil {
		return httpx.Object{}, err
	}
	return httpx.DecodeObject(body)
}

// optTime renders an optional timestamp; nil stays null.
func optTime(t *time.Time) *string {
	if t == nil {
		return nil
	}
	s := baton.FormatTime(*t)
	return &s
}
