package store

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/internal/pgtest"
	"go.uber.org/goleak"
)

// pgEnv names the PostgreSQL DSN the suite also runs against when set.
const pgEnv = "BATON_TEST_POSTGRES_DSN"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path) // never returns
	}
	if path := os.Getenv(lockChildEnv); path != "" {
		lockChild(path) // never returns
	}
	goleak.VerifyTestMain(m)
}

func TestSQLite(t *testing.T) { testStore(t, openSQLite) }

func TestPostgres(t *testing.T) {
	if os.Getenv(pgEnv) == "" {
		t.Skipf("%s is not set; skipping the PostgreSQL run of the store suite (start one with scripts/pg.sh start <dir>)", pgEnv)
	}
	testStore(t, openPostgres)
}

// openSQLite opens a store on a fresh file in a temp dir (in a
// subdirectory that does not exist yet, which Open creates).
func openSQLite(t testing.TB) *DB {
	t.Helper()
	return openURL(t, filepath.Join(t.TempDir(), "data", "baton.db"))
}

// openPostgres opens a store in a fresh schema of the test database; the
// schema is dropped at cleanup.
func openPostgres(t testing.TB) *DB {
	t.Helper()
	return openURL(t, pgSchemaURL(t))
}

// pgSchemaURL creates a fresh schema in the test database and returns the
// URL of a store in it; the schema is dropped at cleanup.
func pgSchemaURL(t testing.TB) string {
	t.Helper()
	url := pgtest.Schema(t)
	db, err := Open(context.Background(), Options{URL: url}) // migrates
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	check, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	var where sql.NullString
	if err := check.QueryRow(`SELECT to_regclass(current_schema() || '.session_events')::text`).Scan(&where); err != nil || !where.Valid {
		t.Fatalf("tables not created in the URL's search_path schema (%v)", err)
	}
	return url
}

func openURL(t testing.TB, url string) *DB {
	t.Helper()
	db, err := Open(context.Background(), Options{URL: url})
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return db
}

// suiteCase is one case of the store conformance suite.
type suiteCase struct {
	name string
	fn   func(t *testing.T, db *DB)
}

// runCases runs each case as a subtest on a fresh, empty store from open.
func runCases(t *testing.T, open func(t testing.TB) *DB, cases []suiteCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(t, open(t)) })
	}
}

// testStore is the conformance suite every dialect must pass. Each case
// gets a fresh, empty store.
func testStore(t *testing.T, open func(t testing.TB) *DB) {
	runCases(t, open, []suiteCase{
		{"Open", testOpen},
		{"SchemaTooNew", testSchemaTooNew},
		{"Stats", testStats},
		{"ProfileRoundTrip", testProfileRoundTrip},
		{"ProfileDuplicateName", testProfileDuplicateName},
		{"ProfileNotFound", testProfileNotFound},
		{"ProfileReplace", testProfileReplace},
		{"ProfileDelete", testProfileDelete},
		{"ProfileList", testProfileList},
		{"BadCursor", testBadCursor},
		{"KeyRoundTrip", testKeyRoundTrip},
		{"KeyList", testKeyList},
		{"TouchKeys", testTouchKeys},
		{"RevokeAdminKeys", testRevokeAdminKeys},
		{"RevokeClientKey", testRevokeClientKey},
		{"RevokeClientKeyNotFound", testRevokeClientKeyNotFound},
		{"SessionRoundTrip", testSessionRoundTrip},
		{"SessionCreateAtomic", testSessionCreateAtomic},
		{"SessionList", testSessionList},
		{"JoinSession", testJoinSession},
		{"JoinSessionErrors", testJoinSessionErrors},
		{"EndSession", testEndSession},
		{"Append", testAppend},
		{"AppendUnknownSession", testAppendUnknownSession},
		{"AppendInvalidUTF8", testAppendInvalidUTF8},
		{"EventPages", testEventPages},
		{"EventPageBytes", testEventPageBytes},
		{"GroupCommit", testGroupCommit},
		{"ConcurrentAppend", testConcurrentAppend},
		{"FailingOpInBatch", testFailingOpInBatch},
		{"CommitFailure", testCommitFailure},
		{"ContextCancel", testContextCancel},
		{"Close", testClose},
		{"DeltaRoundTrip", testDeltaRoundTrip},
		{"DeltaUTF8", testDeltaUTF8},
		{"DeltaSameBatch", testDeltaSameBatch},
		{"DeltaRollback", testDeltaRollback},
		{"DeltaEviction", testDeltaEviction},
		{"DeltaCorrupt", testDeltaCorrupt},
		{"DeltaDown", testDeltaDown},
	})
}

func testOpen(t *testing.T, db *DB) {
	want := DialectSQLite
	if isPostgres(db.url) {
		want = DialectPostgres
	}
	if got := db.Dialect(); got != want {
		t.Errorf("Dialect() = %q, want %q", got, want)
	}
	v, err := db.SchemaVersion(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := lastMigration(t); v != want {
		t.Errorf("SchemaVersion() = %d, want %d", v, want)
	}
	// Reopening an up-to-date database applies nothing and keeps the data.
	p := mkProfile(t, db, "kept")
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	again := openURL(t, db.url)
	if _, err := again.Profile(context.Background(), p.ID); err != nil {
		t.Errorf("profile lost across reopen: %v", err)
	}
}

func testSchemaTooNew(t *testing.T, db *DB) {
	if _, err := db.write.Exec(`INSERT INTO goose_db_version (version_id, is_applied) VALUES (999, true)`); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := Open(context.Background(), Options{URL: db.url})
	if err == nil {
		_ = got.Close()
	}
	if !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("Open on a newer schema: err = %v, want ErrSchemaTooNew", err)
	}
}

func testStats(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	gone := mkProfile(t, db, "gone")
	if err := db.DeleteProfile(ctx, gone.ID); err != nil {
		t.Fatal(err)
	}
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	mkKey(t, db, baton.RoleAdmin, "")
	s1, _ := mkSession(t, db, ck)
	mkSession(t, db, ck)
	if _, err := db.EndSession(ctx, s1.ID, baton.StateClosed, newEvent(s1.ID, baton.EventSessionClose)); err != nil {
		t.Fatal(err)
	}
	got, err := db.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Each mkSession writes one event; the close one more.
	want := baton.Stats{Profiles: 1, ClientKeys: 1, OpenSessions: 1, Sessions: 2, Events: 3}
	if got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
}

// wantCode fails t unless err is a *baton.Error with code and message.
func wantCode(t *testing.T, err error, code, msg string) {
	t.Helper()
	var e *baton.Error
	if !errors.As(err, &e) {
		t.Fatalf("err = %v, want %s %q", err, code, msg)
	}
	if e.Code != code || e.Message != msg {
		t.Fatalf("err = %s %q, want %s %q", e.Code, e.Message, code, msg)
	}
}

func mkProfile(t *testing.T, db *DB, name string) *baton.Profile {
	t.Helper()
	p := &baton.Profile{Name: name, PrimaryProvider: "scripted"}
	if err := db.CreateProfile(context.Background(), p); err != nil {
		t.Fatalf("create profile %s: %v", name, err)
	}
	return p
}

func mkKey(t *testing.T, db *DB, role baton.KeyRole, profileID string) *baton.Key {
	t.Helper()
	k, _ := baton.MintKey(role, "k", profileID, "")
	if err := db.CreateKey(context.Background(), k); err != nil {
		t.Fatalf("create key: %v", err)
	}
	return k
}

// mkSession opens a session for client key ck, with its session key and a
// session.open event.
func mkSession(t *testing.T, db *DB, ck *baton.Key) (*baton.Session, *baton.Key) {
	t.Helper()
	s := &baton.Session{ID: baton.NewID(baton.PrefixSession), ClientKeyID: ck.ID, ProfileID: ck.ProfileID}
	sk, _ := baton.MintKey(baton.RoleSession, s.ID, ck.ProfileID, ck.ID)
	if err := db.CreateSession(context.Background(), s, sk, newEvent(s.ID, baton.EventSessionOpen)); err != nil {
		t.Fatalf("create session: %v", err)
	}
	return s, sk
}

func newEvent(sessionID, typ string) *baton.Event {
	return baton.NewEvent(sessionID, "", typ, map[string]string{"k": "v"})
}

// allEvents returns every event of a session.
func allEvents(t testing.TB, db *DB, sessionID string) []*baton.Event {
	t.Helper()
	evs, err := db.EventsAfter(context.Background(), sessionID, 0, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	return evs
}

// seqs returns the Seq of each event.
func seqs(evs []*baton.Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}

func oneTo(n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = int64(i + 1)
	}
	return out
}

// holdWriter occupies the writer with a request that blocks until the
// returned release function is called, so that requests submitted
// meanwhile queue up and form the next batch.
func holdWriter(t *testing.T, db *DB) (release func()) {
	t.Helper()
	entered, rel, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var once sync.Once
	go func() {
		defer close(done)
		_ = db.w.do(context.Background(), func(*wtx) error {
			once.Do(func() { close(entered) })
			<-rel
			return nil
		})
	}()
	<-entered
	var relOnce sync.Once
	release = func() {
		relOnce.Do(func() {
			close(rel)
			<-done
		})
	}
	t.Cleanup(release)
	return release
}

// inOneBatch runs ops, which each make one writer request, so that they
// queue up in order behind a held writer and commit in one batch; it
// returns their errors. It fails the test if they took more than one.
func inOneBatch(t *testing.T, db *DB, ops ...func() error) []error {
	t.Helper()
	release := holdWriter(t, db)
	before := db.w.batches.Load()
	errs := make([]error, len(ops))
	var wg sync.WaitGroup
	for i, op := range ops {
		wg.Go(func() { errs[i] = op() })
		waitQueued(t, db, i+1) // fixes the order inside the batch
	}
	release()
	wg.Wait()
	if n := db.w.batches.Load() - before; n != 1 {
		t.Errorf("%d queued requests took %d batches, want 1", len(ops), n)
	}
	return errs
}

// commitFailer returns a writer request that makes its whole batch fail
// at COMMIT: a deferred foreign key is checked only then, in both
// dialects.
func commitFailer(t *testing.T, db *DB) func() error {
	t.Helper()
	if _, err := db.write.Exec(`CREATE TABLE commit_fail (
	sid TEXT REFERENCES sessions (id) DEFERRABLE INITIALLY DEFERRED)`); err != nil {
		t.Fatal(err)
	}
	return func() error {
		return db.w.do(context.Background(), func(t *wtx) error {
			_, err := t.exec(`INSERT INTO commit_fail (sid) VALUES ('ses_nowhere')`)
			return err
		})
	}
}

// waitQueued waits until n requests wait in the writer's queue.
func waitQueued(t *testing.T, db *DB, n int) {
	t.Helper()
	for len(db.w.queue) < n {
		if t.Context().Err() != nil {
			t.Fatal("test ended while waiting for queued requests")
		}
		runtime.Gosched()
	}
}

// TestSQLiteSettings checks the connection settings the durability and
// concurrency arguments rest on, and the accepted URL forms.
func TestSQLiteSettings(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "nested", "dirs", "baton.db")
	db := openURL(t, "file:"+path+"?cache=private")
	if db.Dialect() != DialectSQLite {
		t.Fatalf("Dialect() = %q", db.Dialect())
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("database file not at the URL's path: %v", err)
	}
	for _, c := range []struct {
		conn  *sql.DB
		query string
		want  string
	}{
		{db.write, "PRAGMA journal_mode", "wal"},
		{db.write, "PRAGMA synchronous", "2"}, // FULL
		{db.write, "PRAGMA foreign_keys", "1"},
		{db.write, "PRAGMA busy_timeout", "10000"},
		{db.read, "PRAGMA query_only", "1"},
		{db.read, "PRAGMA busy_timeout", "10000"},
	} {
		var got string
		if err := c.conn.QueryRow(c.query).Scan(&got); err != nil {
			t.Fatalf("%s: %v", c.query, err)
		}
		if got != c.want {
			t.Errorf("%s = %q, want %q", c.query, got, c.want)
		}
	}
	if _, err := db.read.Exec(`DELETE FROM profiles`); err == nil {
		t.Error("reader pool accepted a write")
	}
	if n := db.write.Stats().MaxOpenConnections; n != 1 {
		t.Errorf("writer pool allows %d connections, want 1", n)
	}
	for _, url := range []string{"", ":memory:", "file::memory:"} {
		if got, err := Open(context.Background(), Options{URL: url}); err == nil {
			_ = got.Close()
			t.Errorf("Open(%q) succeeded", url)
		}
	}
}
