package executor

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/baton-engine/baton/executor/proto"
)

// fakeFiles is one view of the file service (/v1/fs/{session}/{view}),
// in memory: it serves what the file service serves — GET (read, list),
// HEAD (stat), PUT and DELETE — for the tokens it accepts, and records
// the token of every request.
type fakeFiles struct {
	t   testing.TB
	srv *httptest.Server

	mu     sync.Mutex
	files  map[string][]byte
	accept map[string]bool
	used   []string // token of each request
	writes chan string
}

func newFakeFiles(t testing.TB, files map[string]string) *fakeFiles {
	f := &fakeFiles{t: t, files: map[string][]byte{}, accept: map[string]bool{}, writes: make(chan string, 64)}
	for p, c := range files {
		f.files[p] = []byte(c)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/v1/fs/{session}/{view}/{path...}", f.serve)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	return f
}

// url is the service URL of the view.
func (f *fakeFiles) url(session string) string { return f.srv.URL + "/v1/fs/" + session + "/workspace" }

func (f *fakeFiles) allow(tokens ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, t := range tokens {
		f.accept[t] = true
	}
}

func (f *fakeFiles) tokens() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Compact(slices.Clone(f.used))
}

func (f *fakeFiles) snapshot() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for p, c := range f.files {
		out[p] = string(c)
	}
	return out
}

func (f *fakeFiles) set(p, content string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[p] = []byte(content)
}

func (f *fakeFiles) serve(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	f.mu.Lock()
	defer f.mu.Unlock()
	f.used = append(f.used, tok)
	if !f.accept[tok] {
		http.Error(w, `{"error":{"code":"unauthorized","message":"invalid view token"}}`, http.StatusUnauthorized)
		return
	}
	raw := r.PathValue("path")
	p := strings.Trim(raw, "/")
	switch r.Method {
	case "PUT":
		b, _ := io.ReadAll(r.Body)
		f.files[p] = b
		w.Write([]byte(`{}`))
		select {
		case f.writes <- p:
		default:
		}
		return
	case "DELETE":
		if _, ok := f.files[p]; !ok {
			http.Error(w, "{}", http.StatusNotFound)
			return
		}
		delete(f.files, p)
		w.WriteHeader(204)
		return
	}
	if c, ok := f.files[p]; ok && !strings.HasSuffix(raw, "/") && p != "" {
		w.Header().Set("File-Type", "file")
		w.Header().Set("File-SHA256", sha(c))
		w.Header().Set("File-Updated-At", "2030-01-02T03:04:05.000Z")
		w.Header().Set("Content-Length", itoa(len(c)))
		if r.Method == "GET" {
			w.Write(c)
		}
		return
	}
	type entry struct {
		Name   string `json:"name"`
		Path   string `json:"path"`
		Type   string `json:"type"`
		Size   int    `json:"size,omitempty"`
		SHA256 string `json:"sha256,omitempty"`
	}
	var list []entry
	seen := map[string]bool{}
	for q, c := range f.files {
		rel := q
		if p != "" {
			var ok bool
			if rel, ok = strings.CutPrefix(q, p+"/"); !ok {
				continue
			}
		}
		name, _, deeper := strings.Cut(rel, "/")
		switch {
		case r.URL.Query().Get("recursive") == "true":
			list = append(list, entry{Name: rel, Path: q, Type: "file", Size: len(c), SHA256: sha(c)})
		case !deeper:
			list = append(list, entry{Name: name, Path: q, Type: "file", Size: len(c), SHA256: sha(c)})
		case !seen[name]:
			seen[name] = true
			list = append(list, entry{Name: name, Path: strings.TrimPrefix(p+"/"+name, "/"), Type: "directory"})
		}
	}
	if len(list) == 0 && p != "" {
		http.Error(w, "{}", http.StatusNotFound)
		return
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Path < list[j].Path })
	w.Header().Set("File-Type", "directory")
	if r.Method == "GET" {
		json.NewEncoder(w).Encode(map[string]any{"path": p, "entries": list})
	}
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

func view(f *fakeFiles, session, token string, readonly bool) map[string]any {
	return map[string]any{"view": "workspace", "path": "/workspace", "service_url": f.url(session), "token": token, "readonly": readonly}
}

func mountParams(session string, views ...map[string]any) map[string]any {
	return map[string]any{"session_id": session, "epoch": 1, "views": views}
}

// machine starts a machine-scoped executor mounting views below a temp
// root in the given mode; it returns the root too.
func machine(t *testing.T, h *fakeHarness, mode string) (*Executor, *fakeConn, string, *proto.Frame) {
	t.Helper()
	root := t.TempDir()
	cfg := h.config(t)
	cfg.Scope = Machine("mch_1")
	cfg.Capabilities.Process = &ProcessCapability{}
	cfg.Files = &FileMounts{Root: root, Mode: mode, SyncInterval: 3600e9}
	e, fc, reg := h.start(t, cfg)
	return e, fc, root, reg
}

func readTree(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestFsNotServed(t *testing.T) {
	h := newHarness(t)
	_, fc, reg := h.start(t, h.config(t))
	if strings.Contains(string(reg.Params), `"fs"`) {
		t.Errorf("register declares fs without Files: %s", reg.Params)
	}
	for _, m := range []string{"fs.mount", "fs.unmount"} {
		rerr := fc.rpcError(t, m, mountParams("ses_1"))
		if rerr.Code != CodeCapabilityMissing || !strings.Contains(string(rerr.Data), `"capability":"fs.fuse"`) {
			t.Errorf("%s without Files = %v", m, rerr)
		}
	}
}

func TestFsMountParams(t *testing.T) {
	h := newHarness(t)
	_, fc, _, reg := machine(t, h, MountSync)
	var caps struct {
		Capabilities struct {
			FS *proto.FSCapability `json:"fs"`
		} `json:"capabilities"`
	}
	if err := json.Unmarshal(reg.Params, &caps); err != nil || caps.Capabilities.FS == nil || !caps.Capabilities.FS.Fuse {
		t.Errorf("register capabilities.fs: %s", reg.Params)
	}
	f := newFakeFiles(t, nil)
	for name, p := range map[string]map[string]any{
		"no session":    {"views": []any{view(f, "ses_1", "t", false)}},
		"relative path": mountParams("ses_1", map[string]any{"view": "w", "path": "w", "service_url": f.url("ses_1"), "token": "t"}),
		"no view":       mountParams("ses_1", map[string]any{"path": "/w", "service_url": f.url("ses_1"), "token": "t"}),
		"bad url":       mountParams("ses_1", map[string]any{"view": "w", "path": "/w", "service_url": "ftp://x", "token": "t"}),
	} {
		if rerr := fc.rpcError(t, "fs.mount", p); rerr.Code != CodeInvalidParams {
			t.Errorf("%s: %v", name, rerr)
		}
	}
	// A view the service refuses fails to mount, with the reason.
	rerr := fc.rpcError(t, "fs.mount", mountParams("ses_1", view(f, "ses_1", "refused", false)))
	if rerr.Code != CodeInternal || rerr.Reason() != "mount_failed" {
		t.Errorf("mount with a refused token: %v", rerr)
	}
	// A listing naming a path outside the view fails the mount and writes
	// nothing.
	evil := newFakeFiles(t, map[string]string{"../../escaped": "x"})
	evil.allow("t")
	rerr = fc.rpcError(t, "fs.mount", mountParams("ses_9", view(evil, "ses_9", "t", false)))
	if rerr.Reason() != "mount_failed" || !strings.Contains(rerr.Message, "unsafe path") {
		t.Errorf("mount of an unsafe listing: %v", rerr)
	}
	// Unmounting a session with nothing mounted is fine.
	var res map[string]string
	fc.result(t, "fs.unmount", map[string]any{"session_id": "ses_none", "flush": true}, &res)
	if res["status"] != "unmounted" {
		t.Errorf("fs.unmount = %v", res)
	}
}

// The sync fallback: the directory becomes a copy of the view, local
// changes go up at fs.unmount with flush, and tokens are renewed in place.
func TestFsSync(t *testing.T) {
	h := newHarness(t)
	e, fc, root, _ := machine(t, h, MountSync)
	f := newFakeFiles(t, map[string]string{"a.txt": "alpha", "d/b.txt": "beta", "keep": "k"})
	f.allow("tok1", "tok2")
	dir := filepath.Join(root, "workspace")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "stale.txt"), []byte("old"), 0o644); err != nil {
		t.Fatal(err)
	}
	var res proto.FsMountResult
	fc.result(t, "fs.mount", mountParams("ses_1", view(f, "ses_1", "tok1", false)), &res)
	if diff := cmp.Diff([]string{"workspace"}, res.Mounted); diff != "" {
		t.Errorf("mounted (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(map[string]string{"a.txt": "alpha", "d/b.txt": "beta", "keep": "k"}, readTree(t, dir)); diff != "" {
		t.Errorf("after mount (-want +got):\n%s", diff)
	}
	if got := e.files.mounted("ses_1"); got["workspace"] != MountSync {
		t.Errorf("mounted as %v", got)
	}
	before := e.files.of(func(viewKey) bool { return true })[0]

	// The same mount with a new token renews it without remounting.
	fc.result(t, "fs.mount", mountParams("ses_1", view(f, "ses_1", "tok2", false)), &res)
	if after := e.files.of(func(viewKey) bool { return true })[0]; after != before {
		t.Error("a token renewal remounted the view")
	}
	// Another session cannot mount onto the same path.
	if rerr := fc.rpcError(t, "fs.mount", mountParams("ses_2", view(f, "ses_2", "tok2", false))); rerr.Code != CodeConflict {
		t.Errorf("second view at the same path: %v", rerr)
	}

	os.WriteFile(filepath.Join(dir, "a.txt"), []byte("ALPHA"), 0o644)
	os.MkdirAll(filepath.Join(dir, "new/deep"), 0o755)
	os.WriteFile(filepath.Join(dir, "new/deep/c.txt"), []byte("gamma"), 0o644)
	os.Remove(filepath.Join(dir, "d/b.txt"))
	os.Symlink("/etc/passwd", filepath.Join(dir, "link"))
	fc.result(t, "fs.unmount", map[string]any{"session_id": "ses_1", "flush": true}, nil)
	want := map[string]string{"a.txt": "ALPHA", "new/deep/c.txt": "gamma", "keep": "k"}
	if diff := cmp.Diff(want, f.snapshot()); diff != "" {
		t.Errorf("service after unmount with flush (-want +got):\n%s", diff)
	}
	if got := f.tokens(); got[len(got)-1] != "tok2" {
		t.Errorf("tokens used: %v; the renewed one must be used after the renewal", got)
	}
	if len(e.files.mounted("ses_1")) != 0 {
		t.Error("still mounted after fs.unmount")
	}
	// The token is gone: later local changes go nowhere.
	os.WriteFile(filepath.Join(dir, "after"), []byte("x"), 0o644)
	fc.result(t, "fs.unmount", map[string]any{"session_id": "ses_1", "flush": true}, nil)
	if _, ok := f.snapshot()["after"]; ok {
		t.Error("a write after unmount was uploaded")
	}
}

// A changed read-only flag remounts; a read-only view uploads nothing.
func TestFsRemount(t *testing.T) {
	h := newHarness(t)
	e, fc, root, _ := machine(t, h, MountSync)
	f := newFakeFiles(t, map[string]string{"a": "1"})
	f.allow("t")
	fc.result(t, "fs.mount", mountParams("ses_1", view(f, "ses_1", "t", false)), nil)
	first := e.files.of(func(viewKey) bool { return true })[0]
	dir := filepath.Join(root, "workspace")
	os.WriteFile(filepath.Join(dir, "b"), []byte("2"), 0o644)
	fc.result(t, "fs.mount", mountParams("ses_1", view(f, "ses_1", "t", true)), nil)
	second := e.files.of(func(viewKey) bool { return true })[0]
	if second == first || !second.readonly {
		t.Fatal("a changed read-only flag did not remount")
	}
	// The remount flushed the writable view's change first.
	if diff := cmp.Diff(map[string]string{"a": "1", "b": "2"}, f.snapshot()); diff != "" {
		t.Errorf("service after remount (-want +got):\n%s", diff)
	}
	if fi, err := os.Stat(filepath.Join(dir, "a")); err != nil || fi.Mode().Perm() != 0o444 {
		t.Errorf("read-only copy: %v %v", fi, err)
	}
	os.WriteFile(filepath.Join(dir, "c"), []byte("3"), 0o644)
	fc.result(t, "fs.unmount", map[string]any{"session_id": "ses_1", "flush": true}, nil)
	if _, ok := f.snapshot()["c"]; ok {
		t.Error("a read-only view uploaded a change")
	}
}

// Synced directories upload on their own every interval, and when the
// executor closes.
func TestFsSyncPeriodicAndClose(t *testing.T) {
	h := newHarness(t)
	root := t.TempDir()
	cfg := h.config(t)
	cfg.Scope = Machine("mch_1")
	cfg.Capabilities.Process = &ProcessCapability{}
	cfg.Files = &FileMounts{Root: root, Mode: MountSync, SyncInterval: 5e6}
	e, fc, _ := h.start(t, cfg)
	f := newFakeFiles(t, nil)
	f.allow("t")
	fc.result(t, "fs.mount", mountParams("ses_1", view(f, "ses_1", "t", false)), nil)
	dir := filepath.Join(root, "workspace")
	os.WriteFile(filepath.Join(dir, "tick"), []byte("x"), 0o644)
	if p := await(t, f.writes, "a periodic upload"); p != "tick" {
		t.Errorf("uploaded %q", p)
	}
	os.WriteFile(filepath.Join(dir, "last"), []byte("y"), 0o644)
	ctx, cancel := context.WithTimeout(context.Background(), patience)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := f.snapshot(); got["last"] != "y" {
		t.Errorf("Close did not flush: %v", got)
	}
}
