package adminapi

import (
	"net/http"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
)

// nodeView is a cluster node on the wire.
type nodeView struct {
	ID           string `json:"id"`
	AdvertiseURL string `json:"advertise_url"`
	Version      string `json:"version"`
	StartedAt    string `json:"started_at"`
	HeartbeatAt  string `json:"heartbeat_at"`
	// HeartbeatAgeMS is the database's view of the heartbeat's age, never
	// negative.
	HeartbeatAgeMS int64 `json:"heartbeat_age_ms"`
	Draining       bool  `json:"draining"`
	Sessions       int   `json:"sessions"`
}

// nodeList is the body of GET /admin/v1/nodes.
type nodeList struct {
	Cluster bool       `json:"cluster"`
	Nodes   []nodeView `json:"nodes"`
}

// listNodes is GET /admin/v1/nodes: the cluster's nodes, oldest first, as
// the registry lists them. Without a registry this Baton is a single node
// (SQLite): cluster false, no nodes.
func (s *Server) listNodes(w http.ResponseWriter, r *http.Request) error {
	if s.opts.Nodes == nil {
		return httpx.WriteJSON(w, http.StatusOK, nodeList{Nodes: []nodeView{}})
	}
	nodes, err := s.opts.Nodes.Nodes(r.Context())
	if err != nil {
		return err
	}
	views := make([]nodeView, len(nodes))
	for i, n := range nodes {
		views[i] = nodeView{
			ID:             n.ID,
			AdvertiseURL:   n.AdvertiseURL,
			Version:        n.Version,
			StartedAt:      baton.FormatTime(n.StartedAt),
			HeartbeatAt:    baton.FormatTime(n.HeartbeatAt),
			HeartbeatAgeMS: max(0, n.HeartbeatAge.Milliseconds()), // a heartbeat committed during the read
			Draining:       n.Draining,
			Sessions:       n.Sessions,
		}
	}
	return httpx.WriteJSON(w, http.StatusOK, nodeList{Cluster: true, Nodes: views})
}
