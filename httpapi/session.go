package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
)

// openSession is POST /api/v1/sessions (BAE's client API): body, then
// client key, then the session service's checks.
func (s *Server) openSession(w http.ResponseWriter, r *http.Request) error {
	req, err := s.readOpenRequest(w, r)
	if err != nil {
		return err
	}
	key, err := s.clientKey(r)
	if err != nil {
		return err
	}
	res, err := s.opts.Sessions.Open(r.Context(), key, req)
	if err != nil {
		return err
	}
	return writeOpenResult(w, res)
}

// joinSession is POST /api/v1/sessions/{id}/join (BAE's client API).
func (s *Server) joinSession(w http.ResponseWriter, r *http.Request) error {
	req, err := s.readOpenRequest(w, r)
	if err != nil {
		return err
	}
	key, err := s.clientKey(r)
	if err != nil {
		return err
	}
	res, err := s.opts.Sessions.Join(r.Context(), key, r.PathValue("id"), req)
	if err != nil {
		return err
	}
	return writeOpenResult(w, res)
}

// readOpenRequest reads and decodes an open or join body.
func (s *Server) readOpenRequest(w http.ResponseWriter, r *http.Request) (*baton.OpenRequest, error) {
	body, err := httpx.ReadJSON(w, r, s.opts.MaxBodyBytes)
	if err != nil {
		return nil, err
	}
	return decodeOpenRequest(body)
}

// writeOpenResult writes 201 with res; the profile's lists are arrays even
// when the service left them nil.
func writeOpenResult(w http.ResponseWriter, res *baton.OpenResult) error {
	out := *res
	if out.Profile.AllowedTools == nil {
		out.Profile.AllowedTools = []json.RawMessage{}
	}
	if out.Profile.MCPServers == nil {
		out.Profile.MCPServers = []string{}
	}
	return httpx.WriteJSON(w, http.StatusCreated, out)
}

// participantsView is the body of GET …/participants.
type participantsView struct {
	Drivers []string `json:"drivers"`
}

// participants is GET /api/v1/sessions/{id}/participants (BAE's client API).
func (s *Server) participants(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if _, err := s.sessionKey(r, id); err != nil {
		return err
	}
	drivers, err := s.opts.Sessions.Participants(r.Context(), id)
	if err != nil {
		return err
	}
	if drivers == nil {
		drivers = []string{}
	}
	return httpx.WriteJSON(w, http.StatusOK, participantsView{Drivers: drivers})
}

// closedView is the body of a successful DELETE.
type closedView struct {
	SessionID string             `json:"session_id"`
	State     baton.SessionState `json:"state"`
}

// closeSession is DELETE /api/v1/sessions/{id} (BAE's client API); a
// session that is not open is 409 session_closed from the service.
func (s *Server) closeSession(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	key, err := s.sessionKey(r, id)
	if err != nil {
		return err
	}
	if err := s.opts.Sessions.CloseSession(r.Context(), key); err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, closedView{SessionID: id, State: baton.StateClosed})
}
