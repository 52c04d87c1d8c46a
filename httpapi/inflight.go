package httpapi

import (
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
)

// DefaultMaxInflight is the default budget of request bytes the client
// port handles at once (BATON_MAX_INFLIGHT_BYTES): 256 MiB.
const DefaultMaxInflight = 256 << 20

// InflightSetting names the budget in its refusals.
const InflightSetting = "BATON_MAX_INFLIGHT_BYTES"

// inflight is the server-wide budget of request bytes being handled. A
// request is charged its body's size while it is handled, and a
// sendMessage until its turn ends (the turn holds the message, several
// times over: its events repeat it). One that does not fit is refused at
// once, never queued: a burst of large messages cannot take the process's
// memory with it.
type inflight struct {
	max  int64
	used atomic.Int64
}

// take charges n bytes and reports whether they fit; give hands them
// back. A request larger than the whole budget is let through when
// nothing else is in flight, so a budget below a route's size limit
// cannot make that route unusable.
func (b *inflight) take(n int64) bool {
	for {
		used := b.used.Load()
		if n > 0 && used > 0 && used+n > b.max {
			return false
		}
		if n <= 0 || b.used.CompareAndSwap(used, used+n) {
			return true
		}
	}
}

func (b *inflight) give(n int64) {
	if n > 0 {
		b.used.Add(-n)
	}
}

// refusal is the error of a request the budget cannot take.
func (b *inflight) refusal() error {
	return baton.Errorf(baton.ECodeTooManyRequests,
		"the server is handling %d bytes of requests, its %s budget (%d); retry later", b.used.Load(), InflightSetting, b.max)
}

// charge is what a request counts against the budget: its declared
// length, or, for a body of unknown length, the most its route accepts.
func (s *Server) charge(r *http.Request) int64 {
	switch {
	case r.ContentLength >= 0:
		return r.ContentLength
	case r.Body == nil || r.Body == http.NoBody:
		return 0
	case strings.HasSuffix(r.URL.Path, "/rpc"):
		return s.maxRPC()
	case strings.Contains(r.URL.Path, "/files/") || strings.Contains(r.URL.Path, "/artifacts"):
		return max(s.fileLimits.MaxFileBytes, s.maxBody())
	}
	return s.maxBody()
}

// guardInflight charges every request but /rpc (which answers in its own
// shape, see rpc) against the budget, refusing with 429
// too_many_requests and Retry-After in the route's error shape.
func (s *Server) guardInflight(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, "/rpc") {
			next.ServeHTTP(w, r)
			return
		}
		n := s.charge(r)
		if !s.inflight.take(n) {
			w.Header().Set("Retry-After", "1")
			if strings.HasPrefix(r.URL.Path, "/v1/") {
				httpx.WriteV1Error(w, r, s.log, s.inflight.refusal())
			} else {
				httpx.WriteError(w, r, s.log, s.inflight.refusal())
			}
			return
		}
		defer s.inflight.give(n)
		next.ServeHTTP(w, r)
	})
}

func (s *Server) maxRPC() int64 {
	if s.opts.MaxRPCBytes > 0 {
		return s.opts.MaxRPCBytes
	}
	return DefaultMaxRPC
}

func (s *Server) maxBody() int64 {
	if s.opts.MaxBodyBytes > 0 {
		return s.opts.MaxBodyBytes
	}
	return httpx.DefaultMaxBody
}
