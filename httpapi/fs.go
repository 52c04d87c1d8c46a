package httpapi

import (
	"net/http"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/filearea"
	"github.com/baton-engine/baton/internal/httpx"
)

// fsRoutes registers the executor file service: the service_url of an
// fs.mount view is <origin>/v1/fs/{session_id}/{view}, and a view token
// authorizes GET (read or list), HEAD (stat), PUT (write) and DELETE
// below it. Errors use the /v1 envelope. Without view tokens there is no
// service.
func (s *Server) fsRoutes(mux *http.ServeMux) {
	if s.opts.ViewTokens == nil {
		return
	}
	for _, p := range []string{"/v1/fs/{session_id}/{view}", "/v1/fs/{session_id}/{view}/{path...}"} {
		s.handleV1(mux, "GET "+p, s.fsGet)
		s.handleV1(mux, "HEAD "+p, s.fsGet)
		s.handleV1(mux, "PUT "+p, s.fsPut)
		s.handleV1(mux, "DELETE "+p, s.fsDelete)
	}
}

// fsView authenticates a file service request with its view token and
// returns the grant and the cleaned path below the view. write says
// whether the request changes files (refused on a read-only view).
func (s *Server) fsView(r *http.Request, write bool) (g *filearea.ViewGrant, path string, dir bool, err error) {
	token, err := httpx.Bearer(r)
	if err != nil {
		return nil, "", false, err
	}
	g, err = s.opts.ViewTokens.Verify(token)
	if err != nil {
		return nil, "", false, err
	}
	switch {
	case g.SessionID != r.PathValue("session_id"):
		return nil, "", false, baton.Errorf(baton.ECodeForbidden, "the view token is for another session")
	case g.View != r.PathValue("view"):
		return nil, "", false, baton.Errorf(baton.ECodeForbidden, "the view token is for another view")
	}
	if s.opts.Epochs != nil && !filearea.EpochCurrent(s.opts.Epochs, g.SessionID, g.Epoch) {
		return nil, "", false, baton.Errorf(baton.ECodeUnauthorized, "the view token is for an earlier binding of the session")
	}
	if write && g.Readonly {
		return nil, "", false, baton.Errorf(baton.ECodeForbidden, "view %s is read-only", g.View)
	}
	path, dir, err = filePath(r)
	return g, path, dir, err
}

// fsGet is GET and HEAD /v1/fs/{session_id}/{view}/{path...}.
func (s *Server) fsGet(w http.ResponseWriter, r *http.Request) error {
	g, path, dir, err := s.fsView(r, false)
	if err != nil {
		return err
	}
	return s.getAt(w, r, g.SessionID, g.Root, path, dir)
}

// fsPut is PUT /v1/fs/{session_id}/{view}/{path...}.
func (s *Server) fsPut(w http.ResponseWriter, r *http.Request) error {
	g, path, dir, err := s.fsView(r, true)
	if err != nil {
		return err
	}
	return s.putAt(w, r, g.SessionID, g.Root, path, dir, s.flushLimits())
}

// fsDelete is DELETE /v1/fs/{session_id}/{view}/{path...}.
func (s *Server) fsDelete(w http.ResponseWriter, r *http.Request) error {
	g, path, dir, err := s.fsView(r, true)
	if err != nil {
		return err
	}
	return s.deleteAt(w, r, g.SessionID, g.Root, path, dir, s.flushLimits())
}

// flushLimits are the file limits of the executor file service. Its writes
// are accepted after the session closed: the executor flushes its mount at
// unmount, which the engine sends only once the session is closed, and the
// view token already had to belong to the binding current at that time.
func (s *Server) flushLimits() filearea.Limits {
	lim := s.fileLimits
	lim.AfterClose = true
	return lim
}
