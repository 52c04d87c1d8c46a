package adminapi

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
	"github.com/baton-engine/baton/internal/rawjson"
)

// profileView is BAE's ProfileView plus Baton's extensions: system_prompt
// (null when the profile has none), max_iterations (the effective cap,
// baton.DefaultMaxIterations when the profile sets none),
// executor_environments and brain ({"type":"server"} by default).
type profileView struct {
	ID                   string            `json:"id"`
	Name                 string            `json:"name"`
	PrimaryProvider      string            `json:"primary_provider"`
	FallbackProviders    []string          `json:"fallback_providers"`
	MCPServers           []string          `json:"mcp_servers"`
	AllowedTools         []json.RawMessage `json:"allowed_tools"`
	AvailableSandboxes   []string          `json:"available_sandboxes"`
	SystemPrompt         *string           `json:"system_prompt"`
	MaxIterations        int               `json:"max_iterations"`
	ExecutorEnvironments []string          `json:"executor_environments"`
	Brain                baton.Brain       `json:"brain"`
	CreatedAt            string            `json:"created_at"`
	UpdatedAt            string            `json:"updated_at"`
}

func newProfileView(p *baton.Profile) profileView {
	v := profileView{
		ID:                   p.ID,
		Name:                 p.Name,
		PrimaryProvider:      p.PrimaryProvider,
		FallbackProviders:    orEmpty(p.FallbackProviders),
		MCPServers:           orEmpty(p.MCPServers),
		AllowedTools:         orEmpty(p.AllowedTools),
		AvailableSandboxes:   orEmpty(p.AvailableSandboxes),
		MaxIterations:        p.Iterations(),
		ExecutorEnvironments: orEmpty(p.ExecutorEnvironments),
		Brain:                p.Brain,
		CreatedAt:            baton.FormatTime(p.CreatedAt),
		UpdatedAt:            baton.FormatTime(p.UpdatedAt),
	}
	if p.SystemPrompt != "" {
		sp := p.SystemPrompt
		v.SystemPrompt = &sp
	}
	if v.Brain.Type == "" {
		v.Brain.Type = baton.BrainServer
	}
	return v
}

// profileCreated is the body of a successful POST /admin/v1/profiles.
type profileCreated struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	CreatedAt string `json:"created_at"`
}

// createProfile is POST /admin/v1/profiles.
func (s *Server) createProfile(w http.ResponseWriter, r *http.Request) error {
	obj, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	p, err := decodeProfile(obj)
	if err != nil {
		return err
	}
	p.ID = baton.NewID(baton.PrefixProfile)
	p.CreatedAt = baton.Now()
	p.UpdatedAt = p.CreatedAt
	if err := s.opts.Store.CreateProfile(r.Context(), p); err != nil {
		return profileError(err, p.ID)
	}
	s.provision(r.Context(), p)
	return httpx.WriteJSON(w, http.StatusCreated, profileCreated{ID: p.ID, Name: p.Name, CreatedAt: baton.FormatTime(p.CreatedAt)})
}

// listProfiles is GET /admin/v1/profiles.
func (s *Server) listProfiles(w http.ResponseWriter, r *http.Request) error {
	page, err := parsePage(r)
	if err != nil {
		return err
	}
	items, next, err := s.opts.Store.ListProfiles(r.Context(), page)
	if err != nil {
		return err
	}
	views := make([]profileView, len(items))
	for i, p := range items {
		views[i] = newProfileView(p)
	}
	return httpx.WriteJSON(w, http.StatusOK, httpx.NewPage(views, next))
}

// getProfile is GET /admin/v1/profiles/{id}.
func (s *Server) getProfile(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	p, err := s.opts.Store.Profile(r.Context(), id)
	if err != nil {
		return profileError(err, id)
	}
	return httpx.WriteJSON(w, http.StatusOK, newProfileView(p))
}

// replaceProfile is PUT /admin/v1/profiles/{id}: a full replacement whose
// body is validated before the profile's existence is checked.
func (s *Server) replaceProfile(w http.ResponseWriter, r *http.Request) error {
	obj, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	p, err := decodeProfile(obj)
	if err != nil {
		return err
	}
	id := r.PathValue("id")
	p.ID = id
	p.UpdatedAt = baton.Now()
	ctx := r.Context()
	if err := s.opts.Store.ReplaceProfile(ctx, p); err != nil {
		return profileError(err, id)
	}
	if p, err = s.opts.Store.Profile(ctx, id); err != nil {
		return profileError(err, id)
	}
	s.provision(ctx, p)
	return httpx.WriteJSON(w, http.StatusOK, newProfileView(p))
}

// deleteProfile is DELETE /admin/v1/profiles/{id}; a profile with active
// client keys is 409 profile_in_use from the store.
func (s *Server) deleteProfile(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.opts.Store.DeleteProfile(r.Context(), id); err != nil {
		return profileError(err, id)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// provision starts making p's sandbox images ready. The provisioner's work
// outlives the request, so it gets a context the request does not cancel.
func (s *Server) provision(ctx context.Context, p *baton.Profile) {
	if s.opts.Images != nil {
		s.opts.Images.Provision(context.WithoutCancel(ctx), p)
	}
}

// profileError gives the store's profile errors BAE's details. A missing
// environment or brain machine is the store's 422 unprocessable_entity,
// naming the member.
func profileError(err error, id string) error {
	switch baton.ErrorCode(err) {
	case baton.ECodeNotFound:
		return baton.Errorf(baton.ECodeNotFound, "no profile %s", id)
	case baton.ECodeDuplicateName:
		return baton.Errorf(baton.ECodeDuplicateName, "a profile with that name already exists")
	}
	return err
}

// decodeProfile validates a POST or PUT profile body (BAE's admin API).
// name and primary_provider must be strings (else a 422 rejection); the
// other checks are 400 bad_request in this order: name, primary_provider,
// fallback_providers, mcp_servers, allowed_tools, available_sandboxes,
// system_prompt, max_iterations, executor_environments, brain. Omitted
// lists are empty and an omitted brain is the server. Whether the
// environments and the brain machine exist is checked by the store.
func decodeProfile(obj httpx.Object) (*baton.Profile, error) {
	name, err := obj.String("name")
	if err != nil {
		return nil, err
	}
	primary, err := obj.String("primary_provider")
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(name) == "" {
		return nil, badRequest("name must not be empty")
	}
	if strings.TrimSpace(primary) == "" {
		return nil, badRequest("primary_provider must not be empty")
	}
	p := &baton.Profile{Name: name, PrimaryProvider: primary}
	if p.FallbackProviders, err = nameList(obj, "fallback_providers"); err != nil {
		return nil, err
	}
	if p.MCPServers, err = nameList(obj, "mcp_servers"); err != nil {
		return nil, err
	}
	p.AllowedTools = []json.RawMessage{}
	if raw, ok := obj.Raw("allowed_tools"); ok {
		if json.Unmarshal(raw, &p.AllowedTools) != nil {
			return nil, badRequest("allowed_tools must be an array")
		}
	}
	if p.AvailableSandboxes, err = nameList(obj, "available_sandboxes"); err != nil {
		return nil, err
	}
	if raw, ok := obj.Raw("system_prompt"); ok {
		if rawjson.Kind(raw) != '"' || json.Unmarshal(raw, &p.SystemPrompt) != nil {
			return nil, badRequest("system_prompt must be a string")
		}
	}
	if raw, ok := obj.Raw("max_iterations"); ok {
		n, err := strconv.ParseInt(string(raw), 10, 32)
		if err != nil || n <= 0 {
			return nil, badRequest("max_iterations must be a positive integer")
		}
		p.MaxIterations = int(n)
	}
	if p.ExecutorEnvironments, err = environmentList(obj); err != nil {
		return nil, err
	}
	if p.Brain, err = decodeBrain(obj); err != nil {
		return nil, err
	}
	return p, nil
}

// environmentList decodes executor_environments: an optional array of
// distinct, non-blank environment ids.
func environmentList(obj httpx.Object) ([]string, error) {
	const key = "executor_environments"
	raw, ok := obj.Raw(key)
	if !ok {
		return []string{}, nil
	}
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return nil, badRequest(key + " must be an array")
	}
	out := make([]string, len(elems))
	for i, e := range elems {
		if rawjson.Kind(e) != '"' || json.Unmarshal(e, &out[i]) != nil || strings.TrimSpace(out[i]) == "" {
			return nil, baton.Errorf(baton.ECodeBadRequest, "%s[%d] must be an environment id (env_…)", key, i)
		}
		if slices.Contains(out[:i], out[i]) {
			return nil, baton.Errorf(baton.ECodeBadRequest, "%s[%d] repeats %s", key, i, out[i])
		}
	}
	return out, nil
}

// decodeBrain decodes the optional brain member: {"type":"server"} (the
// default) or {"type":"executor","machine_id":"mch_…"}.
func decodeBrain(obj httpx.Object) (baton.Brain, error) {
	server := baton.Brain{Type: baton.BrainServer}
	raw, ok := obj.Raw("brain")
	if !ok {
		return server, nil
	}
	var m map[string]json.RawMessage
	if rawjson.Kind(raw) != '{' || json.Unmarshal(raw, &m) != nil {
		return baton.Brain{}, badRequest("brain must be an object")
	}
	var typ, machine string
	if json.Unmarshal(m["type"], &typ) != nil || (typ != baton.BrainServer && typ != baton.BrainExecutor) {
		return baton.Brain{}, badRequest(`brain.type must be "server" or "executor"`)
	}
	rawMachine, hasMachine := m["machine_id"]
	hasMachine = hasMachine && rawjson.Kind(rawMachine) != 'n'
	if typ == baton.BrainServer {
		if hasMachine {
			return baton.Brain{}, badRequest(`brain.machine_id is only allowed with type "executor"`)
		}
		return server, nil
	}
	if !hasMachine || rawjson.Kind(rawMachine) != '"' || json.Unmarshal(rawMachine, &machine) != nil || strings.TrimSpace(machine) == "" {
		return baton.Brain{}, badRequest("brain.machine_id must be a machine id (mch_…)")
	}
	return baton.Brain{Type: baton.BrainExecutor, MachineID: machine}, nil
}

// nameList decodes an optional array of strings; absent or null is empty.
func nameList(obj httpx.Object, key string) ([]string, error) {
	raw, ok := obj.Raw(key)
	if !ok {
		return []string{}, nil
	}
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return nil, badRequest(key + " must be an array")
	}
	out := make([]string, len(elems))
	for i, e := range elems {
		if rawjson.Kind(e) != '"' || json.Unmarshal(e, &out[i]) != nil {
			return nil, baton.Errorf(baton.ECodeBadRequest, "%s[%d] must be a string (a bae-config.toml registry name)", key, i)
		}
	}
	return out, nil
}

func badRequest(msg string) error { return baton.Errorf(baton.ECodeBadRequest, "%s", msg) }

// orEmpty returns s, or an empty slice for nil so it marshals as [].
func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
