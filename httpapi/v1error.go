package httpapi

import (
	"net/http"

	"github.com/baton-engine/baton/internal/httpx"
)

// handleV1 registers h under pattern with /v1 error rendering.
func (s *Server) handleV1(mux *http.ServeMux, pattern string, h httpx.HandlerFunc) {
	mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			httpx.WriteV1Error(w, r, s.log, err)
		}
	}))
}
