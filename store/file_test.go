package store

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/filearea"
	"github.com/google/go-cmp/cmp"
)

func TestFileStoreSQLite(t *testing.T) { testFileStore(t, openSQLite) }

func TestFileStorePostgres(t *testing.T) {
	if os.Getenv(pgEnv) == "" {
		t.Skipf("%s is not set; skipping the PostgreSQL run of the file suite (start one with scripts/pg.sh start <dir>)", pgEnv)
	}
	testFileStore(t, openPostgres)
}

// testFileStore is the session files and artifacts part of the store
// conformance suite.
func testFileStore(t *testing.T, open func(t testing.TB) *DB) {
	runCases(t, open, []suiteCase{
		{"FileRoundTrip", testFileRoundTrip},
		{"FileShape", testFileShape},
		{"FileLimits", testFileLimits},
		{"FileSessionState", testFileSessionState},
		{"FileList", testFileList},
		{"FileConcurrentQuota", testFileConcurrentQuota},
		{"Artifact", testArtifact},
		{"ArtifactAccess", testArtifactAccess},
	})
}

// fileSession opens a session of a fresh profile and returns its id.
func fileSession(t *testing.T, db *DB) string {
	t.Helper()
	ck := mkKey(t, db, baton.RoleClient, mkProfile(t, db, baton.NewID("p")).ID)
	s, _ := mkSession(t, db, ck)
	return s.ID
}

func putFile(t *testing.T, db *DB, sid, path, content string) *filearea.File {
	t.Helper()
	f, err := db.PutFile(context.Background(), sid, path, []byte(content), filearea.Limits{})
	if err != nil {
		t.Fatalf("put %s: %v", path, err)
	}
	return f
}

func testFileRoundTrip(t *testing.T, db *DB) {
	ctx := context.Background()
	sid := fileSession(t, db)
	put := putFile(t, db, sid, "dir/a.txt", "hello")
	want := &filearea.File{Path: "dir/a.txt", Size: 5, SHA256: filearea.Digest([]byte("hello")), UpdatedAt: put.UpdatedAt}
	if diff := cmp.Diff(want, put); diff != "" || put.UpdatedAt.IsZero() {
		t.Fatalf("PutFile (-want +got):\n%s", diff)
	}
	st, err := db.StatFile(ctx, sid, "dir/a.txt")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, st); diff != "" {
		t.Errorf("StatFile (-want +got):\n%s", diff)
	}
	f, content, err := db.ReadFile(ctx, sid, "dir/a.txt")
	if err != nil || string(content) != "hello" {
		t.Fatalf("ReadFile = %q, %v", content, err)
	}
	if diff := cmp.Diff(want, f); diff != "" {
		t.Errorf("ReadFile record (-want +got):\n%s", diff)
	}

	// Replacing keeps one row with the new content.
	putFile(t, db, sid, "dir/a.txt", "bye")
	if _, content, _ := db.ReadFile(ctx, sid, "dir/a.txt"); string(content) != "bye" {
		t.Errorf("after replace: %q", content)
	}
	// An empty file is a file with empty (non-nil) content.
	putFile(t, db, sid, "empty", "")
	if f, content, err := db.ReadFile(ctx, sid, "empty"); err != nil || content == nil || len(content) != 0 || f.Size != 0 {
		t.Errorf("empty file: %+v %q %v", f, content, err)
	}
	// Binary content survives byte for byte.
	bin := []byte{0, 1, 2, 0xff, 0xfe, '\n', 0}
	if _, err := db.PutFile(ctx, sid, "bin", bin, filearea.Limits{}); err != nil {
		t.Fatal(err)
	}
	if _, content, _ := db.ReadFile(ctx, sid, "bin"); !bytes.Equal(content, bin) {
		t.Errorf("binary content = %v", content)
	}

	if err := db.DeleteFile(ctx, sid, "dir/a.txt", filearea.Limits{}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, db.DeleteFile(ctx, sid, "dir/a.txt", filearea.Limits{}), baton.ECodeNotFound, "no file dir/a.txt")
	_, err = db.StatFile(ctx, sid, "dir/a.txt")
	wantCode(t, err, baton.ECodeNotFound, "no file dir/a.txt")
	_, _, err = db.ReadFile(ctx, sid, "dir/a.txt")
	wantCode(t, err, baton.ECodeNotFound, "no file dir/a.txt")
	// Another session sees none of it.
	other := fileSession(t, db)
	_, err = db.StatFile(ctx, other, "empty")
	wantCode(t, err, baton.ECodeNotFound, "no file empty")
}

func testFileShape(t *testing.T, db *DB) {
	ctx := context.Background()
	sid := fileSession(t, db)
	putFile(t, db, sid, "a", "file")
	putFile(t, db, sid, "d/e/f", "deep")
	for _, c := range []struct{ path, msg string }{
		{"a/b", "a is a file, not a directory"},
		{"a/b/c", "a is a file, not a directory"},
		{"d", "d is a directory"},
		{"d/e", "d/e is a directory"},
	} {
		_, err := db.PutFile(ctx, sid, c.path, []byte("x"), filearea.Limits{})
		wantCode(t, err, baton.ECodeConflict, c.msg)
	}
	// Neighbours that merely share a prefix are fine.
	putFile(t, db, sid, "d-e", "x")
	putFile(t, db, sid, "ab", "x")
	putFile(t, db, sid, "d/e0", "x")
}

func testFileLimits(t *testing.T, db *DB) {
	ctx := context.Background()
	sid := fileSession(t, db)
	lim := filearea.Limits{MaxFileBytes: 4, MaxSessionBytes: 10, MaxSessionFiles: 3}
	put := func(path string, n int) error {
		_, err := db.PutFile(ctx, sid, path, bytes.Repeat([]byte("x"), n), lim)
		return err
	}
	_, err := db.PutFile(ctx, sid, "big", []byte("12345"), lim)
	wantCode(t, err, baton.ECodePayloadTooLarge, "file is larger than 4 bytes")
	for _, p := range []string{"a", "b"} {
		if err := put(p, 4); err != nil {
			t.Fatal(err)
		}
	}
	wantCode(t, put("c", 3), baton.ECodePayloadTooLarge, "the session's files would take more than 10 bytes")
	// Replacing a file counts its new size only.
	if err := put("a", 2); err != nil {
		t.Fatalf("shrinking a: %v", err)
	}
	if err := put("b", 4); err != nil {
		t.Fatalf("rewriting b at the same size: %v", err)
	}
	if err := put("c", 4); err != nil {
		t.Fatalf("c fits now: %v", err)
	}
	wantCode(t, put("d", 0), baton.ECodePayloadTooLarge, "the session would hold more than 3 files")
	if err := put("c", 1); err != nil {
		t.Fatalf("replacing at the file cap: %v", err)
	}
	// Nothing over a limit was stored.
	files, err := db.ListFiles(ctx, sid, "")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range files {
		names = append(names, f.Path)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, names); diff != "" {
		t.Errorf("files (-want +got):\n%s", diff)
	}
}

func testFileSessionState(t *testing.T, db *DB) {
	ctx := context.Background()
	_, err := db.PutFile(ctx, "ses_nope", "a", []byte("x"), filearea.Limits{})
	wantCode(t, err, baton.ECodeNotFound, "no session ses_nope")
	wantCode(t, db.DeleteFile(ctx, "ses_nope", "a", filearea.Limits{}), baton.ECodeNotFound, "no session ses_nope")
	sid := fileSession(t, db)
	putFile(t, db, sid, "kept", "x")
	if _, err := db.EndSession(ctx, sid, baton.StateClosed, newEvent(sid, baton.EventSessionClose)); err != nil {
		t.Fatal(err)
	}
	_, err = db.PutFile(ctx, sid, "a", []byte("x"), filearea.Limits{})
	wantCode(t, err, baton.ECodeSessionClosed, "session is closed")
	wantCode(t, db.DeleteFile(ctx, sid, "kept", filearea.Limits{}), baton.ECodeSessionClosed, "session is closed")
	// A closed session's files stay readable.
	if _, content, err := db.ReadFile(ctx, sid, "kept"); err != nil || string(content) != "x" {
		t.Errorf("read after close: %q %v", content, err)
	}
	// An executor's flush at unmount comes after the close and is kept.
	flush := filearea.Limits{AfterClose: true}
	if _, err := db.PutFile(ctx, sid, "flushed", []byte("late"), flush); err != nil {
		t.Fatalf("flush after close: %v", err)
	}
	if _, content, err := db.ReadFile(ctx, sid, "flushed"); err != nil || string(content) != "late" {
		t.Errorf("flushed file: %q %v", content, err)
	}
	if err := db.DeleteFile(ctx, sid, "kept", flush); err != nil {
		t.Errorf("delete in a flush after close: %v", err)
	}
}

func testFileList(t *testing.T, db *DB) {
	ctx := context.Background()
	sid := fileSession(t, db)
	paths := []string{"z", "a/b/c", "a/b-c", "a/b0", "a/b/ü", "a/b/d/e", "a/bb", "b"}
	for _, p := range paths {
		putFile(t, db, sid, p, p)
	}
	putFile(t, db, fileSession(t, db), "a/b/other-session", "x")
	list := func(dir string) []string {
		files, err := db.ListFiles(ctx, sid, dir)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{}
		for _, f := range files {
			if f.Size != int64(len(f.Path)) || f.SHA256 != filearea.Digest([]byte(f.Path)) {
				t.Errorf("record of %s: %+v", f.Path, f)
			}
			out = append(out, f.Path)
		}
		return out
	}
	for _, c := range []struct {
		dir  string
		want []string
	}{
		{"", []string{"a/b-c", "a/b/c", "a/b/d/e", "a/b/ü", "a/b0", "a/bb", "b", "z"}},
		{"a/b", []string{"a/b/c", "a/b/d/e", "a/b/ü"}},
		{"a", []string{"a/b-c", "a/b/c", "a/b/d/e", "a/b/ü", "a/b0", "a/bb"}},
		{"a/b/d", []string{"a/b/d/e"}},
		{"z", []string{}},
		{"nope", []string{}},
	} {
		if diff := cmp.Diff(c.want, list(c.dir)); diff != "" {
			t.Errorf("ListFiles(%q) (-want +got):\n%s", c.dir, diff)
		}
	}
}

// Concurrent writes of one session are serialized for the quota: of ten
// 3-byte files against a 10-byte cap, exactly three land.
func testFileConcurrentQuota(t *testing.T, db *DB) {
	ctx := context.Background()
	sid := fileSession(t, db)
	lim := filearea.Limits{MaxSessionBytes: 10}
	var wg sync.WaitGroup
	errs := make([]error, 10)
	for i := range errs {
		wg.Go(func() {
			_, errs[i] = db.PutFile(ctx, sid, fmt.Sprintf("f%d", i), []byte("abc"), lim)
		})
	}
	wg.Wait()
	ok := 0
	for _, err := range errs {
		switch baton.ErrorCode(err) {
		case "":
			ok++
		case baton.ECodePayloadTooLarge:
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if ok != 3 {
		t.Errorf("%d writes landed, want 3", ok)
	}
}

func testArtifact(t *testing.T, db *DB) {
	ctx := context.Background()
	env := mkEnvironment(t, db, "tools")
	a := &filearea.Artifact{EnvironmentID: env.ID, Name: "out.log", MediaType: "text/plain"}
	if err := db.CreateArtifact(ctx, a, []byte("log line\n"), filearea.Limits{MaxArtifactBytes: 64}); err != nil {
		t.Fatal(err)
	}
	if len(a.ID) != len(filearea.PrefixArtifact)+32 || a.Size != 9 || a.SHA256 != filearea.Digest([]byte("log line\n")) || a.CreatedAt.IsZero() {
		t.Errorf("filled artifact: %+v", a)
	}
	err := db.CreateArtifact(ctx, &filearea.Artifact{EnvironmentID: env.ID, Name: "big"}, make([]byte, 65), filearea.Limits{MaxArtifactBytes: 64})
	wantCode(t, err, baton.ECodePayloadTooLarge, "artifact is larger than 64 bytes")
	err = db.CreateArtifact(ctx, &filearea.Artifact{EnvironmentID: "env_nope", Name: "x"}, nil, filearea.Limits{})
	if baton.ErrorCode(err) != baton.ECodeNotFound {
		t.Errorf("unknown environment: %v", err)
	}
	err = db.CreateArtifact(ctx, &filearea.Artifact{SessionID: "ses_nope", Name: "x"}, nil, filearea.Limits{})
	wantCode(t, err, baton.ECodeNotFound, "no session ses_nope")
	if err := db.CreateArtifact(ctx, &filearea.Artifact{Name: "ownerless"}, nil, filearea.Limits{}); err == nil {
		t.Error("an artifact without an owner was stored")
	}

	// A session-owned artifact, with the default media type.
	sid := fileSession(t, db)
	mine := &filearea.Artifact{SessionID: sid, Name: "report.bin"}
	if err := db.CreateArtifact(ctx, mine, []byte{0, 1, 2}, filearea.Limits{}); err != nil {
		t.Fatal(err)
	}
	got, content, err := db.SessionArtifact(ctx, sid, mine.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := &filearea.Artifact{ID: mine.ID, SessionID: sid, Name: "report.bin", MediaType: "application/octet-stream",
		Size: 3, SHA256: filearea.Digest([]byte{0, 1, 2}), CreatedAt: mine.CreatedAt}
	if diff := cmp.Diff(want, got); diff != "" || !bytes.Equal(content, []byte{0, 1, 2}) {
		t.Errorf("SessionArtifact (-want +got):\n%s\ncontent %v", diff, content)
	}
}

func testArtifactAccess(t *testing.T, db *DB) {
	ctx := context.Background()
	env := mkEnvironment(t, db, "tools")
	other := mkEnvironment(t, db, "other")
	p := &baton.Profile{Name: "uses-tools", PrimaryProvider: "scripted", ExecutorEnvironments: []string{env.ID}}
	if err := db.CreateProfile(ctx, p); err != nil {
		t.Fatal(err)
	}
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	s, _ := mkSession(t, db, ck)
	stranger := fileSession(t, db)

	mk := func(a *filearea.Artifact) string {
		t.Helper()
		if err := db.CreateArtifact(ctx, a, []byte("x"), filearea.Limits{}); err != nil {
			t.Fatal(err)
		}
		return a.ID
	}
	fromEnv := mk(&filearea.Artifact{EnvironmentID: env.ID, Name: "a"})
	fromOther := mk(&filearea.Artifact{EnvironmentID: other.ID, Name: "b"})
	ofStranger := mk(&filearea.Artifact{SessionID: stranger, Name: "c"})
	for _, c := range []struct {
		session, id string
		ok          bool
	}{
		{s.ID, fromEnv, true},        // the profile lists the environment
		{s.ID, fromOther, false},     // it does not list this one
		{s.ID, ofStranger, false},    // another session's own
		{stranger, ofStranger, true}, // its own
		{stranger, fromEnv, false},   // its profile lists no environment
		{s.ID, "art_nope", false},
		{"ses_nope", fromEnv, false},
	} {
		a, content, err := db.SessionArtifact(ctx, c.session, c.id)
		if c.ok {
			if err != nil || a.ID != c.id || string(content) != "x" {
				t.Errorf("SessionArtifact(%s, %s) = %+v, %q, %v", c.session, c.id, a, content, err)
			}
			continue
		}
		wantCode(t, err, baton.ECodeNotFound, "no artifact "+c.id)
	}
	// The session keeps reading its profile's environments after the
	// profile is deleted (which needs its key revoked, closing the session).
	closeEv := func(id string) *baton.Event { return newEvent(id, baton.EventSessionClose) }
	if _, err := db.RevokeClientKey(ctx, ck.ID, closeEv); err != nil {
		t.Fatal(err)
	}
	if err := db.DeleteProfile(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.SessionArtifact(ctx, s.ID, fromEnv); err != nil {
		t.Errorf("after the profile was deleted: %v", err)
	}
}

// BenchmarkFileReadWrite measures a 4 KiB file written and read back on
// SQLite.
func BenchmarkFileReadWrite(b *testing.B) {
	db := openSQLite(b)
	ctx := context.Background()
	p := &baton.Profile{Name: "bench", PrimaryProvider: "scripted"}
	if err := db.CreateProfile(ctx, p); err != nil {
		b.Fatal(err)
	}
	s := &baton.Session{ClientKeyID: "key_1", ProfileID: p.ID}
	if err := db.CreateSession(ctx, s, nil); err != nil {
		b.Fatal(err)
	}
	content := bytes.Repeat([]byte("x"), 4096)
	lim := filearea.Limits{}.WithDefaults()
	b.ReportAllocs()
	b.SetBytes(int64(len(content)))
	for b.Loop() {
		if _, err := db.PutFile(ctx, s.ID, "dir/file.txt", content, lim); err != nil {
			b.Fatal(err)
		}
		if _, _, err := db.ReadFile(ctx, s.ID, "dir/file.txt"); err != nil {
			b.Fatal(err)
		}
	}
}
