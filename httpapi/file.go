package httpapi

import (
	"bytes"
	"errors"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/filearea"
	"github.com/baton-engine/baton/internal/httpx"
)

// File metadata headers, on GET and HEAD of a file or directory.
const (
	HeaderFileType      = "File-Type" // "file" or "directory"
	HeaderFileSHA256    = "File-SHA256"
	HeaderFileUpdatedAt = "File-Updated-At" // baton.TimeLayout
)

// fileRoutes registers the session file routes (bma.executor.v1.1, "Files
// and artifacts"): the client's REST routes, the artifact routes, and the
// executor file service. Without a file store there are none.
func (s *Server) fileRoutes(mux *http.ServeMux) {
	if s.opts.Files == nil {
		return
	}
	s.fileLimits = s.opts.FileLimits.WithDefaults()
	for _, p := range []string{"/api/v1/sessions/{id}/files", "/api/v1/sessions/{id}/files/{path...}"} {
		s.handle(mux, "GET "+p, s.getFile)
		s.handle(mux, "PUT "+p, s.putFile)
		s.handle(mux, "DELETE "+p, s.deleteFile)
	}
	s.handle(mux, "GET /api/v1/sessions/{id}/artifacts/{artifact_id}", s.downloadArtifact)
	s.artifactRoutes(mux)
	s.fsRoutes(mux)
}

// pathGuard answers 400 for a ".." segment in a file path. The mux would
// otherwise redirect such a request to the cleaned path, out of the file
// area's URL space, before any handler saw it.
func (s *Server) pathGuard(next http.Handler) http.Handler {
	if s.opts.Files == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		segs := strings.Split(r.URL.Path, "/")
		bad := baton.Errorf(baton.ECodeBadRequest, `invalid path: contains ".."`)
		switch {
		case len(segs) > 6 && segs[1] == "api" && segs[2] == "v1" && segs[3] == "sessions" && segs[5] == "files" &&
			slices.Contains(segs[6:], ".."):
			httpx.WriteError(w, r, s.log, bad)
		case len(segs) > 5 && segs[1] == "v1" && segs[2] == "fs" && slices.Contains(segs[5:], ".."):
			httpx.WriteV1Error(w, r, s.log, bad)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// filePath returns the cleaned {path...} of r and whether it names a
// directory: the root, or a path written with a trailing slash.
func filePath(r *http.Request) (path string, dir bool, err error) {
	raw := r.PathValue("path")
	path, err = filearea.CleanDir(raw)
	return path, path == "" || strings.HasSuffix(raw, "/"), err
}

// entry is one item of a directory listing.
type entry struct {
	Name      string `json:"name"`
	Path      string `json:"path"`
	Type      string `json:"type"` // "file" or "directory"
	Size      *int64 `json:"size,omitempty"`
	SHA256    string `json:"sha256,omitempty"`
	UpdatedAt string `json:"updated_at,omitempty"`
}

// listing is the body of GET on a directory.
type listing struct {
	Path    string  `json:"path"`
	Entries []entry `json:"entries"`
}

func fileEntry(name, path string, f *filearea.File) entry {
	size := f.Size
	return entry{Name: name, Path: path, Type: "file", Size: &size, SHA256: f.SHA256, UpdatedAt: baton.FormatTime(f.UpdatedAt)}
}

// list writes the listing of the directory dir of a session's area shown
// from root (paths in it are relative to root): its children in path
// order, each subdirectory once, or with ?recursive=true every file below
// it. A directory that holds nothing does not exist (404), except the
// root.
func (s *Server) list(w http.ResponseWriter, r *http.Request, sessionID, root, dir string) error {
	full := filearea.Join(root, dir)
	files, err := s.opts.Files.ListFiles(r.Context(), sessionID, full)
	if err != nil {
		return err
	}
	if len(files) == 0 && dir != "" {
		return filearea.ErrNotFound(dir)
	}
	recursive := r.URL.Query().Get("recursive") == "true"
	out := listing{Path: dir, Entries: make([]entry, 0, len(files))}
	seen := map[string]bool{}
	for _, f := range files {
		rel, _ := filearea.Rel(full, f.Path)
		if recursive {
			out.Entries = append(out.Entries, fileEntry(rel, filearea.Join(dir, rel), f))
			continue
		}
		name, _, deeper := strings.Cut(rel, "/")
		switch {
		case !deeper:
			out.Entries = append(out.Entries, fileEntry(name, filearea.Join(dir, name), f))
		case !seen[name]:
			seen[name] = true
			out.Entries = append(out.Entries, entry{Name: name, Path: filearea.Join(dir, name), Type: "directory"})
		}
	}
	w.Header().Set(HeaderFileType, "directory")
	return httpx.WriteJSON(w, http.StatusOK, out)
}

// serveFile writes a file's content (or, for HEAD, only its headers), with
// Range and conditional requests handled by net/http.
func (s *Server) serveFile(w http.ResponseWriter, r *http.Request, sessionID, path string) error {
	if r.Method == http.MethodHead {
		f, err := s.opts.Files.StatFile(r.Context(), sessionID, path)
		if err != nil {
			return err
		}
		fileHeaders(w, f)
		w.Header().Set("Content-Length", strconv.FormatInt(f.Size, 10))
		w.WriteHeader(http.StatusOK)
		return nil
	}
	f, content, err := s.opts.Files.ReadFile(r.Context(), sessionID, path)
	if err != nil {
		return err
	}
	fileHeaders(w, f)
	http.ServeContent(w, r, "", f.UpdatedAt, bytes.NewReader(content))
	return nil
}

func fileHeaders(w http.ResponseWriter, f *filearea.File) {
	h := w.Header()
	h.Set("Content-Type", "application/octet-stream")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("ETag", `"`+f.SHA256+`"`)
	h.Set(HeaderFileType, "file")
	h.Set(HeaderFileSHA256, f.SHA256)
	h.Set(HeaderFileUpdatedAt, baton.FormatTime(f.UpdatedAt))
	h.Set("Last-Modified", f.UpdatedAt.UTC().Format(http.TimeFormat))
}

// getAt serves GET (and HEAD) of path in a session's area shown from root:
// a directory's listing, a file's content, or a path written as a file
// that turns out to be a directory's listing.
func (s *Server) getAt(w http.ResponseWriter, r *http.Request, sessionID, root, path string, dir bool) error {
	if dir {
		return s.listOrStat(w, r, sessionID, root, path)
	}
	err := s.serveFile(w, r, sessionID, filearea.Join(root, path))
	if baton.ErrorCode(err) == baton.ECodeNotFound {
		return s.listOrStat(w, r, sessionID, root, path)
	}
	return err
}

// listOrStat lists a directory, or for HEAD only says it is one.
func (s *Server) listOrStat(w http.ResponseWriter, r *http.Request, sessionID, root, dir string) error {
	if r.Method != http.MethodHead {
		return s.list(w, r, sessionID, root, dir)
	}
	if dir != "" {
		files, err := s.opts.Files.ListFiles(r.Context(), sessionID, filearea.Join(root, dir))
		if err != nil {
			return err
		}
		if len(files) == 0 {
			return filearea.ErrNotFound(dir)
		}
	}
	w.Header().Set(HeaderFileType, "directory")
	w.WriteHeader(http.StatusOK)
	return nil
}

// readBlob reads a raw request body of at most max bytes. A body known to
// be larger is refused before it is read; one that turns out larger stops
// being read at max+1 bytes.
func readBlob(w http.ResponseWriter, r *http.Request, max int64, what string) ([]byte, error) {
	tooLarge := baton.Errorf(baton.ECodePayloadTooLarge, "%s is larger than %d bytes", what, max)
	if r.ContentLength > max {
		return nil, tooLarge
	}
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, max))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, tooLarge
	case err != nil:
		return nil, httpx.BodyError(err)
	}
	return buf.Bytes(), nil
}

// fileBody is the answer to a PUT of a file.
type fileBody struct {
	Path      string `json:"path"`
	Size      int64  `json:"size"`
	SHA256    string `json:"sha256"`
	UpdatedAt string `json:"updated_at"`
}

// putAt stores the request body at path of a session's area shown from
// root, and answers with the file's record (path relative to root).
func (s *Server) putAt(w http.ResponseWriter, r *http.Request, sessionID, root, path string, dir bool, lim filearea.Limits) error {
	if dir {
		return baton.Errorf(baton.ECodeBadRequest, "invalid path: a file path is required")
	}
	content, err := readBlob(w, r, s.fileLimits.MaxFileBytes, "file")
	if err != nil {
		return err
	}
	f, err := s.opts.Files.PutFile(r.Context(), sessionID, filearea.Join(root, path), content, lim)
	if err != nil {
		return err
	}
	return httpx.WriteJSON(w, http.StatusOK, fileBody{Path: path, Size: f.Size, SHA256: f.SHA256, UpdatedAt: baton.FormatTime(f.UpdatedAt)})
}

// deleteAt removes the file at path of a session's area shown from root.
func (s *Server) deleteAt(w http.ResponseWriter, r *http.Request, sessionID, root, path string, dir bool, lim filearea.Limits) error {
	if dir {
		return baton.Errorf(baton.ECodeBadRequest, "invalid path: a file path is required")
	}
	if err := s.opts.Files.DeleteFile(r.Context(), sessionID, filearea.Join(root, path), lim); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// clientFile authenticates a client file request with the session key and
// returns the session id and the cleaned path.
func (s *Server) clientFile(r *http.Request) (sessionID, path string, dir bool, err error) {
	sessionID = r.PathValue("id")
	if _, err := s.sessionKey(r, sessionID); err != nil {
		return "", "", false, err
	}
	path, dir, err = filePath(r)
	return sessionID, path, dir, err
}

// getFile is GET /api/v1/sessions/{id}/files/{path...}: a file's content,
// or a directory's listing (?recursive=true lists every file below it).
func (s *Server) getFile(w http.ResponseWriter, r *http.Request) error {
	sid, path, dir, err := s.clientFile(r)
	if err != nil {
		return err
	}
	return s.getAt(w, r, sid, "", path, dir)
}

// putFile is PUT /api/v1/sessions/{id}/files/{path...}: the raw body
// becomes the file's content.
func (s *Server) putFile(w http.ResponseWriter, r *http.Request) error {
	sid, path, dir, err := s.clientFile(r)
	if err != nil {
		return err
	}
	return s.putAt(w, r, sid, "", path, dir, s.fileLimits)
}

// deleteFile is DELETE /api/v1/sessions/{id}/files/{path...}.
func (s *Server) deleteFile(w http.ResponseWriter, r *http.Request) error {
	sid, path, dir, err := s.clientFile(r)
	if err != nil {
		return err
	}
	return s.deleteAt(w, r, sid, "", path, dir, s.fileLimits)
}
