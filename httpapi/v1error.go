package httpapi

import (
	"net/http"

	"github.com/baton-engine/baton/internal/httpx"
)

// handleV1 registers h under pattern with /v1 error rendering.
func (s *Server) handleV1(mux *http.ServeMux, pattern string, h httpx.HandlerFunc) {
	mux.Handle(pattern, httpx.HandleV1(s.log, h))
}
