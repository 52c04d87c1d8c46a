package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/httpx"
)

// V1Store is what the /v1 routes read besides the ClientService: key
// digests (to tell another session's key from an unknown one) and
// sessions (profile checks of workspace credentials).
type V1Store interface {
	KeyByHash(ctx context.Context, role baton.KeyRole, hash string) (*baton.Key, error)
	Session(ctx context.Context, id string) (*baton.Session, error)
}

// v1Routes registers the registered-client routes (docs/api.md, registered session clients).
func (s *Server) v1Routes(mux *http.ServeMux) {
	if s.opts.Clients == nil || s.opts.V1Store == nil {
		return
	}
	const base = "/v1/sessions/{session_id}/clients"
	s.handleV1(mux, "POST "+base, s.registerClient)
	s.handleV1(mux, "GET "+base, s.listClients)
	s.handleV1(mux, "POST "+base+"/{client_id}/ping", s.pingClient)
	s.handleV1(mux, "PUT "+base+"/{client_id}/tools", s.replaceClientTools)
	s.handleV1(mux, "DELETE "+base+"/{client_id}", s.deleteClient)
	s.handleV1(mux, "GET "+base+"/{client_id}/calls", s.clientCalls)
	s.handleV1(mux, "POST "+base+"/{client_id}/calls/{call_id}/result", s.clientResult)
}

// ParseSessionID accepts a session id in UUID form (8-4-4-4-12 of its 32
// hex digits) or in ses_ form and returns the ses_ form.
func ParseSessionID(s string) (string, error) {
	id, ok := baton.ParseSessionID(s)
	if !ok {
		return "", badRequest("session_id must be a UUID or a ses_ id")
	}
	return id, nil
}

// SessionUUID is the UUID form of a ses_ id (baton.SessionUUID).
func SessionUUID(id string) string { return baton.SessionUUID(id) }

// v1Caller authenticates a /v1 request for the session in the path and
// returns the session id and the client key id acting.
func (s *Server) v1Caller(r *http.Request) (sessionID, actor string, err error) {
	sessionID, err = ParseSessionID(r.PathValue("session_id"))
	if err != nil {
		return "", "", err
	}
	token, err := httpx.Bearer(r)
	if err != nil {
		return "", "", err
	}
	ctx := r.Context()
	notFound := baton.Errorf(baton.ECodeNotFound, "no session %s", r.PathValue("session_id"))
	if strings.HasPrefix(token, baton.SessionKeyPrefix) {
		key, err := s.opts.Auth.SessionKey(ctx, sessionID, token)
		if err == nil {
			return sessionID, key.ClientID, nil
		}
		if baton.ErrorCode(err) != baton.ECodeUnauthorized {
			return "", "", err
		}
		if _, err := s.opts.V1Store.KeyByHash(ctx, baton.RoleSession, baton.Digest(token)); err == nil {
			return "", "", notFound // a valid key of another session
		}
		return "", "", baton.Errorf(baton.ECodeUnauthorized, "invalid credential")
	}
	key, err := s.opts.Auth.ClientKey(ctx, token)
	if baton.ErrorCode(err) == baton.ECodeUnauthorized {
		return "", "", baton.Errorf(baton.ECodeUnauthorized, "invalid credential")
	}
	if err != nil {
		return "", "", err
	}
	sess, err := s.opts.V1Store.Session(ctx, sessionID)
	if baton.ErrorCode(err) == baton.ECodeNotFound {
		return "", "", notFound
	}
	if err != nil {
		return "", "", err
	}
	if sess.ProfileID != key.ProfileID {
		return "", "", notFound
	}
	if !key.HasScope(baton.ScopeSessionManage) {
		return "", "", baton.Errorf(baton.ECodeForbidden, "the credential lacks the %s scope", baton.ScopeSessionManage)
	}
	return sessionID, key.ID, nil
}

// readV1 reads a JSON body; framework rejections become invalid_request.
func (s *Server) readV1(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := httpx.ReadJSON(w, r, s.opts.MaxBodyBytes)
	var rej *httpx.Rejection
	if errors.As(err, &rej) {
		return nil, badRequest("%s", rej.Text)
	}
	return body, err
}

func expiresAt(t *time.Time) any {
	if t == nil {
		return nil
	}
	return baton.FormatTime(*t)
}

func (s *Server) registerClient(w http.ResponseWriter, r *http.Request) error {
	sid, actor, err := s.v1Caller(r)
	if err != nil {
		return err
	}
	body, err := s.readV1(w, r)
	if err != nil {
		return err
	}
	reg, err := DecodeRegistration(body)
	if err != nil {
		return err
	}
	c, err := s.opts.Clients.RegisterClient(r.Context(), sid, actor, reg)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusCreated, map[string]any{"id": c.ID, "name": c.Name, "expires_at": expiresAt(c.ExpiresAt)})
}

// toolView is a registered tool on the wire.
type toolView struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
}

func toolViews(tools []baton.ClientTool) []toolView {
	out := make([]toolView, len(tools))
	for i, t := range tools {
		out[i] = toolView(t)
	}
	return out
}

func (s *Server) listClients(w http.ResponseWriter, r *http.Request) error {
	sid, _, err := s.v1Caller(r)
	if err != nil {
		return err
	}
	cs, err := s.opts.Clients.Clients(r.Context(), sid)
	if err != nil {
		return err
	}
	items := make([]map[string]any, len(cs))
	for i, c := range cs {
		items[i] = map[string]any{
			"id": c.ID, "name": c.Name, "tools": toolViews(c.Tools), "expires_at": expiresAt(c.ExpiresAt),
			"created_at": baton.FormatTime(c.CreatedAt), "last_ping_at": baton.FormatTime(c.LastPingAt),
		}
	}
	return httpx.WriteJSON(w, http.StatusOK, map[string]any{"items": items})
}

func (s *Server) pingClient(w http.ResponseWriter, r *http.Request) error {
	sid, _, err := s.v1Caller(r)
	if err != nil {
		return err
	}
	c, err := s.opts.Clients.PingClient(r.Context(), sid, r.PathValue("client_id"))
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, map[string]any{"expires_at": expiresAt(c.ExpiresAt)})
}

func (s *Server) replaceClientTools(w http.ResponseWriter, r *http.Request) error {
	sid, actor, err := s.v1Caller(r)
	if err != nil {
		return err
	}
	body, err := s.readV1(w, r)
	if err != nil {
		return err
	}
	tools, err := DecodeToolsBody(body)
	if err != nil {
		return err
	}
	if err := s.opts.Clients.ReplaceClientTools(r.Context(), sid, r.PathValue("client_id"), actor, tools); err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, map[string]any{"tools": toolViews(tools)})
}

func (s *Server) deleteClient(w http.ResponseWriter, r *http.Request) error {
	sid, actor, err := s.v1Caller(r)
	if err != nil {
		return err
	}
	if err := s.opts.Clients.DeleteClient(r.Context(), sid, r.PathValue("client_id"), actor); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// clientCalls streams the client's calls as NDJSON until the client is
// gone or the caller leaves.
func (s *Server) clientCalls(w http.ResponseWriter, r *http.Request) error {
	sid, _, err := s.v1Caller(r)
	if err != nil {
		return err
	}
	feed, err := s.opts.Clients.ClientCalls(r.Context(), sid, r.PathValue("client_id"))
	if err != nil {
		return err
	}
	defer feed.Close()
	out := newStream(w, &s.bufs, s.opts.WriteTimeout) // the NDJSON writer of /rpc
	defer out.release()
	out.start()
	for {
		c, err := feed.Next(r.Context())
		if err != nil || c == nil {
			return nil // headers are out: the stream just ends
		}
		out.addFrame(baton.MarshalJSON(c))
		if !out.flush() {
			return nil
		}
	}
}

func (s *Server) clientResult(w http.ResponseWriter, r *http.Request) error {
	sid, _, err := s.v1Caller(r)
	if err != nil {
		return err
	}
	body, err := s.readV1(w, r)
	if err != nil {
		return err
	}
	res, err := DecodeResult(body)
	if err != nil {
		return err
	}
	ok, err := s.opts.Clients.ClientResult(r.Context(), sid, r.PathValue("client_id"), r.PathValue("call_id"), res)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, map[string]any{"accepted": ok})
}

// DecodeResult decodes {"content": string | blocks, "is_error": bool}.
func DecodeResult(body []byte) (baton.ClientResult, error) {
	m, err := object(body, "the request body")
	if err != nil {
		return baton.ClientResult{}, err
	}
	content, ok := present(m, "content")
	if !ok {
		return baton.ClientResult{}, badRequest(`missing field "content"`)
	}
	var s string
	var blocks []map[string]json.RawMessage
	if json.Unmarshal(content, &s) != nil && (json.Unmarshal(content, &blocks) != nil || blocks == nil) {
		return baton.ClientResult{}, badRequest(`"content" must be a string or an array of content blocks`)
	}
	res := baton.ClientResult{Content: content}
	if v, ok := present(m, "is_error"); ok {
		if err := json.Unmarshal(v, &res.IsError); err != nil {
			return baton.ClientResult{}, badRequest(`"is_error" must be a boolean`)
		}
	}
	return res, nil
}
