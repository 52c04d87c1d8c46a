package client

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// fileFake is a session file area over HTTP, as the client port serves
// it, recording the escaped request paths.
type fileFake struct {
	mu    sync.Mutex
	files map[string][]byte
	paths []string
}

func (f *fileFake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.paths = append(f.paths, r.Method+" "+r.URL.EscapedPath()+"?"+r.URL.RawQuery)
	if bearer(r) != testSessionKey {
		problem(w, 401, "unauthorized", "invalid session key")
		return
	}
	const prefix = "/api/v1/sessions/" + testSessionID
	switch p := r.PathValue("path"); {
	case r.URL.Path == prefix+"/artifacts/art_1":
		w.Header().Set("Content-Type", "text/plain")
		w.Header().Set("ETag", `"abc"`)
		w.Header().Set("Content-Disposition", `attachment; filename*=utf-8''r%C3%A9sum%C3%A9.txt`)
		io.WriteString(w, "artifact body")
	case r.Method == "PUT":
		b, _ := io.ReadAll(r.Body)
		f.files[p] = b
		io.WriteString(w, `{"path":"`+p+`","size":`+itoa(len(b))+`,"sha256":"d1","updated_at":"2030-01-02T03:04:05.006Z"}`)
	case r.Method == "DELETE":
		if _, ok := f.files[p]; !ok {
			problem(w, 404, "not_found", "no file "+p)
			return
		}
		delete(f.files, p)
		w.WriteHeader(204)
	case p == "" || p[len(p)-1] == '/':
		w.Header().Set("File-Type", "directory")
		io.WriteString(w, `{"path":"","entries":[{"name":"d","path":"d","type":"directory"},{"name":"a b","path":"a b","type":"file","size":3,"sha256":"x","updated_at":"2030-01-02T03:04:05.006Z"}]}`)
	default:
		b, ok := f.files[p]
		if !ok {
			problem(w, 404, "not_found", "no file "+p)
			return
		}
		w.Header().Set("File-Type", "file")
		w.Header().Set("File-SHA256", "d1")
		w.Header().Set("File-Updated-At", "2030-01-02T03:04:05.006Z")
		w.Write(b)
	}
}

func itoa(n int) string { return string(rune('0' + n)) } // one digit is enough here

func TestSessionFiles(t *testing.T) {
	f := &fileFake{files: map[string][]byte{}}
	mux := http.NewServeMux()
	mux.Handle("/api/v1/sessions/{id}/files/{path...}", f)
	mux.Handle("/api/v1/sessions/{id}/artifacts/{aid}", f)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	s := &Session{ID: testSessionID, Key: testSessionKey, h: NewHarness(Config{BaseURL: srv.URL, ClientKey: testClientKey, HTTPClient: srv.Client()})}
	ctx := context.Background()

	info, err := s.WriteFile(ctx, "/dir/a b#?.txt", []byte("hey"))
	if err != nil {
		t.Fatal(err)
	}
	want := &FileInfo{Path: "dir/a b#?.txt", Size: 3, SHA256: "d1", UpdatedAt: time.Date(2030, 1, 2, 3, 4, 5, 6e6, time.UTC)}
	if diff := cmp.Diff(want, info); diff != "" {
		t.Errorf("WriteFile (-want +got):\n%s", diff)
	}
	got, err := s.ReadFile(ctx, "dir/a b#?.txt")
	if err != nil || string(got) != "hey" {
		t.Errorf("ReadFile = %q, %v", got, err)
	}
	body, oinfo, err := s.OpenFile(ctx, "dir/a b#?.txt")
	if err != nil {
		t.Fatal(err)
	}
	body.Close()
	if diff := cmp.Diff(want, oinfo); diff != "" {
		t.Errorf("OpenFile record (-want +got):\n%s", diff)
	}
	entries, err := s.ListFiles(ctx, "", true)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 || !entries[0].IsDir() || entries[1].IsDir() || entries[1].Size != 3 || entries[1].Name != "a b" {
		t.Errorf("ListFiles = %+v", entries)
	}
	if _, err := s.ReadFile(ctx, "sub/"); err == nil {
		t.Error("ReadFile of a directory succeeded")
	}
	if err := s.DeleteFile(ctx, "dir/a b#?.txt"); err != nil {
		t.Fatal(err)
	}
	var apiErr *APIError
	if err := s.DeleteFile(ctx, "dir/a b#?.txt"); !errors.As(err, &apiErr) || apiErr.Status != 404 || apiErr.Type != "not_found" {
		t.Errorf("second delete: %v", err)
	}
	a, err := s.Artifact(ctx, "art_1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(&Artifact{ID: "art_1", Name: "résumé.txt", MediaType: "text/plain", SHA256: "abc", Content: []byte("artifact body")}, a); diff != "" {
		t.Errorf("Artifact (-want +got):\n%s", diff)
	}
	bad := &Session{ID: testSessionID, Key: "bae_ses_wrong", h: s.h}
	if _, err := bad.ReadFile(ctx, "x"); !errors.As(err, &apiErr) || apiErr.Status != 401 {
		t.Errorf("wrong key: %v", err)
	}

	// Every segment is escaped on its own; "/" separates them.
	seg := "/api/v1/sessions/" + testSessionID + "/files/dir/a%20b%23%3F.txt?"
	for i, w := range []string{"PUT " + seg, "GET " + seg, "GET " + seg} {
		if f.paths[i] != w {
			t.Errorf("request %d: %s, want %s", i, f.paths[i], w)
		}
	}
	if w := "GET /api/v1/sessions/" + testSessionID + "/files/?recursive=true"; f.paths[3] != w {
		t.Errorf("list request %s, want %s", f.paths[3], w)
	}
}
