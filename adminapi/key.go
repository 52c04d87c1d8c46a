package adminapi

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
	"github.com/baton-engine/baton/internal/rawjson"
)

// keyCreated is the body of a successful POST /admin/v1/keys; the only
// place the plaintext key is ever shown.
type keyCreated struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Key       string   `json:"key"`
	Prefix    string   `json:"prefix"`
	ProfileID string   `json:"profile_id"`
	Scopes    []string `json:"scopes"`
	CreatedAt string   `json:"created_at"`
}

// keyView is BAE's KeyView plus Baton's scopes.
type keyView struct {
	ID         string   `json:"id"`
	Name       string   `json:"name"`
	Prefix     string   `json:"prefix"`
	ProfileID  string   `json:"profile_id"`
	Scopes     []string `json:"scopes"`
	CreatedAt  string   `json:"created_at"`
	LastUsedAt *string  `json:"last_used_at"`
}

// createKey is POST /admin/v1/keys (BAE's admin API): name and profile_id
// must be strings (422 rejection); then a blank name, then bad scopes are
// 400; then a missing profile is 422 profile_unavailable.
func (s *Server) createKey(w http.ResponseWriter, r *http.Request) error {
	obj, err := s.readBody(w, r)
	if err != nil {
		return err
	}
	name, err := obj.String("name")
	if err != nil {
		return err
	}
	profileID, err := obj.String("profile_id")
	if err != nil {
		return err
	}
	if strings.TrimSpace(name) == "" {
		return badRequest("name must not be empty")
	}
	scopes, err := decodeScopes(obj)
	if err != nil {
		return err
	}
	ctx := r.Context()
	if _, err := s.opts.Store.Profile(ctx, profileID); err != nil {
		if baton.ErrorCode(err) == baton.ECodeNotFound {
			return baton.Errorf(baton.ECodeProfileUnavailable, "no active profile %s", profileID)
		}
		return err
	}
	k, plain := baton.MintKey(baton.RoleClient, name, profileID, "")
	k.Scopes = scopes
	if err := s.opts.Store.CreateKey(ctx, k); err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusCreated, keyCreated{
		ID:        k.ID,
		Name:      k.Name,
		Key:       plain,
		Prefix:    k.Prefix,
		ProfileID: k.ProfileID,
		Scopes:    k.Scopes,
		CreatedAt: baton.FormatTime(k.CreatedAt),
	})
}

// decodeScopes reads the optional scopes member: absent or null means
// baton.DefaultScopes, otherwise an array of non-blank strings.
func decodeScopes(obj httpx.Object) ([]string, error) {
	raw, ok := obj.Raw("scopes")
	if !ok {
		return slices.Clone(baton.DefaultScopes), nil
	}
	var elems []json.RawMessage
	if json.Unmarshal(raw, &elems) != nil {
		return nil, badRequest("scopes must be an array of strings")
	}
	scopes := make([]string, len(elems))
	for i, e := range elems {
		if rawjson.Kind(e) != '"' || json.Unmarshal(e, &scopes[i]) != nil || strings.TrimSpace(scopes[i]) == "" {
			return nil, badRequest("scopes must be an array of strings")
		}
	}
	return scopes, nil
}

// listKeys is GET /admin/v1/keys: active client keys only, never a hash.
// last_used_at includes the uses auth has not written to the store yet.
func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) error {
	page, err := parsePage(r)
	if err != nil {
		return err
	}
	var pending map[string]time.Time
	if s.opts.PendingUses != nil {
		pending = s.opts.PendingUses() // before the store read: a use flushed in between is in one or the other
	}
	items, next, err := s.opts.Store.ListKeys(r.Context(), baton.RoleClient, page)
	if err != nil {
		return err
	}
	views := make([]keyView, len(items))
	for i, k := range items {
		if t, ok := pending[k.ID]; ok && (k.LastUsedAt == nil || t.After(*k.LastUsedAt)) {
			k.LastUsedAt = &t
		}
		views[i] = keyView{
			ID:         k.ID,
			Name:       k.Name,
			Prefix:     k.Prefix,
			ProfileID:  k.ProfileID,
			Scopes:     orEmpty(k.Scopes),
			CreatedAt:  baton.FormatTime(k.CreatedAt),
			LastUsedAt: optTime(k.LastUsedAt),
		}
	}
	return httpx.WriteJSON(w, http.StatusOK, httpx.NewPage(views, next))
}

// deleteKey is DELETE /admin/v1/keys/{id}: revocation with the cascade of
// BAE's admin API, run by the session service.
func (s *Server) deleteKey(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if err := s.opts.Sessions.RevokeClientKey(r.Context(), id); err != nil {
		if baton.ErrorCode(err) == baton.ECodeNotFound {
			return baton.Errorf(baton.ECodeNotFound, "no active client key %s", id)
		}
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
