package httpx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// Timeouts of every server. There is no server-wide write or read
// timeout: /rpc streams for as long as a turn runs. Request bodies get
// their own deadline (BodyDeadline, SetBodyTimeout) and streams set one
// per write.
const (
	readHeaderTimeout = 10 * time.Second
	idleTimeout       = 120 * time.Second
)

// Server serves one handler on one TCP address. Open binds and starts
// serving; Shutdown drains; Close stops at once.
type Server struct {
	addr    string
	log     *slog.Logger
	srv     *http.Server
	handler http.Handler
	body    time.Duration // request body deadline; see BodyDeadline

	mu   sync.Mutex
	ln   net.Listener
	done chan struct{} // closed when the serve goroutine returns
}

// NewServer returns a server for handler on addr ("127.0.0.1:0" picks a
// free port; URL reports it after Open).
func NewServer(addr string, handler http.Handler, log *slog.Logger) *Server {
	log = logger(log)
	return &Server{
		addr:    addr,
		log:     log,
		handler: handler,
		srv: &http.Server{
			ReadHeaderTimeout: readHeaderTimeout,
			IdleTimeout:       idleTimeout,
			ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
		},
	}
}

// SetBodyTimeout sets how long a request has to send its whole body
// (DefaultBodyTimeout when <= 0, the default); it takes effect at Open.
func (s *Server) SetBodyTimeout(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.body = d
}

// Open binds the address and serves in a goroutine that Shutdown or Close
// stops.
func (s *Server) Open(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return errors.New("server already open")
	}
	s.srv.Handler = BodyDeadline(s.body, s.handler)
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", s.addr, err)
	}
	s.ln = ln
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("http server stopped", slog.String("addr", ln.Addr().String()), slog.String("error", err.Error()))
		}
	}()
	return nil
}

// URL returns "http://host:port" of the bound address, or "" before Open.
func (s *Server) URL() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return "http://" + s.ln.Addr().String()
}

// Shutdown stops accepting connections and waits, until ctx ends, for the
// active requests to finish.
func (s *Server) Shutdown(ctx context.Context) error {
	done := s.opened()
	if done == nil {
		return nil
	}
	err := s.srv.Shutdown(ctx)
	select {
	case <-done:
	case <-ctx.Done():
		if err == nil {
			err = ctx.Err()
		}
	}
	return err
}

// Close closes the listener and every connection at once.
func (s *Server) Close() error {
	done := s.opened()
	if done == nil {
		return nil
	}
	err := s.srv.Close()
	<-done
	return err
}

// opened returns the serve goroutine's done channel, or nil before Open.
func (s *Server) opened() chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.done
}
