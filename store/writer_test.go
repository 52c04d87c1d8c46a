package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

// testGroupCommit checks that requests queued while the writer is busy are
// committed together, in one transaction.
func testGroupCommit(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	var sessions []string
	for range 5 {
		s, _ := mkSession(t, db, ck)
		sessions = append(sessions, s.ID)
	}

	release := holdWriter(t, db)
	before := db.w.batches.Load()
	const n = 50
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- db.Append(ctx, newEvent(sessions[i%len(sessions)], "x")) }()
	}
	waitQueued(t, db, n)
	release()
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := db.w.batches.Load() - before; got != 1 {
		t.Errorf("%d queued appends took %d transactions, want 1", n, got)
	}
	for _, sid := range sessions {
		if diff := cmp.Diff(oneTo(11), seqs(allEvents(t, db, sid))); diff != "" {
			t.Errorf("session %s seqs (-want +got):\n%s", sid, diff)
		}
	}
}

// testConcurrentAppend hammers the writer from many goroutines, some
// appending to several sessions per call, and checks every session's log
// is numbered 1..n without gaps or duplicates, matching what the callers
// were told.
func testConcurrentAppend(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	const nSessions, workers, perWorker = 20, 100, 15
	var sessions []string
	for range nSessions {
		s, _ := mkSession(t, db, ck)
		sessions = append(sessions, s.ID)
	}
	type ack struct {
		session string
		seq     int64
	}
	var (
		mu    sync.Mutex
		acked = map[ack]string{} // → event id
		wg    sync.WaitGroup
	)
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				evs := []*baton.Event{newEvent(sessions[(w+i)%nSessions], "x")}
				if i%5 == 0 { // sometimes two sessions in one call
					evs = append(evs, newEvent(sessions[(w+i+1)%nSessions], "y"))
				}
				if err := db.Append(ctx, evs...); err != nil {
					errs <- err
					return
				}
				mu.Lock()
				for _, e := range evs {
					k := ack{e.SessionID, e.Seq}
					if prev, dup := acked[k]; dup {
						t.Errorf("seq %d of %s handed out twice (%s, %s)", e.Seq, e.SessionID, prev, e.ID)
					}
					acked[k] = e.ID
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	total := 0
	for _, sid := range sessions {
		evs := allEvents(t, db, sid)
		total += len(evs) - 1
		if diff := cmp.Diff(oneTo(len(evs)), seqs(evs)); diff != "" {
			t.Errorf("session %s seqs (-want +got):\n%s", sid, diff)
		}
		for _, e := range evs[1:] {
			if id, ok := acked[ack{sid, e.Seq}]; !ok || id != e.ID {
				t.Errorf("stored %s seq %d id %s, acknowledged id %q", sid, e.Seq, e.ID, id)
			}
		}
	}
	if want := workers * perWorker * 6 / 5; total != want || len(acked) != want {
		t.Errorf("stored %d events, acknowledged %d, want %d", total, len(acked), want)
	}
}

// testFailingOpInBatch queues successful and failing requests into one
// batch: each failure is reported to its caller alone, and the others
// commit with gap-free numbering, including after a failure that forces
// the batch to be rerun with savepoints.
func testFailingOpInBatch(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "taken")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	s1, sk := mkSession(t, db, ck)
	s2, _ := mkSession(t, db, ck)
	sc, _ := mkSession(t, db, ck)
	if _, err := db.EndSession(ctx, sc.ID, baton.StateClosed, nil); err != nil {
		t.Fatal(err)
	}

	ghostPair := []*baton.Event{newEvent(s2.ID, "x.half"), newEvent("ses_ghost", "x.ghost")}
	fresh := &baton.Profile{Name: "fresh", PrimaryProvider: "p"}
	dupKey := *sk
	dupKey.Hash = baton.Digest("another")
	ops := []func() error{
		func() error { return db.Append(ctx, newEvent(s1.ID, "x.1")) },
		func() error { return db.CreateProfile(ctx, &baton.Profile{Name: "taken", PrimaryProvider: "p"}) },
		func() error { return db.CreateKey(ctx, &dupKey) }, // fails in the database
		func() error { return db.Append(ctx, newEvent(s1.ID, "x.2")) },
		func() error {
			return db.JoinSession(ctx, sc.ID, baton.Participant{ClientKeyID: ck.ID}, nil, newEvent("", "x.join"))
		},
		func() error { return db.Append(ctx, ghostPair...) }, // fails after writing
		func() error { return db.CreateProfile(ctx, fresh) },
		func() error { return db.Append(ctx, newEvent(s2.ID, "x.3")) },
	}
	results := inOneBatch(t, db, ops...)

	for _, i := range []int{0, 3, 6, 7} {
		if results[i] != nil {
			t.Errorf("op %d failed: %v", i, results[i])
		}
	}
	wantCode(t, results[1], baton.ECodeDuplicateName, "a profile with that name already exists")
	if results[2] == nil || baton.ErrorCode(results[2]) != baton.ECodeInternal {
		t.Errorf("duplicate key id: err = %v, want an internal error", results[2])
	}
	wantCode(t, results[4], baton.ECodeSessionClosed, "session is already closed")
	wantCode(t, results[5], baton.ECodeNotFound, "no session ses_ghost")
	if ghostPair[0].Seq != 0 {
		t.Errorf("event of a failed append kept seq %d", ghostPair[0].Seq)
	}

	if diff := cmp.Diff(oneTo(3), seqs(allEvents(t, db, s1.ID))); diff != "" {
		t.Errorf("s1 seqs (-want +got):\n%s", diff)
	}
	s2Events := allEvents(t, db, s2.ID)
	if diff := cmp.Diff(oneTo(2), seqs(s2Events)); diff != "" {
		t.Errorf("s2 seqs (-want +got):\n%s", diff)
	}
	if s2Events[1].Type != "x.3" {
		t.Errorf("s2 second event is %s, want x.3 (the failed call's event must be gone)", s2Events[1].Type)
	}
	if _, err := db.Profile(ctx, fresh.ID); err != nil {
		t.Errorf("profile created in the batch: %v", err)
	}
	if n := len(allEvents(t, db, sc.ID)); n != 1 {
		t.Errorf("failed join appended to the closed session: %d events", n)
	}
	if _, err := db.KeyByHash(ctx, baton.RoleSession, dupKey.Hash); err == nil {
		t.Error("duplicate key stored")
	}
}

// testCommitFailure makes the commit itself fail: every request of the
// batch gets the error and no cached sequence number survives it.
func testCommitFailure(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	s, _ := mkSession(t, db, ck)
	first := newEvent(s.ID, "x.1")
	results := inOneBatch(t, db,
		func() error { return db.Append(ctx, first) },
		commitFailer(t, db),
		func() error { return db.Append(ctx, newEvent(s.ID, "x.2")) },
	)
	for i, err := range results {
		if err == nil || baton.ErrorCode(err) != baton.ECodeInternal {
			t.Errorf("op %d: err = %v, want the commit error", i, err)
		}
	}
	if first.Seq != 0 {
		t.Errorf("event of the failed commit kept seq %d", first.Seq)
	}
	ev := newEvent(s.ID, "x.after")
	if err := db.Append(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if ev.Seq != 2 {
		t.Errorf("seq after a failed commit = %d, want 2 (stale cache)", ev.Seq)
	}
	if diff := cmp.Diff(oneTo(2), seqs(allEvents(t, db, s.ID))); diff != "" {
		t.Errorf("seqs (-want +got):\n%s", diff)
	}
}

// testContextCancel checks that a caller whose context ends while its
// request is queued gets the context's error and the request never runs.
func testContextCancel(t *testing.T, db *DB) {
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	s, _ := mkSession(t, db, ck)

	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := db.Append(cctx, newEvent(s.ID, "x.pre")); !errors.Is(err, context.Canceled) {
		t.Errorf("Append with a cancelled ctx: err = %v", err)
	}
	if err := db.CreateProfile(cctx, &baton.Profile{Name: "never", PrimaryProvider: "p"}); !errors.Is(err, context.Canceled) {
		t.Errorf("CreateProfile with a cancelled ctx: err = %v", err)
	}

	release := holdWriter(t, db)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- db.Append(ctx, newEvent(s.ID, "x.cancelled")) }()
	waitQueued(t, db, 1)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("Append cancelled while queued: err = %v", err)
	}
	release()

	ev := newEvent(s.ID, "x.after")
	if err := db.Append(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	evs := allEvents(t, db, s.ID)
	if diff := cmp.Diff(oneTo(2), seqs(evs)); diff != "" {
		t.Errorf("seqs (-want +got):\n%s", diff)
	}
	for _, e := range evs {
		if e.Type == "x.cancelled" || e.Type == "x.pre" {
			t.Errorf("cancelled append was written: %+v", e)
		}
	}
	list, _, err := db.ListProfiles(context.Background(), baton.Page{})
	if err != nil || len(list) != 1 {
		t.Errorf("profiles = %v, %v; want only p", list, err)
	}
}

// testClose checks that Close commits what is already queued and that
// later writes fail with ErrClosed.
func testClose(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	s, _ := mkSession(t, db, ck)

	release := holdWriter(t, db)
	const n = 3
	errs := make(chan error, n)
	for i := range n {
		go func() { errs <- db.Append(ctx, newEvent(s.ID, fmt.Sprintf("x.%d", i))) }()
	}
	waitQueued(t, db, n)
	closed := make(chan error, 1)
	go func() { closed <- db.Close() }()
	<-db.w.quit // Close has begun
	release()
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("append queued before Close: %v", err)
		}
	}
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if err := db.Append(ctx, newEvent(s.ID, "x.late")); !errors.Is(err, ErrClosed) {
		t.Errorf("Append after Close: err = %v, want ErrClosed", err)
	}
	if err := db.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	again := openURL(t, db.url)
	if diff := cmp.Diff(oneTo(n+1), seqs(allEvents(t, again, s.ID))); diff != "" {
		t.Errorf("seqs after reopen (-want +got):\n%s", diff)
	}
}

// TestSQLiteCheckpointer checks that committed work kicks the background
// checkpointer, and that its checkpoint leaves every committed event in
// the database file itself, readable with the WAL ignored.
func TestSQLiteCheckpointer(t *testing.T) {
	db := openSQLite(t)
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	const sessions, perCall = 16, 8
	var ids []string
	for range sessions {
		s, _ := mkSession(t, db, ck)
		ids = append(ids, s.ID)
	}
	if n := db.w.ckpt.runs.Load(); n != 0 {
		t.Fatalf("%d checkpoints before any load", n)
	}
	var backstop string
	if err := db.write.QueryRow(`PRAGMA wal_autocheckpoint`).Scan(&backstop); err != nil || backstop != sqliteWALFrames {
		t.Fatalf("writer wal_autocheckpoint = %q (%v), want %s", backstop, err, sqliteWALFrames)
	}

	// Enough appends for more than checkpointEvery units of work.
	calls := checkpointEvery/perCall/sessions + 1
	var wg sync.WaitGroup
	errs := make(chan error, sessions)
	for _, sid := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range calls {
				evs := make([]*baton.Event, perCall)
				for i := range evs {
					evs[i] = newEvent(sid, "x")
				}
				if err := db.Append(ctx, evs...); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	waitCheckpoints(t, db, 1)

	// Once the writer is idle, a checkpoint copies the whole WAL.
	db.w.ckpt.kick()
	waitCheckpoints(t, db, 2)
	frames, copied := db.w.ckpt.frames.Load(), db.w.ckpt.copied.Load()
	if frames == 0 || copied != frames {
		t.Fatalf("idle checkpoint copied %d of %d WAL frames", copied, frames)
	}
	file, err := sql.Open("sqlite", "file:"+db.url+"?mode=ro&immutable=1")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	var n int
	if err := file.QueryRow(`SELECT COUNT(*) FROM session_events`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if want := sessions * (calls*perCall + 1); n != want { // +1: session.open
		t.Errorf("database file holds %d events, want %d", n, want)
	}
}

// waitCheckpoints waits until the checkpointer has run n times.
func waitCheckpoints(t *testing.T, db *DB, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for db.w.ckpt.runs.Load() < n {
		if time.Now().After(deadline) {
			t.Fatalf("checkpointer ran %d times, want %d", db.w.ckpt.runs.Load(), n)
		}
		runtime.Gosched()
	}
}
