package store

import (
	"context"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

func TestReceiptsSQLite(t *testing.T) { testReceipts(t, openSQLite) }

func TestReceiptsPostgres(t *testing.T) {
	if os.Getenv(pgEnv) == "" {
		t.Skipf("%s is not set; skipping the PostgreSQL run of the receipt suite", pgEnv)
	}
	testReceipts(t, openPostgres)
}

// testReceipts is the receipt part of the store conformance suite.
func testReceipts(t *testing.T, open func(t testing.TB) *DB) {
	runCases(t, open, []suiteCase{
		{"Lifecycle", testReceiptLifecycle},
		{"Abandon", testReceiptAbandon},
		{"Concurrent", testReceiptConcurrent},
		{"StaleTakeover", testReceiptStaleTakeover},
		{"Sweep", testReceiptSweep},
		{"SurvivesReopen", testReceiptReopen},
	})
}

func testReceiptLifecycle(t *testing.T, db *DB) {
	ctx := context.Background()
	r, fresh, err := db.BeginReceipt(ctx, "scope-a", "k1", "fp1")
	if err != nil || !fresh {
		t.Fatalf("first begin: fresh=%v err=%v", fresh, err)
	}
	if r.State != baton.ReceiptInFlight || r.Fingerprint != "fp1" {
		t.Fatalf("first begin receipt = %+v", r)
	}
	// While in flight, the same key is not fresh and reports in_flight.
	r, fresh, err = db.BeginReceipt(ctx, "scope-a", "k1", "fp1")
	if err != nil || fresh || r.State != baton.ReceiptInFlight {
		t.Fatalf("begin while in flight: %+v fresh=%v err=%v", r, fresh, err)
	}
	body := []byte(`{"id":"x","bin":"\u0000"}` + "\x00\xff")
	if err := db.CompleteReceipt(ctx, "scope-a", "k1", 201, "application/json", body); err != nil {
		t.Fatal(err)
	}
	// Completing twice is not found: only an in-flight receipt completes.
	if err := db.CompleteReceipt(ctx, "scope-a", "k1", 201, "application/json", body); baton.ErrorCode(err) != baton.ECodeNotFound {
		t.Fatalf("second complete: %v, want not_found", err)
	}
	r, fresh, err = db.BeginReceipt(ctx, "scope-a", "k1", "fp-other")
	if err != nil || fresh {
		t.Fatalf("begin after done: fresh=%v err=%v", fresh, err)
	}
	if r.CompletedAt == nil || r.CompletedAt.Before(r.CreatedAt) {
		t.Fatalf("completed_at = %v, created_at %v", r.CompletedAt, r.CreatedAt)
	}
	want := &baton.Receipt{Scope: "scope-a", Key: "k1", Fingerprint: "fp1", State: baton.ReceiptDone,
		Status: 201, ContentType: "application/json", Body: body, CreatedAt: r.CreatedAt, CompletedAt: r.CompletedAt}
	if diff := cmp.Diff(want, r); diff != "" {
		t.Fatalf("done receipt (-want +got):\n%s", diff)
	}
	// Another scope or another key is independent.
	for _, sk := range [][2]string{{"scope-b", "k1"}, {"scope-a", "k2"}} {
		if _, fresh, err := db.BeginReceipt(ctx, sk[0], sk[1], "fp1"); err != nil || !fresh {
			t.Fatalf("begin %v: fresh=%v err=%v", sk, fresh, err)
		}
	}
}

func testReceiptAbandon(t *testing.T, db *DB) {
	ctx := context.Background()
	if _, _, err := db.BeginReceipt(ctx, "s", "k", "fp"); err != nil {
		t.Fatal(err)
	}
	if err := db.AbandonReceipt(ctx, "s", "k"); err != nil {
		t.Fatal(err)
	}
	if _, fresh, err := db.BeginReceipt(ctx, "s", "k", "fp2"); err != nil || !fresh {
		t.Fatalf("begin after abandon: fresh=%v err=%v", fresh, err)
	}
	if err := db.CompleteReceipt(ctx, "s", "k", 200, "", nil); err != nil {
		t.Fatal(err)
	}
	// A done receipt is not abandoned.
	if err := db.AbandonReceipt(ctx, "s", "k"); err != nil {
		t.Fatal(err)
	}
	r, fresh, err := db.BeginReceipt(ctx, "s", "k", "fp2")
	if err != nil || fresh || r.State != baton.ReceiptDone || r.Status != 200 || len(r.Body) != 0 {
		t.Fatalf("after abandoning a done receipt: %+v fresh=%v err=%v", r, fresh, err)
	}
}

func testReceiptConcurrent(t *testing.T, db *DB) {
	ctx := context.Background()
	const n = 32
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		fresh int
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, f, err := db.BeginReceipt(ctx, "s", "same", "fp")
			if err != nil {
				t.Error(err)
				return
			}
			if f {
				mu.Lock()
				fresh++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if fresh != 1 {
		t.Fatalf("%d of %d concurrent begins were fresh, want exactly 1", fresh, n)
	}
}

func testReceiptStaleTakeover(t *testing.T, db *DB) {
	ctx := context.Background()
	if _, _, err := db.BeginReceipt(ctx, "s", "k", "old"); err != nil {
		t.Fatal(err)
	}
	// Age it past StaleReceipt, as a node that crashed mid-request leaves it.
	old := formatTime(baton.Now().Add(-StaleReceipt - time.Minute))
	if _, err := db.write.Exec(`UPDATE idempotency_receipts SET created_at = $1`, old); err != nil {
		t.Fatal(err)
	}
	r, fresh, err := db.BeginReceipt(ctx, "s", "k", "new")
	if err != nil || !fresh || r.Fingerprint != "new" {
		t.Fatalf("stale in-flight receipt not taken over: %+v fresh=%v err=%v", r, fresh, err)
	}
	if _, fresh, _ := db.BeginReceipt(ctx, "s", "k", "new"); fresh {
		t.Fatal("a taken-over receipt is fresh again")
	}
}

func testReceiptSweep(t *testing.T, db *DB) {
	ctx := context.Background()
	for _, k := range []string{"old", "new", "busy"} {
		if _, _, err := db.BeginReceipt(ctx, "s", k, "fp"); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"old", "new"} {
		if err := db.CompleteReceipt(ctx, "s", k, 201, "application/json", []byte(`{}`)); err != nil {
			t.Fatal(err)
		}
	}
	long := formatTime(baton.Now().Add(-8 * 24 * time.Hour))
	if _, err := db.write.Exec(`UPDATE idempotency_receipts SET created_at = $1, completed_at = $1 WHERE idem_key = 'old'`, long); err != nil {
		t.Fatal(err)
	}
	n, err := db.SweepReceipts(ctx, baton.Now().Add(-7*24*time.Hour))
	if err != nil || n != 1 {
		t.Fatalf("sweep = %d, %v; want 1", n, err)
	}
	// The swept key executes again; the recent and the in-flight ones stay.
	got := map[string]bool{}
	for _, k := range []string{"old", "new", "busy"} {
		_, fresh, err := db.BeginReceipt(ctx, "s", k, "fp")
		if err != nil {
			t.Fatal(err)
		}
		got[k] = fresh
	}
	if diff := cmp.Diff(map[string]bool{"old": true, "new": false, "busy": false}, got); diff != "" {
		t.Fatalf("fresh after sweep (-want +got):\n%s", diff)
	}
	// A cutoff in the future removes every done receipt and any in-flight
	// one created before it.
	if n, err := db.SweepReceipts(ctx, baton.Now().Add(time.Hour)); err != nil || n != 3 {
		t.Fatalf("sweep all = %d, %v; want 3", n, err)
	}
}

func testReceiptReopen(t *testing.T, db *DB) {
	ctx := context.Background()
	if _, _, err := db.BeginReceipt(ctx, "s", "k", "fp"); err != nil {
		t.Fatal(err)
	}
	if err := db.CompleteReceipt(ctx, "s", "k", 409, "application/problem+json", []byte(`{"a":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	again := openURL(t, db.url)
	r, fresh, err := again.BeginReceipt(ctx, "s", "k", "fp")
	if err != nil || fresh || r.Status != 409 || string(r.Body) != `{"a":1}` || r.ContentType != "application/problem+json" {
		t.Fatalf("receipt after reopen: %+v fresh=%v err=%v", r, fresh, err)
	}
}

// lastMigration is the version of the newest embedded SQLite migration
// (both dialects carry the same versions).
func lastMigration(t *testing.T) int64 {
	t.Helper()
	entries, err := fs.ReadDir(migrations, "migrations/sqlite")
	if err != nil {
		t.Fatal(err)
	}
	var last int64
	for _, e := range entries {
		v, _, _ := strings.Cut(e.Name(), "_")
		n, err := strconv.ParseInt(v, 10, 64)
		if err == nil && n > last {
			last = n
		}
	}
	return last
}
