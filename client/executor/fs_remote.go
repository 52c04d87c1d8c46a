package executor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// remoteTimeout bounds one request to the file service.
const remoteTimeout = 2 * time.Minute

// Errors of the file service, matched with errors.Is.
var (
	errRemoteConflict = errors.New("executor: file service: conflict")
	errRemoteTooLarge = errors.New("executor: file service: too large")
	errRemoteInvalid  = errors.New("executor: file service: invalid path")
)

// remote is a client of one view of the file service
// (<origin>/v1/fs/{session_id}/{view}). Its token is swapped in place when
// fs.mount renews it, and dropped (every request then fails) at unmount;
// it lives in memory only.
type remote struct {
	base  string
	hc    *http.Client
	token atomic.Pointer[string]
}

func newRemote(base, token string, hc *http.Client) *remote {
	r := &remote{base: strings.TrimRight(base, "/"), hc: hc}
	r.setToken(token)
	return r
}

func (r *remote) setToken(t string) { r.token.Store(&t) }

// remoteEntry is one item of a listing, or a stat.
type remoteEntry struct {
	Path      string    `json:"path"`
	Name      string    `json:"name"`
	Type      string    `json:"type"` // "file" or "directory"
	Size      int64     `json:"size"`
	SHA256    string    `json:"sha256"`
	UpdatedAt time.Time `json:"updated_at"`
}

func (e *remoteEntry) isDir() bool { return e.Type == "directory" }

// safePath reports whether p, a path the service sent, stays below the
// view: relative, without empty, "." or ".." components or backslashes.
// Nothing the service sends is trusted to name a local file otherwise.
func safePath(p string) bool {
	if p == "" || strings.ContainsAny(p, "\\\x00") {
		return false
	}
	for _, name := range strings.Split(p, "/") {
		if name == "" || name == "." || name == ".." {
			return false
		}
	}
	return true
}

// url is the request URL of p (a relative path; "" or a trailing "/" for
// a directory), each segment escaped.
func (r *remote) url(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	return r.base + "/" + strings.Join(segs, "/")
}

// do sends one request to the URL u; a non-2xx answer is an error wrapping fs.ErrNotExist,
// fs.ErrPermission, errRemoteConflict, errRemoteTooLarge or errRemoteInvalid
// where one applies. The caller closes the body of a 2xx response.
func (r *remote) do(ctx context.Context, method, u string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/octet-stream")
		req.ContentLength = int64(len(body))
	}
	req.Header.Set("Authorization", "Bearer "+*r.token.Load())
	resp, err := r.hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 {
		return resp, nil
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	he := httpError("file service "+method+" "+strings.TrimPrefix(u, r.base), resp.StatusCode, b)
	var kind error
	switch resp.StatusCode {
	case http.StatusNotFound:
		kind = fs.ErrNotExist
	case http.StatusUnauthorized, http.StatusForbidden:
		kind = fs.ErrPermission
	case http.StatusConflict:
		kind = errRemoteConflict
	case http.StatusRequestEntityTooLarge:
		kind = errRemoteTooLarge
	case http.StatusBadRequest:
		kind = errRemoteInvalid
	default:
		return nil, he
	}
	return nil, fmt.Errorf("%w (%w)", kind, he)
}

// stat returns what p is: a file with its record, or a directory.
func (r *remote) stat(ctx context.Context, p string) (*remoteEntry, error) {
	resp, err := r.do(ctx, http.MethodHead, r.url(p), nil)
	if err != nil {
		return nil, err
	}
	resp.Body.Close()
	e := &remoteEntry{Path: p, Type: resp.Header.Get("File-Type")}
	if !e.isDir() {
		e.Type = "file"
		e.Size = resp.ContentLength
		e.SHA256 = resp.Header.Get("File-SHA256")
		e.UpdatedAt, _ = time.Parse("2006-01-02T15:04:05.000Z", resp.Header.Get("File-Updated-At"))
	}
	return e, nil
}

// list returns the children of directory dir ("" for the root), or every
// file below it.
func (r *remote) list(ctx context.Context, dir string, recursive bool) ([]remoteEntry, error) {
	u := r.url(dir) + "/"
	if dir == "" {
		u = r.base + "/"
	}
	if recursive {
		u += "?recursive=true"
	}
	resp, err := r.do(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var l struct {
		Entries []remoteEntry `json:"entries"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return nil, fmt.Errorf("executor: file service listing of %q: %w", dir, err)
	}
	return l.Entries, nil
}

// read returns a file's content.
func (r *remote) read(ctx context.Context, p string) ([]byte, error) {
	resp, err := r.do(ctx, http.MethodGet, r.url(p), nil)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.Header.Get("File-Type") == "directory" {
		return nil, fmt.Errorf("executor: file service: %s is a directory", p)
	}
	return io.ReadAll(resp.Body)
}

// write stores content at p.
func (r *remote) write(ctx context.Context, p string, content []byte) error {
	if content == nil {
		content = []byte{}
	}
	resp, err := r.do(ctx, http.MethodPut, r.url(p), content)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}

// remove deletes the file p.
func (r *remote) remove(ctx context.Context, p string) error {
	resp, err := r.do(ctx, http.MethodDelete, r.url(p), nil)
	if err != nil {
		return err
	}
	return resp.Body.Close()
}
