package store

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
	"github.com/pressly/goose/v3"
)

// multiNote is message text with multi-byte UTF-8 sequences.
var multiNote = strings.Repeat("naïve café — ünïcödé ✓ 日本語 🙂 ", 12)

func reqEvent(sessionID string, payload json.RawMessage) *baton.Event {
	return &baton.Event{SessionID: sessionID, Type: baton.EventProviderReq, Payload: payload}
}

// storedRow is how one session_events row is stored.
type storedRow struct {
	seq   int64
	typ   string
	base  int64 // 0: whole
	bytes int64 // of the payload column
}

func storedRows(t *testing.T, db *DB, sessionID string) []storedRow {
	t.Helper()
	size := "length(CAST(payload AS BLOB))"
	if db.Dialect() == DialectPostgres {
		size = "octet_length(payload)"
	}
	rows, err := db.read.Query(`SELECT seq, event_type, base_seq, `+size+` FROM session_events
WHERE session_id = $1 ORDER BY seq`, sessionID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []storedRow
	for rows.Next() {
		var r storedRow
		var base sql.NullInt64
		if err := rows.Scan(&r.seq, &r.typ, &base, &r.bytes); err != nil {
			t.Fatal(err)
		}
		r.base = base.Int64
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// depths returns each stored row's delta chain depth by seq.
func depths(rows []storedRow) map[int64]int {
	d := make(map[int64]int, len(rows))
	for _, r := range rows {
		if r.base != 0 {
			d[r.seq] = d[r.base] + 1
		}
	}
	return d
}

func baseOf(t *testing.T, db *DB, e *baton.Event) int64 {
	t.Helper()
	for _, r := range storedRows(t, db, e.SessionID) {
		if r.seq == e.Seq {
			return r.base
		}
	}
	t.Fatalf("event %d not stored", e.Seq)
	return 0
}

// rawEqual compares payloads as bytes (cmp would walk them byte by byte).
var rawEqual = cmp.Comparer(func(a, b json.RawMessage) bool { return bytes.Equal(a, b) })

// checkReads checks that every read path returns want, the session's
// whole log, byte for byte.
func checkReads(t *testing.T, db *DB, want []*baton.Event) {
	t.Helper()
	ctx := context.Background()
	sid := want[0].SessionID
	if diff := cmp.Diff(want, allEvents(t, db, sid), rawEqual); diff != "" {
		t.Fatalf("EventsAfter(0) (-want +got):\n%s", diff)
	}
	var paged []*baton.Event
	for cursor := ""; ; {
		items, next, err := db.Events(ctx, sid, baton.Page{Cursor: cursor, Limit: 3})
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, items...)
		if next == "" {
			break
		}
		cursor = next
	}
	if diff := cmp.Diff(want, paged, rawEqual); diff != "" {
		t.Errorf("Events in pages of 3 (-want +got):\n%s", diff)
	}
	// One event at a time: every base lies before the result.
	for i, e := range want {
		got, err := db.EventsAfter(ctx, sid, e.Seq-1, 1)
		if err != nil {
			t.Fatalf("EventsAfter(%d, 1): %v", e.Seq-1, err)
		}
		if diff := cmp.Diff(want[i:i+1], got, rawEqual); diff != "" {
			t.Fatalf("EventsAfter(%d, 1) (-want +got):\n%s", e.Seq-1, diff)
		}
	}
	mid := len(want) / 2
	got, err := db.EventsAfter(ctx, sid, want[mid].Seq, 7)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[mid+1:min(mid+8, len(want))], got, rawEqual); diff != "" {
		t.Errorf("EventsAfter(middle, 7) (-want +got):\n%s", diff)
	}
	for _, types := range [][]string{{baton.EventProviderReq}, {"turn.output", baton.EventProviderReq}} {
		var of []*baton.Event
		for _, e := range want {
			if e.Type == types[0] || e.Type == types[len(types)-1] {
				of = append(of, e)
			}
		}
		got, err := db.EventsOfType(ctx, sid, types)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(of, got, rawEqual); diff != "" {
			t.Errorf("EventsOfType(%v) (-want +got):\n%s", types, diff)
		}
	}
}

// testDeltaRoundTrip appends a conversation's growing provider requests
// among other events, one commit each, and reads them back every way.
func testDeltaRoundTrip(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	s, _ := mkSession(t, db, ck)
	conv := &conversation{session: s.ID, note: multiNote}
	const requests = 40
	var sent int64
	for i := range requests {
		req := reqEvent(s.ID, conv.next())
		sent += int64(len(req.Payload))
		out := newEvent(s.ID, "turn.output")
		var err error
		switch i % 3 {
		case 0:
			if err = db.Append(ctx, req); err == nil {
				err = db.Append(ctx, out)
			}
		case 1:
			err = db.Append(ctx, out, req)
		default:
			err = db.Append(ctx, req, out)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	want := allEvents(t, db, s.ID)
	checkReads(t, db, want)

	rows := storedRows(t, db, s.ID)
	var stored int64
	for _, r := range rows {
		if r.typ == baton.EventProviderReq {
			stored += r.bytes
		}
	}
	if stored*6 > sent {
		t.Errorf("provider requests take %d bytes stored, %d sent: want under a sixth", stored, sent)
	}
	d := depths(rows)
	var wholeAfterChain, deltas int
	deepest := 0
	for _, r := range rows {
		if r.typ != baton.EventProviderReq {
			if r.base != 0 {
				t.Errorf("%s event %d stored as a delta", r.typ, r.seq)
			}
			continue
		}
		if r.base != 0 {
			deltas++
		} else if deepest == maxChain {
			wholeAfterChain++
		}
		deepest = d[r.seq]
		if deepest > maxChain {
			t.Errorf("event %d is %d deltas deep, more than %d", r.seq, deepest, maxChain)
		}
	}
	if wholeAfterChain == 0 {
		t.Errorf("no request stored whole after a chain of %d deltas", maxChain)
	}
	if deltas < requests-3 {
		t.Errorf("%d of %d requests stored as deltas", deltas, requests)
	}
	t.Logf("%d provider request bytes stored for %d sent", stored, sent)
}

// testDeltaUTF8 has a request differ from its base inside multi-byte
// characters at both ends of the change: the stored middle must begin
// and end on character boundaries (PostgreSQL refuses anything else).
func testDeltaUTF8(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	s, _ := mkSession(t, db, ck)
	head := `{"messages":[{"content":"` + strings.Repeat("日本語 ", 100)
	tail := strings.Repeat(" ünïcödé", 100) + `"}]}`
	// € is E2 82 AC and ₭ E2 82 AD; é is C3 A9 and © C2 A9.
	first := reqEvent(s.ID, json.RawMessage(head+"€é"+tail))
	second := reqEvent(s.ID, json.RawMessage(head+"₭©"+tail))
	if err := db.Append(ctx, first); err != nil {
		t.Fatal(err)
	}
	if err := db.Append(ctx, second); err != nil {
		t.Fatal(err)
	}
	if got := baseOf(t, db, second); got != first.Seq {
		t.Fatalf("second request based on %d, want %d", got, first.Seq)
	}
	var mid string
	if err := db.read.QueryRow(`SELECT payload FROM session_events WHERE session_id = $1 AND seq = $2`,
		s.ID, second.Seq).Scan(&mid); err != nil {
		t.Fatal(err)
	}
	if mid != "₭©" {
		t.Errorf("stored middle = %q, want %q", mid, "₭©")
	}
	checkReads(t, db, allEvents(t, db, s.ID))
}

// firstRequest opens a session and commits its first provider request.
func firstRequest(t *testing.T, db *DB) (*baton.Session, *conversation, *baton.Event) {
	t.Helper()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	s, _ := mkSession(t, db, ck)
	conv := &conversation{session: s.ID}
	r0 := reqEvent(s.ID, conv.next())
	if err := db.Append(context.Background(), r0); err != nil {
		t.Fatal(err)
	}
	return s, conv, r0
}

// testDeltaSameBatch commits two requests of one session in one batch,
// from two calls and from one: neither may be based on the other.
func testDeltaSameBatch(t *testing.T, db *DB) {
	ctx := context.Background()
	s, conv, r0 := firstRequest(t, db)
	r1, r2 := reqEvent(s.ID, conv.next()), reqEvent(s.ID, conv.next())
	errs := inOneBatch(t, db,
		func() error { return db.Append(ctx, r1) },
		func() error { return db.Append(ctx, r2) })
	if errs[0] != nil || errs[1] != nil {
		t.Fatal(errs)
	}
	r3, r4 := reqEvent(s.ID, conv.next()), reqEvent(s.ID, conv.next())
	if err := db.Append(ctx, r3, r4); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		e        *baton.Event
		not, was int64
	}{{r1, 0, r0.Seq}, {r2, r1.Seq, r0.Seq}, {r3, 0, r2.Seq}, {r4, r3.Seq, r2.Seq}} {
		if got := baseOf(t, db, c.e); got != c.was {
			t.Errorf("event %d based on %d, want %d (not %d, of its own batch)", c.e.Seq, got, c.was, c.not)
		}
	}
	checkReads(t, db, allEvents(t, db, s.ID))
}

// testDeltaRollback checks that requests of a failed commit and of a
// request rolled back to its savepoint never become bases: the next
// request is based on the last one committed.
func testDeltaRollback(t *testing.T, db *DB) {
	ctx := context.Background()
	s, conv, r0 := firstRequest(t, db)
	poison := commitFailer(t, db)
	lost := reqEvent(s.ID, conv.next())
	savepointed := reqEvent(s.ID, conv.next())
	for _, ops := range [][]func() error{
		// The commit fails: every request of the batch with it.
		{func() error { return db.Append(ctx, lost) }, poison},
		// A request fails after writing: rolled back to its savepoint.
		{
			func() error { return db.Append(ctx, newEvent(s.ID, "turn.output")) },
			func() error { return db.Append(ctx, savepointed, newEvent("ses_ghost", "x")) },
			func() error { return db.Append(ctx, newEvent(s.ID, "turn.output")) },
		},
	} {
		if errs := inOneBatch(t, db, ops...); errs[0] == nil && errs[1] == nil {
			t.Fatal("the batch did not fail")
		}
	}
	if lost.Seq != 0 || savepointed.Seq != 0 {
		t.Fatalf("failed requests kept seqs %d, %d", lost.Seq, savepointed.Seq)
	}
	// Had either been cached, next would be a delta of a seq that now
	// holds another event.
	next := reqEvent(s.ID, conv.next())
	if err := db.Append(ctx, next); err != nil {
		t.Fatal(err)
	}
	if got := baseOf(t, db, next); got != r0.Seq {
		t.Errorf("request after the failures based on %d, want %d", got, r0.Seq)
	}
	checkReads(t, db, allEvents(t, db, s.ID))
}

// testDeltaEviction appends to several sessions with a base cache too
// small for all of them.
func testDeltaEviction(t *testing.T, db *DB) {
	ctx := context.Background()
	const limit = 12 << 10
	setLimit := func(*wtx) error { db.w.bases.limit = limit; return nil }
	if err := db.w.do(ctx, setLimit); err != nil {
		t.Fatal(err)
	}
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	const sessions, requests = 5, 30
	var convs []*conversation
	for range sessions {
		s, _ := mkSession(t, db, ck)
		convs = append(convs, &conversation{session: s.ID, note: "short"})
	}
	maxSize, maxLen := 0, 0
	for i := range requests * sessions {
		c := convs[i%sessions]
		if i%7 == 0 {
			c = convs[0] // one session busier than the rest
		}
		if err := db.Append(ctx, reqEvent(c.session, c.next())); err != nil {
			t.Fatal(err)
		}
		if err := db.w.do(ctx, func(*wtx) error {
			maxSize, maxLen = max(maxSize, db.w.bases.size), max(maxLen, len(db.w.bases.m))
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if maxSize > limit {
		t.Errorf("cached bases reached %d bytes, limit %d", maxSize, limit)
	}
	if maxLen >= sessions {
		t.Errorf("all %d sessions' bases fit in %d bytes: nothing evicted", maxLen, limit)
	}
	deltas := 0
	for _, c := range convs {
		evs := allEvents(t, db, c.session)
		checkReads(t, db, evs)
		for _, r := range storedRows(t, db, c.session) {
			if r.base != 0 {
				deltas++
			}
		}
	}
	if deltas == 0 {
		t.Error("no request stored as a delta")
	}
}

// testDeltaCorrupt checks that a delta whose reference does not hold is
// a read error, not a panic or a wrong payload.
func testDeltaCorrupt(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	s, _ := mkSession(t, db, ck)
	conv := &conversation{session: s.ID}
	var last *baton.Event
	for range 3 {
		last = reqEvent(s.ID, conv.next())
		if err := db.Append(ctx, last); err != nil {
			t.Fatal(err)
		}
	}
	var base, prefix, suffix int64
	if err := db.read.QueryRow(`SELECT base_seq, base_prefix, base_suffix FROM session_events
WHERE session_id = $1 AND seq = $2 AND base_seq IS NOT NULL`, s.ID, last.Seq).Scan(&base, &prefix, &suffix); err != nil {
		t.Fatalf("last request not stored as a delta: %v", err)
	}
	for _, set := range []string{
		`base_prefix = 1000000`,
		`base_suffix = -1`,
		`base_prefix = NULL`,
		`base_seq = 999`,
		`base_seq = seq`,
	} {
		if _, err := db.write.Exec(`UPDATE session_events SET `+set+` WHERE session_id = $1 AND seq = $2`, s.ID, last.Seq); err != nil {
			t.Fatal(err)
		}
		if _, err := db.EventsAfter(ctx, s.ID, last.Seq-1, 1); err == nil {
			t.Errorf("%s: EventsAfter succeeded", set)
		}
		if _, err := db.EventsOfType(ctx, s.ID, []string{baton.EventProviderReq}); err == nil {
			t.Errorf("%s: EventsOfType succeeded", set)
		}
		if _, err := db.write.Exec(`UPDATE session_events SET base_seq = $3, base_prefix = $4, base_suffix = $5
WHERE session_id = $1 AND seq = $2`, s.ID, last.Seq, base, prefix, suffix); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(last, allEvents(t, db, s.ID)[last.Seq-1], rawEqual); diff != "" {
			t.Fatalf("restored delta (-want +got):\n%s", diff)
		}
	}
}

// testDeltaDown migrates a database holding deltas down past version 6:
// every payload must then be whole.
func testDeltaDown(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	s, _ := mkSession(t, db, ck)
	conv := &conversation{session: s.ID, note: multiNote}
	for range 20 {
		if err := db.Append(ctx, reqEvent(s.ID, conv.next()), newEvent(s.ID, "turn.output")); err != nil {
			t.Fatal(err)
		}
	}
	want := allEvents(t, db, s.ID)
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	driver, dialect := "sqlite", goose.DialectSQLite3
	if db.Dialect() == DialectPostgres {
		driver, dialect = "pgx", goose.DialectPostgres
	}
	conn, err := sql.Open(driver, db.url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	prov, err := db.provider(dialect, conn)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := prov.DownTo(ctx, 5); err != nil {
		t.Fatal(err)
	}
	rows, err := conn.Query(`SELECT payload FROM session_events WHERE session_id = $1 ORDER BY seq`, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got []string
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			t.Fatal(err)
		}
		got = append(got, p)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	var whole []string
	for _, e := range want {
		whole = append(whole, string(e.Payload))
	}
	if diff := cmp.Diff(whole, got, rawEqual); diff != "" {
		t.Errorf("payloads after migrating down (-want +got):\n%s", diff)
	}
}

func TestSplit(t *testing.T) {
	long := strings.Repeat("x", 600)
	for _, c := range []struct {
		name, base, p  string
		prefix, suffix int
	}{
		{"same", "abc", "abc", 3, 0},
		{"appended", "abc", "abcd", 3, 0},
		{"inserted", "ab-cd", "ab-XY-cd", 3, 2}, // not overlapping in base
		{"no overlap", "aaaa", "aaaaaa", 4, 0},
		{"shorter", "abcdef", "abef", 2, 2},
		{"nothing shared", "abc", "xyz", 0, 0},
		{"empty", "", "abc", 0, 0},
		{"prefix inside a rune", long + "€", long + "₭", 600, 0},
		{"suffix inside a rune", "é" + long, "©" + long, 0, 600},
		{"both", long + "€é" + long, long + "₭©" + long, 600, 600},
		{"4-byte", "a🙂b", "a🙃b", 1, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			prefix, suffix := split([]byte(c.base), []byte(c.p))
			if prefix != c.prefix || suffix != c.suffix {
				t.Errorf("split(%.20q…, %.20q…) = %d, %d; want %d, %d", c.base, c.p, prefix, suffix, c.prefix, c.suffix)
			}
		})
	}
}

// FuzzSplit checks that split's prefix and suffix are shared, do not
// overlap, leave a valid UTF-8 middle of valid UTF-8 text, and rebuild p.
func FuzzSplit(f *testing.F) {
	f.Add("abc", "abcd")
	f.Add(`{"m":["日本"],"t":1}`, `{"m":["日本","語"],"t":1}`)
	f.Add("€é", "₭©")
	f.Add(strings.Repeat("ab", 300)+"x", strings.Repeat("ab", 301))
	f.Fuzz(func(t *testing.T, base, p string) {
		b, q := []byte(base), []byte(p)
		prefix, suffix := split(b, q)
		if prefix < 0 || suffix < 0 || prefix+suffix > min(len(b), len(q)) {
			t.Fatalf("split = %d, %d of %d and %d bytes", prefix, suffix, len(b), len(q))
		}
		if !bytes.Equal(b[:prefix], q[:prefix]) || !bytes.Equal(b[len(b)-suffix:], q[len(q)-suffix:]) {
			t.Fatalf("split = %d, %d: not shared", prefix, suffix)
		}
		mid := q[prefix : len(q)-suffix]
		if utf8.Valid(q) && !utf8.Valid(mid) {
			t.Fatalf("middle %q of valid text is not", mid)
		}
		r := ref{base: 1, prefix: int64(prefix), suffix: int64(suffix)}
		got, err := r.join(2, b, mid)
		if err != nil || !bytes.Equal(got, q) {
			t.Fatalf("join = %q, %v; want %q", got, err, q)
		}
	})
}

func TestBaseCache(t *testing.T) {
	payload := func(n int) json.RawMessage { return json.RawMessage(strings.Repeat("p", n)) }
	c := newBaseCache(9000)
	c.put("a", 1, 0, payload(2000))
	c.put("b", 2, 0, payload(2000))
	c.put("c", 3, 0, payload(2000)) // 3 × 2500 bytes of capacity
	ev := &baton.Event{SessionID: "a", Seq: 9, Type: baton.EventProviderReq, Payload: payload(2100)}
	if d, _ := c.deltaOf(ev); d.base != 1 { // a becomes the most recently used
		t.Fatalf("delta of a = %+v", d)
	}
	c.put("d", 4, 0, payload(2000)) // evicts b, the least recently used
	if _, ok := c.m["b"]; ok || len(c.m) != 3 || c.size > c.limit {
		t.Fatalf("after eviction: %d entries, %d bytes, b kept: %v", len(c.m), c.size, ok)
	}
	c.put("a", 5, 1, payload(2400)) // fits a's capacity
	if b := c.m["a"]; b.seq != 5 || b.depth != 1 || len(b.payload) != 2400 || cap(b.payload) != 2500 {
		t.Fatalf("a = seq %d depth %d, %d/%d bytes", b.seq, b.depth, len(b.payload), cap(b.payload))
	}
	c.put("a", 6, 0, payload(100))  // too small to be a base
	c.put("c", 7, 0, payload(5000)) // over half the cache
	if len(c.m) != 1 || c.size != 2500 || c.newest != c.m["d"] || c.oldest != c.m["d"] {
		t.Fatalf("after drops: %d entries, %d bytes", len(c.m), c.size)
	}
	for _, e := range []*baton.Event{
		{SessionID: "d", Seq: 9, Type: "turn.output", Payload: payload(2000)},
		{SessionID: "d", Seq: 4, Type: baton.EventProviderReq, Payload: payload(2000)},
		{SessionID: "d", Seq: 9, Type: baton.EventProviderReq, Payload: json.RawMessage("{" + strings.Repeat("q", 2000))},
	} {
		if d, text := c.deltaOf(e); d.base != 0 || text != string(e.Payload) {
			t.Errorf("event %+v stored as delta %+v", e.Type, d)
		}
	}
	c.m["d"].depth = maxChain
	if d, _ := c.deltaOf(&baton.Event{SessionID: "d", Seq: 9, Type: baton.EventProviderReq, Payload: payload(2000)}); d.base != 0 {
		t.Errorf("delta of a base %d deep: %+v", maxChain, d)
	}
}
