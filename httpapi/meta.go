package httpapi

import (
	"net/http"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
)

// healthz answers 200 with an empty body.
func healthz(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) }

// metaView is the body of GET /api/v1/meta.
type metaView struct {
	Version     string   `json:"version"`
	APIVersions []string `json:"api_versions"`
}

// meta reports the server version and the client API versions.
func meta(w http.ResponseWriter, _ *http.Request) error {
	return httpx.WriteJSON(w, http.StatusOK, metaView{Version: baton.Version, APIVersions: baton.APIVersions})
}
