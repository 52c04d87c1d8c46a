package httpapi

import (
	"net/http"

	"github.com/baton-engine/baton/internal/httpx"
	"github.com/baton-engine/baton/wire"
)

// events is GET /api/v1/sessions/{id}/events (BAE's client API): the query
// string is parsed first (framework), then the session key, then the limit.
func (s *Server) events(w http.ResponseWriter, r *http.Request) error {
	q, err := httpx.ParsePageQuery(r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	if _, err := s.sessionKey(r, id); err != nil {
		return err
	}
	page, err := q.Page()
	if err != nil {
		return err
	}
	items, next, err := s.opts.Events.Events(r.Context(), id, page)
	if err != nil {
		return err
	}
	return httpx.WriteRaw(w, http.StatusOK, wire.AppendEventPage(nil, items, next))
}
