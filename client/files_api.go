package client

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Session files and artifacts (GET/PUT/DELETE
// /api/v1/sessions/{id}/files/{path}, GET /api/v1/sessions/{id}/artifacts/{id}).
// Paths are relative to the session's file area, "/"-separated; a leading
// "/" is ignored. The server refuses "..", NUL and control characters,
// and caps the size of a file and of all of a session's files (413).

// FileInfo is the record of a stored file.
type FileInfo struct {
	Path      string    `json:"path"`
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
	UpdatedAt time.Time `json:"updated_at"`
}

// FileEntry is one item of a directory listing: a file (with its record)
// or a directory.
type FileEntry struct {
	Name      string    `json:"name"` // relative to the listed directory
	Path      string    `json:"path"` // relative to the file area
	Type      string    `json:"type"` // "file" or "directory"
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
	UpdatedAt time.Time `json:"updated_at"`
}

// IsDir reports whether the entry is a directory.
func (e FileEntry) IsDir() bool { return e.Type == "directory" }

// Artifact is a downloaded artifact.
type Artifact struct {
	ID        string
	Name      string
	MediaType string
	SHA256    string
	Content   []byte
}

// filePath is the URL path of a file (or, with a trailing slash, a
// directory) of the session, each segment escaped.
func (s *Session) filePath(p string) string {
	p = strings.TrimLeft(p, "/")
	segs := strings.Split(p, "/")
	for i, seg := range segs {
		segs[i] = url.PathEscape(seg)
	}
	return s.path("/files/" + strings.Join(segs, "/"))
}

// raw performs one request with a raw body and returns the response when
// its status is 2xx; a failure is an *APIError or a transport error.
func (s *Session) raw(ctx context.Context, method, path string, body io.Reader, header http.Header) (*http.Response, error) {
	c := s.h.c
	op := method + " " + path
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, &TransportError{Op: op, Err: err}
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Authorization", "Bearer "+s.Key)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, c.fail(ctx, op, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		defer resp.Body.Close()
		b, err := c.readBody(resp.Body)
		if err != nil {
			return nil, c.fail(ctx, op, err)
		}
		return nil, apiError(resp.StatusCode, b)
	}
	return resp, nil
}

// OpenFile streams a file's content; the caller closes it. The record
// comes from the response headers.
func (s *Session) OpenFile(ctx context.Context, path string) (io.ReadCloser, *FileInfo, error) {
	p := s.filePath(path)
	resp, err := s.raw(ctx, http.MethodGet, p, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	if resp.Header.Get("File-Type") != "file" {
		resp.Body.Close()
		return nil, nil, &APIError{Status: http.StatusNotFound, Type: "not_found", Detail: strings.TrimLeft(path, "/") + " is a directory"}
	}
	info := &FileInfo{Path: strings.TrimLeft(path, "/"), Size: resp.ContentLength, SHA256: resp.Header.Get("File-SHA256")}
	info.UpdatedAt, _ = time.Parse("2006-01-02T15:04:05.000Z", resp.Header.Get("File-Updated-At"))
	return resp.Body, info, nil
}

// ReadFile returns a file's content. A directory is a not_found
// *APIError, like a missing file.
func (s *Session) ReadFile(ctx context.Context, path string) ([]byte, error) {
	body, _, err := s.OpenFile(ctx, path)
	if err != nil {
		return nil, err
	}
	defer body.Close()
	b, err := io.ReadAll(body)
	if err != nil {
		return nil, s.h.c.fail(ctx, "GET "+s.filePath(path), err)
	}
	return b, nil
}

// WriteFile stores data at path, replacing any file there, and returns
// the stored record.
func (s *Session) WriteFile(ctx context.Context, path string, data []byte) (*FileInfo, error) {
	p := s.filePath(path)
	resp, err := s.raw(ctx, http.MethodPut, p, bytes.NewReader(data), http.Header{"Content-Type": {"application/octet-stream"}})
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var info FileInfo
	if err := s.decode(resp, "PUT "+p, &info); err != nil {
		return nil, err
	}
	return &info, nil
}

// DeleteFile removes a file.
func (s *Session) DeleteFile(ctx context.Context, path string) error {
	resp, err := s.raw(ctx, http.MethodDelete, s.filePath(path), nil, nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// ListFiles lists the directory dir ("" for the root): its files and
// subdirectories, or with recursive every file below it. A directory
// holding no file does not exist (not_found), except the root.
func (s *Session) ListFiles(ctx context.Context, dir string, recursive bool) ([]FileEntry, error) {
	p := s.filePath(strings.TrimRight(dir, "/") + "/")
	if recursive {
		p += "?recursive=true"
	}
	resp, err := s.raw(ctx, http.MethodGet, p, nil, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var l struct {
		Entries []FileEntry `json:"entries"`
	}
	if err := s.decode(resp, "GET "+p, &l); err != nil {
		return nil, err
	}
	if l.Entries == nil {
		l.Entries = []FileEntry{}
	}
	return l.Entries, nil
}

// Artifact downloads an artifact the session may read: one of its own,
// or one an executor of an environment its profile uses uploaded (the id
// comes from an artifact content block).
func (s *Session) Artifact(ctx context.Context, id string) (*Artifact, error) {
	p := s.path("/artifacts/" + url.PathEscape(id))
	resp, err := s.raw(ctx, http.MethodGet, p, nil, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, s.h.c.fail(ctx, "GET "+p, err)
	}
	a := &Artifact{ID: id, Name: resp.Header.Get("Artifact-Name"), MediaType: resp.Header.Get("Content-Type"),
		SHA256: strings.Trim(resp.Header.Get("ETag"), `"`), Content: b}
	if a.Name == "" {
		if _, params, err := mime.ParseMediaType(resp.Header.Get("Content-Disposition")); err == nil {
			a.Name = params["filename"]
		}
	}
	return a, nil
}

// decode reads a JSON answer into out.
func (s *Session) decode(resp *http.Response, op string, out any) error {
	b, err := s.h.c.readBody(resp.Body)
	if err != nil {
		return &TransportError{Op: op, Err: err}
	}
	if err := json.Unmarshal(b, out); err != nil {
		return &TransportError{Op: op, Err: fmt.Errorf("decode answer: %w", err)}
	}
	return nil
}
