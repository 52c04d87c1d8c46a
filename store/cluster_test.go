package store

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

// cluster is nodes sharing one fresh PostgreSQL schema, each a store
// opened in cluster mode with its own node id.
type cluster struct {
	url   string
	nodes map[string]*DB
}

func newCluster(t *testing.T, ids ...string) *cluster {
	t.Helper()
	if os.Getenv(pgEnv) == "" {
		t.Skipf("%s is not set; the cluster tests need PostgreSQL (start one with scripts/pg.sh start <dir>)", pgEnv)
	}
	c := &cluster{url: pgSchemaURL(t), nodes: make(map[string]*DB)}
	for _, id := range ids {
		c.nodes[id] = c.open(t, id)
	}
	return c
}

func (c *cluster) open(t *testing.T, node string) *DB {
	t.Helper()
	db, err := Open(context.Background(), Options{URL: c.url, NodeID: node, LeaseTTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := db.Close(); err != nil {
			t.Errorf("close %s: %v", node, err)
		}
	})
	return db
}

// session creates an open session on db, which then owns it at epoch 1.
func clusterSession(t *testing.T, db *DB) string {
	t.Helper()
	s := &baton.Session{ClientKeyID: "key_c", ProfileID: "pro_c"}
	if err := db.CreateSession(context.Background(), s, nil, newEvent("", baton.EventSessionOpen)); err != nil {
		t.Fatal(err)
	}
	return s.ID
}

// expire moves a session's lease into the past, by the database's clock,
// as if its holder had stopped renewing it.
func expire(t *testing.T, db *DB, sessionID string) {
	t.Helper()
	if _, err := db.write.Exec(`UPDATE session_leases SET expires_at = now() - interval '1 second' WHERE session_id = $1`, sessionID); err != nil {
		t.Fatal(err)
	}
}

func acquire(t *testing.T, db *DB, sessionID string) baton.Lease {
	t.Helper()
	l, ok, err := db.AcquireLease(context.Background(), sessionID, db.node, time.Minute)
	if err != nil || !ok {
		t.Fatalf("%s acquire %s: ok=%v err=%v (holder %+v)", db.node, sessionID, ok, err, l)
	}
	db.Own(sessionID, l.Epoch)
	return l
}

func TestClusterLeases(t *testing.T) {
	c := newCluster(t, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	ctx := context.Background()
	for _, n := range []*baton.Node{{ID: "a", AdvertiseURL: "http://a:1", Version: "v1"}, {ID: "b", AdvertiseURL: "http://b:2", Version: "v1"}} {
		if err := a.RegisterNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	sid := clusterSession(t, a)

	// The opener holds it at epoch 1; another node is told who does.
	l, err := b.LeaseHolder(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if l.NodeID != "a" || l.Epoch != 1 || !l.Live || l.AdvertiseURL != "http://a:1" {
		t.Fatalf("holder after open = %+v, want a at epoch 1, live, http://a:1", l)
	}
	held, ok, err := b.AcquireLease(ctx, sid, "b", time.Minute)
	if err != nil || ok {
		t.Fatalf("b acquiring a live lease of a: ok=%v err=%v", ok, err)
	}
	if held.NodeID != "a" || held.Epoch != 1 || held.AdvertiseURL != "http://a:1" {
		t.Errorf("b was told the holder is %+v", held)
	}

	// Taking back one's own lease bumps the epoch too.
	if l := acquire(t, a, sid); l.Epoch != 2 || !l.Live {
		t.Errorf("a re-acquiring: %+v, want epoch 2, live", l)
	}
	renewed, err := a.RenewLeases(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if len(renewed) != 1 || renewed[0].SessionID != sid || renewed[0].Epoch != 2 {
		t.Errorf("a renewed %+v, want %s at epoch 2", renewed, sid)
	}

	// A released lease is not renewed, and another node takes it at once.
	if ok, err := a.ReleaseLease(ctx, sid, "a", 1); err != nil || ok {
		t.Errorf("release at a stale epoch: ok=%v err=%v, want false", ok, err)
	}
	if ok, err := a.ReleaseLease(ctx, sid, "a", 2); err != nil || !ok {
		t.Fatalf("release: ok=%v err=%v", ok, err)
	}
	if renewed, err := a.RenewLeases(ctx, "a", time.Minute); err != nil || len(renewed) != 0 {
		t.Errorf("a renewed %+v after releasing (err %v), want nothing", renewed, err)
	}
	if l := acquire(t, b, sid); l.Epoch != 3 || l.NodeID != "b" {
		t.Errorf("b taking over: %+v, want epoch 3", l)
	}
	if _, ok, err := a.AcquireLease(ctx, sid, "a", time.Minute); err != nil || ok {
		t.Errorf("a acquiring b's live lease: ok=%v err=%v", ok, err)
	}

	// An expired lease is taken over; expiry is the database's clock.
	expire(t, b, sid)
	if l := acquire(t, a, sid); l.Epoch != 4 || l.NodeID != "a" {
		t.Errorf("a taking over the expired lease: %+v, want epoch 4", l)
	}
	// A TTL of 0 grants a lease that is already expired.
	l0, ok, err := b.AcquireLease(ctx, sid, "b", 0)
	if err != nil || ok {
		t.Fatalf("b acquiring a's live lease with ttl 0: ok=%v err=%v", ok, err)
	}
	expire(t, a, sid)
	if l0, ok, err = b.AcquireLease(ctx, sid, "b", 0); err != nil || !ok || l0.Live || l0.Epoch != 5 {
		t.Fatalf("acquire with ttl 0 = %+v ok=%v err=%v, want epoch 5, not live", l0, ok, err)
	}
	if l := acquire(t, a, sid); l.Epoch != 6 {
		t.Errorf("a after b's ttl-0 lease: epoch %d, want 6", l.Epoch)
	}

	if _, _, err := a.AcquireLease(ctx, "ses_nowhere", "a", time.Minute); baton.ErrorCode(err) != baton.ECodeNotFound {
		t.Errorf("acquire on a missing session: %v, want not_found", err)
	}
	if _, err := a.LeaseHolder(ctx, "ses_nowhere"); baton.ErrorCode(err) != baton.ECodeNotFound {
		t.Errorf("holder of a missing session: %v, want not_found", err)
	}

	// The registry counts live leases and reports heartbeat ages by the
	// database's clock.
	clusterSession(t, b)
	if err := b.SetDraining(ctx, "b", true); err != nil {
		t.Fatal(err)
	}
	if _, err := b.write.Exec(`UPDATE nodes SET heartbeat_at = now() - interval '1 hour' WHERE id = 'b'`); err != nil {
		t.Fatal(err)
	}
	nodes, err := a.Nodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		ID, URL  string
		Draining bool
		Sessions int
		Stale    bool
	}
	var got []row
	for _, n := range nodes {
		got = append(got, row{n.ID, n.AdvertiseURL, n.Draining, n.Sessions, n.HeartbeatAge > 30*time.Minute})
	}
	want := []row{{"a", "http://a:1", false, 1, false}, {"b", "http://b:2", true, 1, true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Nodes (-want +got):\n%s", diff)
	}
	if err := a.HeartbeatNode(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if nodes, _ = a.Nodes(ctx); nodes[1].HeartbeatAge > 30*time.Minute {
		t.Errorf("heartbeat did not refresh: age %v", nodes[1].HeartbeatAge)
	}

	// Removing a node expires its leases, keeping their epochs.
	if err := a.RemoveNode(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if err := a.HeartbeatNode(ctx, "a"); baton.ErrorCode(err) != baton.ECodeNotFound {
		t.Errorf("heartbeat of a removed node: %v, want not_found", err)
	}
	if err := a.RemoveNode(ctx, "a"); baton.ErrorCode(err) != baton.ECodeNotFound {
		t.Errorf("removing a removed node: %v, want not_found", err)
	}
	if l := acquire(t, b, sid); l.Epoch != 7 {
		t.Errorf("b taking over the removed node's lease: epoch %d, want 7", l.Epoch)
	}
}

// TestClusterSQLite checks the cluster methods say SQLite has no cluster,
// and that cluster mode does not fence SQLite appends.
func TestClusterSQLite(t *testing.T) {
	db, err := Open(context.Background(), Options{URL: t.TempDir() + "/b.db", NodeID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, _, err := db.AcquireLease(context.Background(), "ses_x", "a", time.Second); baton.ErrorCode(err) != baton.ECodeUnavailable {
		t.Errorf("AcquireLease on SQLite: %v, want unavailable", err)
	}
	if _, err := NewListener(db, ListenerOptions{OnNotice: func(Notice) {}}); baton.ErrorCode(err) != baton.ECodeUnavailable {
		t.Errorf("NewListener on SQLite: %v, want unavailable", err)
	}
	sid := clusterSession(t, db)
	if err := db.Append(context.Background(), newEvent(sid, "x")); err != nil {
		t.Errorf("append on SQLite with a node id: %v", err)
	}
}

// wantLeaseLost fails t unless err is the fence's refusal.
func wantLeaseLost(t *testing.T, err error, what string) {
	t.Helper()
	if baton.ErrorCode(err) != baton.ECodeLeaseLost {
		t.Errorf("%s: err = %v, want %s", what, err, baton.ECodeLeaseLost)
	}
}

// TestClusterFencing: node a owns two sessions; b takes one over after its
// lease expired. In one batch of a's, the append to the lost session is
// refused and nothing of it is stored, while the other session's append
// commits.
func TestClusterFencing(t *testing.T) {
	c := newCluster(t, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	ctx := context.Background()
	lost, kept := clusterSession(t, a), clusterSession(t, a)
	if err := a.Append(ctx, newEvent(lost, "a.before")); err != nil {
		t.Fatal(err)
	}

	expire(t, a, lost)
	if l := acquire(t, b, lost); l.Epoch != 2 {
		t.Fatalf("takeover epoch %d, want 2", l.Epoch)
	}
	// a still believes it owns lost at epoch 1: its batch checks the
	// leases once before COMMIT, finds the move, and reruns per session.
	late, other := newEvent(lost, "a.after"), newEvent(kept, "a.kept")
	errs := inOneBatch(t, a,
		func() error { return a.Append(ctx, late) },
		func() error { return a.Append(ctx, other) },
	)
	wantLeaseLost(t, errs[0], "a's append after the takeover")
	if errs[1] != nil {
		t.Errorf("a's append to the session it still owns: %v", errs[1])
	}
	if late.Seq != 0 {
		t.Errorf("refused event kept seq %d", late.Seq)
	}
	if err := b.Append(ctx, newEvent(lost, "b.first")); err != nil {
		t.Fatal(err)
	}
	var types []string
	for _, e := range allEvents(t, b, lost) {
		types = append(types, e.Type)
	}
	if diff := cmp.Diff([]string{baton.EventSessionOpen, "a.before", "b.first"}, types); diff != "" {
		t.Errorf("log of the lost session (-want +got):\n%s", diff)
	}
	if evs := allEvents(t, a, kept); len(evs) != 2 || evs[1].Type != "a.kept" {
		t.Errorf("kept session's log: %d events", len(evs))
	}

	// Once a's fence knows the row moved, a lone append is refused too
	// (the savepoint path), as is one to a session a never owned, and one
	// after Disown.
	wantLeaseLost(t, a.Append(ctx, newEvent(lost, "a.again")), "a's second append after the takeover")
	wantLeaseLost(t, a.Append(ctx, newEvent(clusterSession(t, b), "a.stranger")), "a's append to b's session")
	a.Disown(kept)
	wantLeaseLost(t, a.Append(ctx, newEvent(kept, "a.disowned")), "append after Disown")

	// a takes lost back: Own dropped its cached seq (b appended since), so
	// its next event follows b's.
	expire(t, b, lost)
	acquire(t, a, lost)
	back := newEvent(lost, "a.back")
	if err := a.Append(ctx, back); err != nil {
		t.Fatalf("append after taking the session back: %v", err)
	}
	if back.Seq != 4 {
		t.Errorf("a's append after taking back: seq %d, want 4", back.Seq)
	}
	wantLeaseLost(t, b.Append(ctx, newEvent(lost, "b.late")), "b's append after a took the session back")

	// The same with a's cached seq still loaded: a appended, then lost
	// the session without trying to append, and b appended meanwhile.
	s2 := clusterSession(t, a)
	if err := a.Append(ctx, newEvent(s2, "a.1")); err != nil {
		t.Fatal(err)
	}
	expire(t, a, s2)
	acquire(t, b, s2)
	if err := b.Append(ctx, newEvent(s2, "b.1")); err != nil {
		t.Fatal(err)
	}
	expire(t, b, s2)
	acquire(t, a, s2)
	again := newEvent(s2, "a.2")
	retries := a.w.retries.Load()
	if err := a.Append(ctx, again); err != nil || again.Seq != 4 {
		t.Errorf("a's append after re-owning: seq %d, err %v; want seq 4", again.Seq, err)
	}
	// A stale seq would only have been caught by the primary key, at the
	// cost of rerunning the batch.
	if n := a.w.retries.Load() - retries; n != 0 {
		t.Errorf("the append after re-owning reran its batch %d time(s): Own kept a stale seq", n)
	}
}

// TestClusterFencingRollback: a request rolled back to its savepoint loses
// the lease row lock its fence check took, so the next request of the
// batch for the same session checks (and locks) again: while the batch is
// still open, another connection cannot lock the row.
func TestClusterFencingRollback(t *testing.T) {
	c := newCluster(t, "a")
	a := c.nodes["a"]
	ctx := context.Background()
	sid := clusterSession(t, a)
	other, err := sql.Open("pgx", c.url)
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	var locked bool
	errs := inOneBatch(t, a,
		// Fails after appending to sid: undone to its savepoint.
		func() error { return a.Append(ctx, newEvent(sid, "x"), newEvent("ses_unowned", "y")) },
		func() error { return a.Append(ctx, newEvent(sid, "z")) },
		func() error {
			return a.w.do(ctx, func(*wtx) error {
				tx, err := other.BeginTx(ctx, nil)
				if err != nil {
					return err
				}
				defer tx.Rollback()
				_, err = tx.ExecContext(ctx, `SELECT 1 FROM session_leases WHERE session_id = $1 FOR UPDATE NOWAIT`, sid)
				locked = err != nil
				return nil
			})
		},
	)
	wantLeaseLost(t, errs[0], "append with an unowned session")
	if errs[1] != nil || errs[2] != nil {
		t.Fatalf("errs = %v", errs)
	}
	if !locked {
		t.Error("the batch appended to the session without holding its lease row")
	}
	if evs := allEvents(t, a, sid); len(evs) != 2 || evs[1].Type != "z" {
		t.Errorf("log: %d events", len(evs))
	}
}

// TestClusterFencingEndSession: a refused event undoes the rest of its
// request too.
func TestClusterFencingEndSession(t *testing.T) {
	c := newCluster(t, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	ctx := context.Background()
	sid := clusterSession(t, a)
	expire(t, a, sid)
	acquire(t, b, sid)
	// EndSession writes the session row before its event: the refused
	// event must take the state change with it.
	ended, err := a.EndSession(ctx, sid, baton.StateClosed, newEvent(sid, baton.EventSessionClose))
	wantLeaseLost(t, err, "a ending b's session")
	if ended {
		t.Error("EndSession reported ended")
	}
	s, err := b.Session(ctx, sid)
	if err != nil {
		t.Fatal(err)
	}
	if s.State != baton.StateOpen {
		t.Errorf("session state %s after the refused end, want open", s.State)
	}
}

// TestClusterTakeoverRace: two nodes take one session from each other as
// fast as they can (leases of TTL 0, so every acquire is a takeover) while
// appending concurrently under each epoch they get. Every acknowledged
// event is in the log exactly once, no refused one is, seqs have no gap,
// and along the log the epochs never go back: nothing of an old owner
// landed after a newer owner's takeover.
func TestClusterTakeoverRace(t *testing.T) {
	c := newCluster(t, "a", "b")
	sid := clusterSession(t, c.nodes["a"])
	const rounds, perRound = 40, 6
	type outcome struct {
		id  string
		err error
	}
	results := make(chan outcome, 2*rounds*perRound)
	var wg sync.WaitGroup
	for _, db := range c.nodes {
		wg.Go(func() {
			ctx := context.Background()
			for range rounds {
				l, ok, err := db.AcquireLease(ctx, sid, db.node, 0)
				if err != nil {
					t.Errorf("%s acquire: %v", db.node, err)
					return
				}
				if !ok {
					// The other's TTL-0 lease expires at its
					// transaction's now(), which may be later than ours.
					continue
				}
				db.Own(sid, l.Epoch)
				var round sync.WaitGroup
				for i := range perRound {
					round.Go(func() {
						e := baton.NewEvent(sid, "", "race", map[string]any{"node": db.node, "epoch": l.Epoch, "i": i})
						err := db.Append(ctx, e)
						results <- outcome{e.ID, err}
					})
				}
				round.Wait() // an owner's appends end before it acquires again
			}
		})
	}
	wg.Wait()
	close(results)
	acked := make(map[string]bool)
	refused := 0
	for r := range results {
		switch {
		case r.err == nil:
			acked[r.id] = true
		case baton.ErrorCode(r.err) == baton.ECodeLeaseLost:
			refused++
		default:
			t.Errorf("append: %v", r.err)
		}
	}
	evs := allEvents(t, c.nodes["a"], sid)
	if diff := cmp.Diff(oneTo(len(evs)), seqs(evs)); diff != "" {
		t.Errorf("seqs not gap-free (-want +got):\n%s", diff)
	}
	var lastEpoch int64
	seen := make(map[string]bool)
	for _, e := range evs[1:] { // after session.open
		var p struct{ Epoch int64 }
		if err := json.Unmarshal(e.Payload, &p); err != nil {
			t.Fatal(err)
		}
		if p.Epoch < lastEpoch {
			t.Errorf("seq %d was appended under epoch %d after epoch %d", e.Seq, p.Epoch, lastEpoch)
		}
		lastEpoch = max(lastEpoch, p.Epoch)
		if !acked[e.ID] || seen[e.ID] {
			t.Errorf("seq %d (%s): acknowledged %v, seen before %v", e.Seq, e.ID, acked[e.ID], seen[e.ID])
		}
		seen[e.ID] = true
	}
	if len(seen) != len(acked) {
		t.Errorf("%d events acknowledged, %d in the log", len(acked), len(seen))
	}
	t.Logf("%d appends committed, %d refused by the fence", len(acked), refused)
}

// TestClusterNotify: a commit on node a reaches node b's listener with the
// session's last seq; b's own commits are not delivered to b.
func TestClusterNotify(t *testing.T) {
	c := newCluster(t, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	ctx := context.Background()
	notices := make(chan Notice, 16)
	l, err := NewListener(b, ListenerOptions{OnNotice: func(n Notice) { notices <- n }})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Close()

	mine := clusterSession(t, b) // notifies; b must skip it
	if err := b.Append(ctx, newEvent(mine, "b.x")); err != nil {
		t.Fatal(err)
	}
	sid := clusterSession(t, a)
	if err := a.Append(ctx, newEvent(sid, "a.x"), newEvent(sid, "a.y")); err != nil {
		t.Fatal(err)
	}
	want := []Notice{
		{Node: "a", Seqs: map[string]int64{sid: 1}}, // the open
		{Node: "a", Seqs: map[string]int64{sid: 3}},
	}
	for i, w := range want {
		got := <-notices
		if diff := cmp.Diff(w, got); diff != "" {
			t.Fatalf("notice %d (-want +got):\n%s", i, diff)
		}
	}
	// A refused append rings nothing: the next notice is the next commit.
	other := clusterSession(t, b)
	wantLeaseLost(t, a.Append(ctx, newEvent(other, "a.stranger")), "a's append to b's session")
	if err := a.Append(ctx, newEvent(sid, "a.z")); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(Notice{Node: "a", Seqs: map[string]int64{sid: 4}}, <-notices); diff != "" {
		t.Errorf("notice after a refused append (-want +got):\n%s", diff)
	}
}

// TestClusterNotifyLargeBatch: a batch touching more sessions than one
// payload can name announces them all, in several notices.
func TestClusterNotifyLargeBatch(t *testing.T) {
	c := newCluster(t, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	ctx := context.Background()
	const n = 400 // about 40 bytes each: two or three payloads
	ids := make([]string, n)
	for i := range ids {
		ids[i] = clusterSession(t, a)
	}
	notices := make(chan Notice, 16)
	l, err := NewListener(b, ListenerOptions{OnNotice: func(n Notice) { notices <- n }})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	evs := make([]*baton.Event, n)
	want := make(map[string]int64)
	for i, id := range ids {
		evs[i] = newEvent(id, "x")
		want[id] = 2
	}
	if err := a.Append(ctx, evs...); err != nil {
		t.Fatal(err)
	}
	got := make(map[string]int64)
	parts := 0
	for len(got) < n {
		nt := <-notices
		parts++
		for id, seq := range nt.Seqs {
			got[id] = seq
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("announced seqs (-want +got):\n%s", diff)
	}
	if parts < 2 {
		t.Errorf("%d sessions announced in %d notice(s), want several", n, parts)
	}
}

// TestClusterListenerReconnect terminates the listener's backend: it
// reconnects, delivers a resync, and receives later notices.
func TestClusterListenerReconnect(t *testing.T) {
	c := newCluster(t, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	ctx := context.Background()
	notices := make(chan Notice, 16)
	l, err := NewListener(b, ListenerOptions{OnNotice: func(n Notice) { notices <- n }, MinBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	pid := l.pid.Load()
	var killed bool
	if err := a.write.QueryRow(`SELECT pg_terminate_backend($1)`, int(pid)).Scan(&killed); err != nil || !killed {
		t.Fatalf("terminate listener backend %d: %v %v", pid, killed, err)
	}
	if got := <-notices; !got.Resync {
		t.Fatalf("first notice after the lost connection: %+v, want a resync", got)
	}
	if l.pid.Load() == pid {
		t.Error("listener reports the terminated backend")
	}
	sid := clusterSession(t, a)
	if diff := cmp.Diff(Notice{Node: "a", Seqs: map[string]int64{sid: 1}}, <-notices); diff != "" {
		t.Errorf("notice after reconnecting (-want +got):\n%s", diff)
	}
}

func TestNotifyChannel(t *testing.T) {
	long := fmt.Sprintf("%070d", 7)
	for _, c := range []struct{ schema, want string }{
		{"public", "baton_events"},
		{"", "baton_events"},
		{"tenant1", "baton_events_tenant1"},
	} {
		if got := notifyChannel(c.schema); got != c.want {
			t.Errorf("notifyChannel(%q) = %q, want %q", c.schema, got, c.want)
		}
	}
	if ch := notifyChannel(long); len(ch) > 63 || ch == notifyChannel(long+"x") {
		t.Errorf("long schema channel %q", ch)
	}
}

func TestNoticeRoundTrip(t *testing.T) {
	seqs := make(map[string]int64)
	for i := range 500 {
		seqs[fmt.Sprintf("ses_%026d", i)] = int64(i + 1)
	}
	payloads := encodeNotices("node-1", seqs)
	if len(payloads) < 2 {
		t.Fatalf("%d sessions in %d payload(s)", len(seqs), len(payloads))
	}
	got := make(map[string]int64)
	for _, p := range payloads {
		if len(p) > maxNotifyBytes {
			t.Errorf("payload of %d bytes", len(p))
		}
		n, err := DecodeNotice(p)
		if err != nil {
			t.Fatal(err)
		}
		if n.Node != "node-1" || n.Resync {
			t.Errorf("decoded %q resync=%v", n.Node, n.Resync)
		}
		for id, s := range n.Seqs {
			got[id] = s
		}
	}
	if diff := cmp.Diff(seqs, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
	r := encodeNotices("n", map[string]int64{"bad id": 3})
	if len(r) != 1 {
		t.Fatalf("%q", r)
	}
	if n, err := DecodeNotice(r[0]); err != nil || !n.Resync || n.Node != "n" {
		t.Errorf("unnameable session: %+v %v, want a resync", n, err)
	}
	for _, bad := range []string{"", "baton1 ", "baton2 n\ns 1", "baton1 n\ns", "baton1 n\ns 0", "baton1 n\ns 01",
		"baton1 n\ns 1\ns 2", "baton1 n resync\ns 1", "baton1 n\n",
		"baton1 n unsubscribe ", "baton1 n unsubscribe a b", "baton1 n unsubscribe s\ns 1"} {
		if _, err := DecodeNotice(bad); err == nil {
			t.Errorf("DecodeNotice(%q) accepted", bad)
		}
	}
}

// FuzzDecodeNotice: the decoder never panics, and what it accepts
// encodes back to a payload that decodes to the same notice.
func FuzzDecodeNotice(f *testing.F) {
	f.Add("baton1 a\nses_1 3\nses_2 9")
	f.Add("baton1 a resync")
	f.Add("baton1 a")
	f.Add("baton1 n\ns 01")
	f.Add("baton1 n unsubscribe ses_1")
	f.Add("baton1 n forget key_1")
	f.Add("baton1 n end ses_1")
	f.Fuzz(func(t *testing.T, payload string) {
		n, err := DecodeNotice(payload)
		if err != nil {
			return
		}
		if n.Resync {
			return
		}
		if n.Unsubscribe != "" || n.Forget != "" || n.Ended != "" {
			var verb, arg string
			switch {
			case n.Unsubscribe != "":
				verb, arg = notifyUnsubscribe, n.Unsubscribe
			case n.Forget != "":
				verb, arg = notifyForget, n.Forget
			default:
				verb, arg = notifyEnded, n.Ended
			}
			m, err := DecodeNotice(notifyPrefix + n.Node + " " + verb + " " + arg)
			if err != nil || m.Node != n.Node || m.Unsubscribe != n.Unsubscribe || m.Forget != n.Forget || m.Ended != n.Ended || m.Seqs != nil || m.Resync {
				t.Fatalf("%s %+v re-encoded: %+v, %v", verb, n, m, err)
			}
			return
		}
		for _, p := range encodeNotices(n.Node, n.Seqs) {
			m, err := DecodeNotice(p)
			if err != nil {
				t.Fatalf("re-encoded %q: %v", p, err)
			}
			if m.Node != n.Node {
				t.Fatalf("node %q became %q", n.Node, m.Node)
			}
			for id, s := range m.Seqs {
				if n.Seqs[id] != s {
					t.Fatalf("session %s: %d became %d", id, n.Seqs[id], s)
				}
			}
		}
	})
}

func TestClusterOrphanedSessions(t *testing.T) {
	c := newCluster(t, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	ctx := context.Background()
	live, lapsed, ended := clusterSession(t, a), clusterSession(t, a), clusterSession(t, a)
	if _, err := a.EndSession(ctx, ended, baton.StateClosed, newEvent(ended, baton.EventSessionClose)); err != nil {
		t.Fatal(err)
	}
	expire(t, a, lapsed)
	expire(t, a, ended)
	// A session opened before cluster mode has no lease row at all.
	plain, err := Open(ctx, Options{URL: c.url})
	if err != nil {
		t.Fatal(err)
	}
	bare := clusterSession(t, plain)
	plain.Close()

	got, err := b.OrphanedSessions(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{lapsed, bare}, got); diff != "" {
		t.Errorf("orphaned sessions (-want +got):\n%s (live %s, ended %s)", diff, live, ended)
	}
	if got, _ := b.OrphanedSessions(ctx, 1); len(got) != 1 || got[0] != lapsed {
		t.Errorf("limit 1: %v, want just %s", got, lapsed)
	}
	acquire(t, b, lapsed)
	if got, _ := b.OrphanedSessions(ctx, 10); len(got) != 1 || got[0] != bare {
		t.Errorf("after b took %s over: %v, want just %s", lapsed, got, bare)
	}
	sq := openSQLite(t)
	if _, err := sq.OrphanedSessions(ctx, 10); baton.ErrorCode(err) != baton.ECodeUnavailable {
		t.Errorf("SQLite: %v, want unavailable", err)
	}
}

// TestClusterRenewSkipsEnded: the lease of a closed session is not
// renewed: it lapses, and the node stops counting it.
func TestClusterRenewSkipsEnded(t *testing.T) {
	c := newCluster(t, "a")
	a := c.nodes["a"]
	ctx := context.Background()
	open, failed, ended := clusterSession(t, a), clusterSession(t, a), clusterSession(t, a)
	if _, err := a.EndSession(ctx, ended, baton.StateClosed, newEvent(ended, baton.EventSessionClose)); err != nil {
		t.Fatal(err)
	}
	// A session in state error still takes events: it keeps its owner.
	if _, err := a.EndSession(ctx, failed, baton.StateError, newEvent(failed, baton.EventSessionError)); err != nil {
		t.Fatal(err)
	}
	renewed, err := a.RenewLeases(ctx, "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, l := range renewed {
		ids = append(ids, l.SessionID)
	}
	want := []string{open, failed}
	slices.Sort(want)
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("renewed (-want +got):\n%s", diff)
	}
}

// TestClusterRevokeLeavesOthersSessions: revoking a client key on a node
// closes the sessions it orphans that this node owns; those another node
// owns stay open for their owner, which RevokedSessions shows them to.
func TestClusterRevokeLeavesOthersSessions(t *testing.T) {
	c := newCluster(t, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	ctx := context.Background()
	p := mkProfile(t, a, "p")
	k := mkKey(t, a, baton.RoleClient, p.ID)
	onA, _ := mkSession(t, a, k)
	onB, _ := mkSession(t, b, k)
	closed, err := a.RevokeClientKey(ctx, k.ID, func(sid string) *baton.Event {
		return baton.NewEvent(sid, k.ID, baton.EventSessionClose, map[string]string{"reason": "client_key_revoked"})
	})
	if err != nil {
		t.Fatalf("revoking on a with a session owned by b: %v", err)
	}
	if len(closed) != 1 || closed[0] != onA.ID {
		t.Errorf("a closed %v, want only its own %s", closed, onA.ID)
	}
	if s, _ := b.Session(ctx, onB.ID); s.State != baton.StateOpen {
		t.Errorf("b's session is %s after a's revocation, want open for b to close", s.State)
	}
	if got, err := b.RevokedSessions(ctx, "b", 10); err != nil || len(got) != 1 || got[0] != onB.ID {
		t.Errorf("b's revoked sessions %v, %v; want %s", got, err, onB.ID)
	}
	if got, _ := a.RevokedSessions(ctx, "a", 10); len(got) != 0 {
		t.Errorf("a's revoked sessions %v, want none (its one is closed)", got)
	}
	if _, err := b.EndSession(ctx, onB.ID, baton.StateClosed, newEvent(onB.ID, baton.EventSessionClose)); err != nil {
		t.Fatal(err)
	}
	if got, _ := b.RevokedSessions(ctx, "b", 10); len(got) != 0 {
		t.Errorf("after b closed it: %v", got)
	}
}

// TestClusterNotifyUnsubscribe: an unsubscribe reaches the other nodes'
// listeners, not the sender's.
func TestClusterNotifyUnsubscribe(t *testing.T) {
	c := newCluster(t, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	got := make(chan Notice, 8)
	l, err := NewListener(b, ListenerOptions{OnNotice: func(n Notice) { got <- n }})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	own, err := NewListener(a, ListenerOptions{OnNotice: func(n Notice) { t.Errorf("a heard its own notice %+v", n) }})
	if err != nil {
		t.Fatal(err)
	}
	if err := own.Open(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer own.Close()
	if err := a.NotifyUnsubscribe(context.Background(), "ses_x"); err != nil {
		t.Fatal(err)
	}
	for n := range got {
		if n.Resync {
			continue
		}
		if n.Node != "a" || n.Unsubscribe != "ses_x" {
			t.Fatalf("b heard %+v, want a's unsubscribe of ses_x", n)
		}
		break
	}
	sq := openSQLite(t)
	if err := sq.NotifyUnsubscribe(context.Background(), "ses_x"); err != nil {
		t.Errorf("single node: %v, want nothing to do", err)
	}
}

func TestClusterSessionOwners(t *testing.T) {
	c := newCluster(t, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	ctx := context.Background()
	onA, onB, lapsed := clusterSession(t, a), clusterSession(t, b), clusterSession(t, a)
	expire(t, a, lapsed)
	got, err := b.SessionOwners(ctx, []string{onA, onB, lapsed, "ses_none"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]string{onA: "a", onB: "b"}, got); diff != "" {
		t.Errorf("owners (-want +got):\n%s", diff)
	}
	if got, err := a.SessionOwners(ctx, nil); err != nil || len(got) != 0 {
		t.Errorf("no sessions: %v, %v", got, err)
	}
}

// TestClusterNotifyForget: revoking a client key and changing or deleting
// a profile tell the other nodes to drop them from their caches.
func TestClusterNotifyForget(t *testing.T) {
	c := newCluster(t, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	ctx := context.Background()
	got := make(chan Notice, 16)
	l, err := NewListener(b, ListenerOptions{OnNotice: func(n Notice) {
		if n.Forget != "" {
			got <- n
		}
	}})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Open(ctx); err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	p := mkProfile(t, a, "p")
	if err := a.ReplaceProfile(ctx, p); err != nil {
		t.Fatal(err)
	}
	k := mkKey(t, a, baton.RoleClient, p.ID)
	if _, err := a.RevokeClientKey(ctx, k.ID, nil); err != nil {
		t.Fatal(err)
	}
	if err := a.DeleteProfile(ctx, p.ID); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{p.ID, k.ID, p.ID} {
		if n := <-got; n.Node != "a" || n.Forget != want {
			t.Fatalf("b heard %+v, want a's forget of %s", n, want)
		}
	}
}
