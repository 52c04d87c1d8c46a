package httpapi

import (
	"bytes"
	"mime"
	"net/http"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/filearea"
	"github.com/baton-engine/baton/internal/httpx"
)

// HeaderArtifactName names an uploaded artifact.
const HeaderArtifactName = "Artifact-Name"

// maxArtifactName bounds Artifact-Name, in bytes.
const maxArtifactName = 255

// artifactRoutes registers the artifact uploads of environment executors:
// one route per environment and BAE's legacy alias, which takes the
// environment from the token. Without executor tokens there are none.
func (s *Server) artifactRoutes(mux *http.ServeMux) {
	if s.opts.ExecutorTokens == nil {
		return
	}
	s.handleV1(mux, "POST /v1/environments/{environment_id}/artifacts", s.uploadArtifact("environment_id"))
	s.handleV1(mux, "POST /v1/executors/artifacts", s.uploadArtifact(""))
}

// uploaded is the 201 body of an upload.
type uploaded struct {
	ArtifactID string `json:"artifact_id"`
	Size       int64  `json:"size"`
	SHA256     string `json:"sha256"`
}

// uploadArtifact stores the raw request body as an artifact of the
// environment of the executor token (which must match the path value
// param, when there is one). Content-Type is its media type
// (application/octet-stream when absent) and Artifact-Name its name.
func (s *Server) uploadArtifact(param string) httpx.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		token, err := httpx.Bearer(r)
		if err != nil {
			return err
		}
		g, err := s.opts.ExecutorTokens.Verify(r.Context(), token)
		if err != nil {
			return err
		}
		if g.Scope != baton.ExecutorScopeEnvironment {
			return baton.Errorf(baton.ECodeForbidden, "artifacts are uploaded with an environment executor token")
		}
		if param != "" && r.PathValue(param) != g.EnvironmentID {
			return baton.Errorf(baton.ECodeForbidden, "the executor token is for another environment")
		}
		name, err := artifactName(r.Header.Get(HeaderArtifactName))
		if err != nil {
			return err
		}
		mediaType, err := artifactMediaType(r.Header.Get("Content-Type"))
		if err != nil {
			return err
		}
		content, err := readBlob(w, r, s.fileLimits.MaxArtifactBytes, "artifact")
		if err != nil {
			return err
		}
		a := &filearea.Artifact{EnvironmentID: g.EnvironmentID, Name: name, MediaType: mediaType}
		if err := s.opts.Files.CreateArtifact(r.Context(), a, content, s.fileLimits); err != nil {
			return err
		}
		return httpx.WriteJSON(w, http.StatusCreated, uploaded{ArtifactID: a.ID, Size: a.Size, SHA256: a.SHA256})
	}
}

// artifactName checks an Artifact-Name: 1 to 255 bytes of UTF-8 without
// control characters.
func artifactName(name string) (string, error) {
	bad := func(why string) error {
		return baton.Errorf(baton.ECodeBadRequest, "%s header %s", HeaderArtifactName, why)
	}
	switch {
	case name == "":
		return "", bad("is required")
	case len(name) > maxArtifactName:
		return "", bad("is longer than 255 bytes")
	case !utf8.ValidString(name) || strings.ContainsFunc(name, unicode.IsControl):
		return "", bad("must be UTF-8 text without control characters")
	}
	return name, nil
}

// artifactMediaType normalizes a Content-Type.
func artifactMediaType(ct string) (string, error) {
	if ct == "" {
		return "application/octet-stream", nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", baton.Errorf(baton.ECodeBadRequest, "invalid Content-Type %q", ct)
	}
	return mime.FormatMediaType(mt, params), nil
}

// downloadArtifact is GET /api/v1/sessions/{id}/artifacts/{artifact_id}:
// an artifact the session may read (see filearea.ArtifactStore), with its
// media type, name and digest.
func (s *Server) downloadArtifact(w http.ResponseWriter, r *http.Request) error {
	sid := r.PathValue("id")
	if _, err := s.sessionKey(r, sid); err != nil {
		return err
	}
	a, content, err := s.opts.Files.SessionArtifact(r.Context(), sid, r.PathValue("artifact_id"))
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("Content-Type", a.MediaType)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", `"`+a.SHA256+`"`)
	h.Set(HeaderArtifactName, a.Name)
	if cd := mime.FormatMediaType("attachment", map[string]string{"filename": a.Name}); cd != "" {
		h.Set("Content-Disposition", cd)
	}
	http.ServeContent(w, r, "", a.CreatedAt, bytes.NewReader(content))
	return nil
}
