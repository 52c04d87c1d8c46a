package httpapi

import (
	"net/http"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
)

// tokenBody is the 200 body of an executor token exchange.
type tokenBody struct {
	Token     string `json:"token"`
	ExpiresAt string `json:"expires_at"`
}

// executorRoutes registers the executor token exchange (bma.executor.v1.1):
// one route per scope and BAE's legacy alias, which takes environment
// credentials only and scopes the token to the credential's environment.
// Without a token service there are none.
func (s *Server) executorRoutes(mux *http.ServeMux) {
	if s.opts.ExecutorTokens == nil {
		return
	}
	s.handleV1(mux, "POST /v1/environments/{environment_id}/token", s.exchange(baton.ExecutorScopeEnvironment, "environment_id"))
	s.handleV1(mux, "POST /v1/machines/{machine_id}/token", s.exchange(baton.ExecutorScopeMachine, "machine_id"))
	s.handleV1(mux, "POST /v1/executors/token", s.exchange(baton.ExecutorScopeEnvironment, ""))
}

// exchange trades the credential in the Authorization header for an
// executor token of scope, for the owner named by the path value param
// (none for the legacy route). The request body is not read.
func (s *Server) exchange(scope, param string) httpx.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		secret, err := httpx.Bearer(r)
		if err != nil {
			return err
		}
		var owner string
		if param != "" {
			owner = r.PathValue(param)
		}
		token, grant, err := s.opts.ExecutorTokens.Issue(r.Context(), secret, scope, owner)
		if err != nil {
			return err
		}
		w.Header().Set("Cache-Control", "no-store")
		return httpx.WriteJSON(w, http.StatusOK, tokenBody{Token: token, ExpiresAt: baton.FormatTime(grant.ExpiresAt)})
	}
}
