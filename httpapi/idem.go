package httpapi

import (
	"net/http"
	"strings"

	"github.com/baton-engine/baton"
)

// v1Sessions starts the /v1 paths that name a session.
const v1Sessions = "/v1/sessions/"

// idemCaller names the caller and the route of a request covered by
// Idempotency-Key (docs/api.md, registered session clients: "the authenticated caller (key id)
// plus method and route"). The caller is the id of the key the token
// authenticates — a session key of the session in the path, or a client
// key — or, for an executor token, its credential's id; other tokens (view
// tokens) name themselves. The route is the path with a /v1 session id in
// its ses_ form, so the UUID and ses_ spellings of one session are one
// operation. A token that authenticates nothing is ECodeUnauthorized: the
// request passes on to its handler, which refuses it.
func (s *Server) idemCaller(r *http.Request, token string) (caller, route string, err error) {
	route = r.URL.Path
	sessionID := ""
	if rest, ok := strings.CutPrefix(route, v1Sessions); ok {
		raw, tail, more := strings.Cut(rest, "/")
		if id, err := ParseSessionID(raw); err == nil {
			sessionID, route = id, v1Sessions+id
			if more {
				route += "/" + tail
			}
		}
	}
	if s.opts.Auth == nil {
		return "", route, nil
	}
	ctx := r.Context()
	switch {
	case strings.HasPrefix(token, baton.SessionKeyPrefix):
		if sessionID == "" {
			return "", "", baton.Errorf(baton.ECodeUnauthorized, "a session key acts only on its session")
		}
		k, err := s.opts.Auth.SessionKey(ctx, sessionID, token)
		if err != nil {
			return "", "", err
		}
		return "key:" + k.ID, route, nil
	case strings.HasPrefix(token, baton.ExecutorTokenPrefix):
		if s.opts.ExecutorTokens == nil {
			return "", route, nil
		}
		g, err := s.opts.ExecutorTokens.Verify(ctx, token)
		if err != nil {
			return "", "", err
		}
		return "executor credential:" + g.CredentialID, route, nil
	case strings.HasPrefix(token, baton.ClientKeyPrefix):
		k, err := s.opts.Auth.ClientKey(ctx, token)
		if err != nil {
			return "", "", err
		}
		return "key:" + k.ID, route, nil
	}
	return "", route, nil
}
