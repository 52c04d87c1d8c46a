package adminapi

import (
	"net/http"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
)

// items is the {"items":[…]} body of the unpaginated registry lists.
type items[T any] struct {
	Items []T `json:"items"`
}

type mcpServerView struct {
	Name      string `json:"name"`
	Transport string `json:"transport"`
}

// mcpServers is GET /admin/v1/mcp-servers: names and transports only.
func (s *Server) mcpServers(w http.ResponseWriter, _ *http.Request) error {
	out := make([]mcpServerView, len(s.opts.Registry.MCPServers))
	for i, m := range s.opts.Registry.MCPServers {
		out[i] = mcpServerView{Name: m.Name, Transport: m.Transport}
	}
	return httpx.WriteJSON(w, http.StatusOK, items[mcpServerView]{Items: out})
}

type providerView struct {
	Name     string `json:"name"`
	Provider string `json:"provider"`
	Model    string `json:"model"`
	BaseURL  string `json:"base_url"`
}

// providers is GET /admin/v1/providers: never the auth token.
func (s *Server) providers(w http.ResponseWriter, _ *http.Request) error {
	out := make([]providerView, len(s.opts.Registry.Providers))
	for i := range s.opts.Registry.Providers {
		p := &s.opts.Registry.Providers[i]
		out[i] = providerView{Name: p.Name, Provider: p.Provider, Model: p.Model, BaseURL: p.EffectiveBaseURL()}
	}
	return httpx.WriteJSON(w, http.StatusOK, items[providerView]{Items: out})
}

// config is GET /admin/v1/config: the redacted snapshot the caller built,
// verbatim ({} when there is none).
func (s *Server) config(w http.ResponseWriter, _ *http.Request) error {
	if s.opts.RedactedConfig == nil {
		return httpx.WriteJSON(w, http.StatusOK, struct{}{})
	}
	return httpx.WriteJSON(w, http.StatusOK, s.opts.RedactedConfig)
}

// sandboxStatus is GET /admin/v1/sandbox-status.
func (s *Server) sandboxStatus(w http.ResponseWriter, _ *http.Request) error {
	var status []baton.ProfileImages
	if s.opts.Images != nil {
		status = s.opts.Images.Status()
	}
	out := make([]baton.ProfileImages, len(status))
	for i, p := range status {
		out[i] = baton.ProfileImages{ProfileID: p.ProfileID, Images: orEmpty(p.Images)}
	}
	return httpx.WriteJSON(w, http.StatusOK, items[baton.ProfileImages]{Items: out})
}
