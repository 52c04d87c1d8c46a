package httpapi

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/auth"
	"github.com/baton-engine/baton/filearea"
	"github.com/baton-engine/baton/internal/httpx/httpxtest"
	"github.com/baton-engine/baton/store"
	"github.com/google/go-cmp/cmp"
)

// fileFixture is a server with the file routes over a real store: two
// open sessions (sid with a profile listing environment env, and other),
// real view tokens on a settable clock, and fake executor tokens.
type fileFixture struct {
	db          *store.DB
	srv         *Server
	sid, other  string
	env         string
	views       *auth.ViewTokens
	now         time.Time
	mu          sync.Mutex
	epochs      map[string]int64
	executorTok map[string]*baton.ExecutorGrant
}

const otherToken = "bae_ses_other"

func (f *fileFixture) CurrentEpoch(sessionID string) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e, ok := f.epochs[sessionID]
	return e, ok
}

// fakeExecutorVerifier verifies the executor tokens of a fixture.
type fakeExecutorVerifier struct{ f *fileFixture }

func (v fakeExecutorVerifier) Issue(context.Context, string, string, string) (string, *baton.ExecutorGrant, error) {
	panic("not used")
}

func (v fakeExecutorVerifier) Verify(_ context.Context, token string) (*baton.ExecutorGrant, error) {
	if g, ok := v.f.executorTok[token]; ok {
		return g, nil
	}
	return nil, baton.Errorf(baton.ECodeUnauthorized, "invalid executor token")
}

func newFileFixture(t *testing.T, lim filearea.Limits) *fileFixture {
	t.Helper()
	ctx := context.Background()
	f := &fileFixture{db: openStore(t), now: time.Now().UTC(), epochs: map[string]int64{}}
	env := &baton.Environment{Name: "tools"}
	if err := f.db.CreateEnvironment(ctx, env); err != nil {
		t.Fatal(err)
	}
	f.env = env.ID
	p := &baton.Profile{Name: "files", PrimaryProvider: "main", ExecutorEnvironments: []string{env.ID}}
	if err := f.db.CreateProfile(ctx, p); err != nil {
		t.Fatal(err)
	}
	for _, id := range []*string{&f.sid, &f.other} {
		s := &baton.Session{ClientKeyID: "key_client", ProfileID: p.ID}
		if err := f.db.CreateSession(ctx, s, nil); err != nil {
			t.Fatal(err)
		}
		*id = s.ID
	}
	var err error
	f.views, err = auth.OpenViewTokens(ctx, auth.ViewTokenOptions{Store: f.db, TTL: time.Hour, Now: func() time.Time {
		f.mu.Lock()
		defer f.mu.Unlock()
		return f.now
	}})
	if err != nil {
		t.Fatal(err)
	}
	f.executorTok = map[string]*baton.ExecutorGrant{
		"bae_ext_env":   {Scope: baton.ExecutorScopeEnvironment, EnvironmentID: env.ID},
		"bae_ext_mch":   {Scope: baton.ExecutorScopeMachine, MachineID: "mch_1"},
		"bae_ext_stray": {Scope: baton.ExecutorScopeEnvironment, EnvironmentID: "env_other"},
	}
	a := &fakeAuth{sessions: map[string]*baton.Key{
		f.sid + " " + sessionToken: {ID: "key_s1", Role: baton.RoleSession, Name: f.sid},
		f.other + " " + otherToken: {ID: "key_s2", Role: baton.RoleSession, Name: f.other},
	}}
	f.srv = New(Options{Addr: "127.0.0.1:0", MaxBodyBytes: maxBody, Auth: a, Sessions: &fakeSessions{}, Events: f.db,
		Receipts: f.db, ExecutorTokens: fakeExecutorVerifier{f}, Files: f.db, ViewTokens: f.views, Epochs: f,
		FileLimits: lim})
	return f
}

// viewToken mints a token for a view of session sid.
func (f *fileFixture) viewToken(t *testing.T, g filearea.ViewGrant) string {
	t.Helper()
	tok, err := f.views.Issue(g)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func (f *fileFixture) put(t *testing.T, sid, path, content string) {
	t.Helper()
	if _, err := f.db.PutFile(context.Background(), sid, path, []byte(content), filearea.Limits{}); err != nil {
		t.Fatal(err)
	}
}

func bearer(token string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + token}
}

func problem(status int, typ, detail string) httpxtest.Scenario {
	return httpxtest.Scenario{Status: status, Problem: httpxtest.Problem(status, typ, detail)}
}

// with fills a scenario's request into an expected outcome.
func with(out httpxtest.Scenario, name, method, path string, headers map[string]string, body string) httpxtest.Scenario {
	out.Name, out.Method, out.Path, out.Headers, out.Body = name, method, path, headers, body
	return out
}

// fileRecord checks a PUT answer.
func fileRecord(path, content string) func(t *testing.T, rec *httptest.ResponseRecorder) {
	return func(t *testing.T, rec *httptest.ResponseRecorder) {
		var got fileBody
		if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
			t.Fatal(err)
		}
		if _, err := baton.ParseTime(got.UpdatedAt); err != nil {
			t.Errorf("updated_at %q: %v", got.UpdatedAt, err)
		}
		got.UpdatedAt = ""
		want := fileBody{Path: path, Size: int64(len(content)), SHA256: filearea.Digest([]byte(content))}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("PUT answer (-want +got):\n%s", diff)
		}
	}
}

// body checks a raw body and some headers.
func body(content string, headers map[string]string) func(t *testing.T, rec *httptest.ResponseRecorder) {
	return func(t *testing.T, rec *httptest.ResponseRecorder) {
		if rec.Body.String() != content {
			t.Errorf("body %q, want %q", rec.Body, content)
		}
		for k, v := range headers {
			if got := rec.Header().Get(k); got != v {
				t.Errorf("%s: %q, want %q", k, got, v)
			}
		}
	}
}

// entries checks a listing's names and types.
func entries(path string, want ...string) func(t *testing.T, rec *httptest.ResponseRecorder) {
	return func(t *testing.T, rec *httptest.ResponseRecorder) {
		var l listing
		if err := json.Unmarshal(rec.Body.Bytes(), &l); err != nil {
			t.Fatalf("listing %s: %v", rec.Body, err)
		}
		got := []string{}
		for _, e := range l.Entries {
			if e.Type == "file" && (e.Size == nil || e.SHA256 == "" || e.UpdatedAt == "") {
				t.Errorf("file entry without its record: %+v", e)
			}
			got = append(got, e.Type+" "+e.Path+" "+e.Name)
		}
		if want == nil {
			want = []string{}
		}
		if l.Path != path {
			t.Errorf("listing path %q, want %q", l.Path, path)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("entries (-want +got):\n%s", diff)
		}
		if rec.Header().Get(HeaderFileType) != "directory" {
			t.Errorf("File-Type %q", rec.Header().Get(HeaderFileType))
		}
	}
}

func TestClientFiles(t *testing.T) {
	f := newFileFixture(t, filearea.Limits{MaxFileBytes: 16, MaxSessionBytes: 40})
	base := "/api/v1/sessions/" + f.sid + "/files"
	key := bearer(sessionToken)
	ok := func(check func(*testing.T, *httptest.ResponseRecorder)) httpxtest.Scenario {
		return httpxtest.Scenario{Status: 200, Check: check}
	}
	hello := filearea.Digest([]byte("hello"))
	httpxtest.Run(t, f.srv.Handler(), nil, []httpxtest.Scenario{
		with(problem(401, "unauthorized", "missing Authorization header"), "no key", "PUT", base+"/a.txt", nil, "x"),
		with(problem(401, "unauthorized", "invalid session key"), "another session's key", "GET", base+"/a.txt", bearer(otherToken), ""),
		with(ok(entries("")), "empty root", "GET", base, key, ""),
		with(ok(fileRecord("docs/a.txt", "hello")), "put", "PUT", base+"/docs/a.txt", key, "hello"),
		with(ok(fileRecord("docs/sub/b.bin", "\x00\x01")), "put binary", "PUT", base+"/docs/sub/b.bin", key, "\x00\x01"),
		with(ok(fileRecord("top", "")), "put empty", "PUT", base+"/top", key, ""),
		with(ok(body("hello", map[string]string{"Content-Type": "application/octet-stream", "ETag": `"` + hello + `"`,
			HeaderFileType: "file", HeaderFileSHA256: hello, "Content-Length": "5"})), "get", "GET", base+"/docs/a.txt", key, ""),
		with(ok(body("", nil)), "get empty file", "GET", base+"/top", key, ""),
		with(ok(entries("", "directory docs docs", "file top top")), "list root", "GET", base+"/", key, ""),
		with(ok(entries("docs", "file docs/a.txt a.txt", "directory docs/sub sub")), "list dir", "GET", base+"/docs/", key, ""),
		with(ok(entries("docs", "file docs/a.txt a.txt", "directory docs/sub sub")), "dir without slash", "GET", base+"/docs", key, ""),
		with(ok(entries("docs", "file docs/a.txt a.txt", "file docs/sub/b.bin sub/b.bin")), "recursive", "GET", base+"/docs?recursive=true", key, ""),
		with(problem(404, "not_found", "no file nope"), "missing", "GET", base+"/nope", key, ""),
		with(problem(404, "not_found", "no file docs/nope"), "missing dir", "GET", base+"/docs/nope/", key, ""),
		with(problem(409, "conflict", "top is a file, not a directory"), "below a file", "PUT", base+"/top/x", key, "x"),
		with(problem(409, "conflict", "docs is a directory"), "onto a directory", "PUT", base+"/docs", key, "x"),
		with(problem(400, "bad_request", "invalid path: a file path is required"), "put a directory", "PUT", base+"/docs/", key, "x"),
		with(problem(400, "bad_request", `invalid path: contains ".."`), "dot dot", "GET", base+"/../../etc/passwd", key, ""),
		with(problem(400, "bad_request", `invalid path: contains ".."`), "escaped dot dot", "GET", base+"/docs/%2e%2e/%2E%2E/x", key, ""),
		with(problem(400, "bad_request", `invalid path: contains ".."`), "escaped slashes", "PUT", base+"/a%2f..%2f..%2fb", key, "x"),
		with(problem(400, "bad_request", `invalid path: contains ".."`), "dot dot without a key", "GET", base+"/..", nil, ""),
		with(problem(400, "bad_request", "invalid path: contains NUL"), "NUL", "PUT", base+"/a%00b", key, "x"),
		with(problem(400, "bad_request", "invalid path: contains a backslash"), "backslash", "GET", base+`/a%5C..%5Cb`, key, ""),
		with(problem(400, "bad_request", "invalid path: a component is longer than 255 bytes"), "long name", "PUT",
			base+"/"+strings.Repeat("n", 256), key, "x"),
		with(problem(413, "payload_too_large", "file is larger than 16 bytes"), "file too large", "PUT", base+"/big", key,
			strings.Repeat("x", 17)),
		with(ok(fileRecord("c", strings.Repeat("c", 16))), "at the file cap", "PUT", base+"/c", key, strings.Repeat("c", 16)),
		with(ok(fileRecord("d", strings.Repeat("d", 16))), "up to the session cap", "PUT", base+"/d", key, strings.Repeat("d", 16)),
		with(problem(413, "payload_too_large", "the session's files would take more than 40 bytes"), "session cap", "PUT",
			base+"/e", key, "eeeeeeeeeee"),
		{Name: "delete", Method: "DELETE", Path: base + "/docs/a.txt", Headers: key, Status: 204},
		with(problem(404, "not_found", "no file docs/a.txt"), "deleted", "GET", base+"/docs/a.txt", key, ""),
		with(problem(404, "not_found", "no file docs/a.txt"), "delete again", "DELETE", base+"/docs/a.txt", key, ""),
		with(problem(400, "bad_request", "invalid path: a file path is required"), "delete a directory", "DELETE", base+"/docs/", key, ""),
		with(ok(entries("")), "other session sees nothing", "GET", "/api/v1/sessions/"+f.other+"/files/", bearer(otherToken), ""),
	})

	// A chunked body over the cap is cut off at the cap.
	r := httptest.NewRequest("PUT", base+"/chunked", io.MultiReader(strings.NewReader(strings.Repeat("x", 10)), strings.NewReader(strings.Repeat("y", 10))))
	r.ContentLength = -1
	r.Header.Set("Authorization", "Bearer "+sessionToken)
	rec := httptest.NewRecorder()
	f.srv.Handler().ServeHTTP(rec, r)
	if rec.Code != 413 {
		t.Errorf("chunked over the cap: %d %s", rec.Code, rec.Body)
	}
	// Range requests are served.
	f.put(t, f.sid, "range", "0123456789")
	rec = httpxtest.Do(f.srv.Handler(), "GET", base+"/range", map[string]string{"Authorization": "Bearer " + sessionToken, "Range": "bytes=2-4"}, "")
	if rec.Code != http.StatusPartialContent || rec.Body.String() != "234" {
		t.Errorf("range: %d %q", rec.Code, rec.Body)
	}
	// A closed session's files are read-only.
	if _, err := f.db.EndSession(context.Background(), f.sid, baton.StateClosed, baton.NewEvent(f.sid, "", baton.EventSessionClose, nil)); err != nil {
		t.Fatal(err)
	}
	httpxtest.Run(t, f.srv.Handler(), nil, []httpxtest.Scenario{
		with(problem(409, "session_closed", "session is closed"), "put after close", "PUT", base+"/late", key, "x"),
		with(ok(body("0123456789", nil)), "read after close", "GET", base+"/range", key, ""),
	})
}

// Without a file store the routes do not exist, and ".." is left to the
// mux.
func TestFilesOff(t *testing.T) {
	f := newFixture(t, 0)
	run(t, f, []httpxtest.Scenario{
		{Name: "files", Method: "GET", Path: "/api/v1/sessions/" + f.sid + "/files/a", Headers: httpxtest.Auth("Bearer " + sessionToken), Status: 404, Empty: true},
		{Name: "fs", Method: "GET", Path: "/v1/fs/" + f.sid + "/workspace/a", Headers: httpxtest.Auth("Bearer x"), Status: 404, Empty: true},
		{Name: "artifact upload", Method: "POST", Path: "/v1/executors/artifacts", Headers: httpxtest.Auth("Bearer x"), Status: 404, Empty: true},
	})
}

func v1err(status int, code, msg string) httpxtest.Scenario {
	m, _ := json.Marshal(msg)
	return httpxtest.Scenario{Status: status, Want: `{"error":{"code":"` + code + `","message":` + string(m) + `}}`}
}

func TestFileService(t *testing.T) {
	f := newFileFixture(t, filearea.Limits{MaxFileBytes: 8})
	f.put(t, f.sid, "src/main.go", "package")
	f.put(t, f.sid, "src/lib/x.go", "x")
	f.put(t, f.sid, "README", "hi")
	ws := f.viewToken(t, filearea.ViewGrant{SessionID: f.sid, View: "workspace", Epoch: 3})
	ro := f.viewToken(t, filearea.ViewGrant{SessionID: f.sid, View: "src", Root: "src", Epoch: 3, Readonly: true})
	stale := f.viewToken(t, filearea.ViewGrant{SessionID: f.sid, View: "workspace", Epoch: 2})
	short := f.viewToken(t, filearea.ViewGrant{SessionID: f.sid, View: "workspace", Epoch: 3, ExpiresAt: f.now.Add(time.Minute)})
	f.epochs[f.sid] = 3
	base := "/v1/fs/" + f.sid
	ok := func(check func(*testing.T, *httptest.ResponseRecorder)) httpxtest.Scenario {
		return httpxtest.Scenario{Status: 200, Check: check}
	}
	head := func(headers map[string]string) httpxtest.Scenario {
		return httpxtest.Scenario{Status: 200, Check: body("", headers)}
	}
	httpxtest.Run(t, f.srv.Handler(), nil, []httpxtest.Scenario{
		with(v1err(401, "unauthorized", "missing Authorization header"), "no token", "GET", base+"/workspace/README", nil, ""),
		with(v1err(401, "unauthorized", "invalid view token"), "a session key", "GET", base+"/workspace/README", bearer(sessionToken), ""),
		with(ok(entries("", "file README README", "directory src src")), "list root", "GET", base+"/workspace", bearer(ws), ""),
		with(ok(body("package", map[string]string{HeaderFileType: "file"})), "read", "GET", base+"/workspace/src/main.go", bearer(ws), ""),
		with(head(map[string]string{HeaderFileType: "file", "Content-Length": "7", HeaderFileSHA256: filearea.Digest([]byte("package"))}),
			"stat file", "HEAD", base+"/workspace/src/main.go", bearer(ws), ""),
		with(head(map[string]string{HeaderFileType: "directory"}), "stat dir", "HEAD", base+"/workspace/src", bearer(ws), ""),
		with(head(map[string]string{HeaderFileType: "directory"}), "stat root", "HEAD", base+"/workspace/", bearer(ws), ""),
		{Name: "stat missing", Method: "HEAD", Path: base + "/workspace/nope", Headers: bearer(ws), Status: 404},
		with(ok(fileRecord("new/file", "data")), "write", "PUT", base+"/workspace/new/file", bearer(ws), "data"),
		with(v1err(413, "invalid_request", "file is larger than 8 bytes"), "write too large", "PUT", base+"/workspace/big", bearer(ws), "123456789"),
		{Name: "delete", Method: "DELETE", Path: base + "/workspace/new/file", Headers: bearer(ws), Status: 204},
		with(v1err(404, "not_found", "no file new/file"), "deleted", "GET", base+"/workspace/new/file", bearer(ws), ""),
		// A view with a root shows paths relative to it.
		with(ok(entries("", "directory lib lib", "file main.go main.go")), "rooted list", "GET", base+"/src/", bearer(ro), ""),
		with(ok(body("x", nil)), "rooted read", "GET", base+"/src/lib/x.go", bearer(ro), ""),
		with(v1err(404, "not_found", "no file README"), "rooted view cannot see out", "GET", base+"/src/README", bearer(ro), ""),
		with(v1err(403, "forbidden", "view src is read-only"), "read-only write", "PUT", base+"/src/main.go", bearer(ro), "x"),
		with(v1err(403, "forbidden", "view src is read-only"), "read-only delete", "DELETE", base+"/src/main.go", bearer(ro), ""),
		with(v1err(403, "forbidden", "the view token is for another session"), "wrong session", "GET", "/v1/fs/"+f.other+"/workspace/README", bearer(ws), ""),
		with(v1err(403, "forbidden", "the view token is for another view"), "wrong view", "GET", base+"/src/main.go", bearer(ws), ""),
		with(v1err(401, "unauthorized", "the view token is for an earlier binding of the session"), "stale epoch", "GET", base+"/workspace/README", bearer(stale), ""),
		with(v1err(400, "invalid_request", `invalid path: contains ".."`), "traversal", "GET", base+"/workspace/../../../etc/passwd", bearer(ws), ""),
		with(v1err(400, "invalid_request", `invalid path: contains ".."`), "escaped traversal", "GET", base+"/workspace/src/%2E%2E/%2e%2e/x", bearer(ws), ""),
		with(v1err(400, "invalid_request", "invalid path: contains NUL"), "NUL", "GET", base+"/workspace/a%00", bearer(ws), ""),
	})
	// Two minutes later the short token has expired; the long one lives.
	f.mu.Lock()
	f.now = f.now.Add(2 * time.Minute)
	f.mu.Unlock()
	httpxtest.Run(t, f.srv.Handler(), nil, []httpxtest.Scenario{
		with(v1err(401, "unauthorized", "view token expired"), "expired", "GET", base+"/workspace/README", bearer(short), ""),
		with(ok(body("hi", nil)), "unexpired", "GET", base+"/workspace/README", bearer(ws), ""),
	})
	// A session bound nowhere on this node is not epoch-checked.
	delete(f.epochs, f.sid)
	httpxtest.Run(t, f.srv.Handler(), nil, []httpxtest.Scenario{
		with(ok(body("hi", nil)), "unbound", "GET", base+"/workspace/README", bearer(stale), ""),
	})
}

func TestArtifacts(t *testing.T) {
	f := newFileFixture(t, filearea.Limits{MaxArtifactBytes: 10})
	up := func(token, name, ct string) map[string]string {
		h := map[string]string{"Authorization": "Bearer " + token}
		if name != "" {
			h[HeaderArtifactName] = name
		}
		if ct != "" {
			h["Content-Type"] = ct
		}
		return h
	}
	var ids []string
	created := func(content string) httpxtest.Scenario {
		return httpxtest.Scenario{Status: 201, Check: func(t *testing.T, rec *httptest.ResponseRecorder) {
			var got uploaded
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(got.ArtifactID, filearea.PrefixArtifact) || got.Size != int64(len(content)) || got.SHA256 != filearea.Digest([]byte(content)) {
				t.Errorf("upload answer %+v", got)
			}
			ids = append(ids, got.ArtifactID)
		}}
	}
	envPath := "/v1/environments/" + f.env + "/artifacts"
	httpxtest.Run(t, f.srv.Handler(), nil, []httpxtest.Scenario{
		with(v1err(401, "unauthorized", "missing Authorization header"), "no token", "POST", envPath, nil, "x"),
		with(v1err(401, "unauthorized", "invalid executor token"), "bad token", "POST", envPath, up("bae_ext_nope", "a", ""), "x"),
		with(v1err(403, "forbidden", "artifacts are uploaded with an environment executor token"), "machine token", "POST", envPath, up("bae_ext_mch", "a", ""), "x"),
		with(v1err(403, "forbidden", "the executor token is for another environment"), "other environment", "POST", envPath, up("bae_ext_stray", "a", ""), "x"),
		with(v1err(400, "invalid_request", "Artifact-Name header is required"), "no name", "POST", envPath, up("bae_ext_env", "", ""), "x"),
		with(v1err(400, "invalid_request", "Artifact-Name header must be UTF-8 text without control characters"), "control name", "POST", envPath, up("bae_ext_env", "a\tb", ""), "x"),
		with(v1err(400, "invalid_request", `invalid Content-Type "text/"`), "bad media type", "POST", envPath, up("bae_ext_env", "a", "text/"), "x"),
		with(v1err(413, "invalid_request", "artifact is larger than 10 bytes"), "too large", "POST", envPath, up("bae_ext_env", "a", ""), "12345678901"),
		with(created("line one\n"), "upload", "POST", envPath, up("bae_ext_env", "out.log", "text/plain; charset=UTF-8"), "line one\n"),
		with(created("\x00\x01"), "legacy upload", "POST", "/v1/executors/artifacts", up("bae_ext_env", "blob", ""), "\x00\x01"),
		with(v1err(403, "forbidden", "artifacts are uploaded with an environment executor token"), "legacy machine", "POST", "/v1/executors/artifacts", up("bae_ext_mch", "a", ""), "x"),
	})
	if len(ids) != 2 {
		t.Fatalf("uploaded %d artifacts", len(ids))
	}
	get := "/api/v1/sessions/" + f.sid + "/artifacts/"
	httpxtest.Run(t, f.srv.Handler(), nil, []httpxtest.Scenario{
		{Name: "download", Method: "GET", Path: get + ids[0], Headers: bearer(sessionToken), Status: 200,
			Check: body("line one\n", map[string]string{"Content-Type": "text/plain; charset=UTF-8", HeaderArtifactName: "out.log",
				"Content-Disposition": `attachment; filename=out.log`, "ETag": `"` + filearea.Digest([]byte("line one\n")) + `"`})},
		{Name: "download binary", Method: "GET", Path: get + ids[1], Headers: bearer(sessionToken), Status: 200,
			Check: body("\x00\x01", map[string]string{"Content-Type": "application/octet-stream"})},
		with(problem(401, "unauthorized", "missing Authorization header"), "no key", "GET", get+ids[0], nil, ""),
		with(problem(401, "unauthorized", "invalid session key"), "another session's key", "GET", get+ids[0], bearer(otherToken), ""),
		with(problem(404, "not_found", "no artifact art_nope"), "unknown", "GET", get+"art_nope", bearer(sessionToken), ""),
	})
}
