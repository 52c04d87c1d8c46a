package adminapi

import (
	"net/http"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
	"github.com/baton-engine/baton/wire"
)

// sessionView is BAE's admin SessionView (no tool lists).
type sessionView struct {
	ID            string             `json:"id"`
	ProfileID     string             `json:"profile_id"`
	State         baton.SessionState `json:"state"`
	ClientVersion *string            `json:"client_version"`
	CreatedAt     string             `json:"created_at"`
	ClosedAt      *string            `json:"closed_at"`
	// OwnerNodeID is the cluster node whose lease covers the session
	// (Baton, in a cluster only; absent when nobody holds one).
	OwnerNodeID string `json:"owner_node_id,omitempty"`
}

// listSessions is GET /admin/v1/sessions?state=… (BAE's admin API),
// including the error-state audit rows of failed opens. The limit is checked
// before the state filter, as in BAE (the cursor, which the store decodes,
// after it).
func (s *Server) listSessions(w http.ResponseWriter, r *http.Request) error {
	q, err := httpx.ParsePageQuery(r, "state")
	if err != nil {
		return err
	}
	page, err := q.Page()
	if err != nil {
		return err
	}
	state := baton.SessionState(q.Get("state"))
	if state != "" && !state.Valid() {
		return baton.Errorf(baton.ECodeBadRequest, "invalid state filter %q; expected one of open, closed, error", string(state))
	}
	items, next, err := s.opts.Store.ListSessions(r.Context(), state, page)
	if err != nil {
		return err
	}
	var owners map[string]string
	if s.opts.Leases != nil && len(items) > 0 {
		ids := make([]string, len(items))
		for i, ses := range items {
			ids[i] = ses.ID
		}
		if owners, err = s.opts.Leases.SessionOwners(r.Context(), ids); err != nil {
			return err
		}
	}
	views := make([]sessionView, len(items))
	for i, ses := range items {
		views[i] = sessionView{
			ID:            ses.ID,
			ProfileID:     ses.ProfileID,
			State:         ses.State,
			ClientVersion: ses.ClientVersion,
			CreatedAt:     baton.FormatTime(ses.CreatedAt),
			ClosedAt:      optTime(ses.ClosedAt),
			OwnerNodeID:   owners[ses.ID],
		}
	}
	return httpx.WriteJSON(w, http.StatusOK, httpx.NewPage(views, next))
}

// sessionEvents is GET /admin/v1/sessions/{id}/events: an unknown session
// is 404 before the limit is validated; the page is the client port's,
// byte for byte.
func (s *Server) sessionEvents(w http.ResponseWriter, r *http.Request) error {
	q, err := httpx.ParsePageQuery(r)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	ctx := r.Context()
	if _, err := s.opts.Store.Session(ctx, id); err != nil {
		if baton.ErrorCode(err) == baton.ECodeNotFound {
			return baton.Errorf(baton.ECodeNotFound, "no session %s", id)
		}
		return err
	}
	page, err := q.Page()
	if err != nil {
		return err
	}
	items, next, err := s.opts.Store.Events(ctx, id, page)
	if err != nil {
		return err
	}
	return httpx.WriteRaw(w, http.StatusOK, wire.AppendEventPage(nil, items, next))
}

// parsePage parses and validates a list request's cursor and limit.
func parsePage(r *http.Request) (baton.Page, error) {
	q, err := httpx.ParsePageQuery(r)
	if err != nil {
		return baton.Page{}, err
	}
	return q.Page()
}
