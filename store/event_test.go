package store

import (
	"context"
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

func testAppend(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	s1, _ := mkSession(t, db, ck)
	s2, _ := mkSession(t, db, ck)

	at := time.Date(2031, 5, 6, 7, 8, 9, 10_000_000, time.UTC)
	given := &baton.Event{ID: "evt_given", SessionID: s2.ID, Type: "x.given", CreatedAt: at,
		Payload: json.RawMessage(`{ "spaced" : true, "n": [1,2] }`)}
	attributed := baton.NewEvent(s1.ID, ck.ID, "x.attr", map[string]int{"n": 1})
	empty := &baton.Event{SessionID: s1.ID, Type: "x.empty"}
	before := baton.Now()
	// One call, two sessions, interleaved.
	if err := db.Append(ctx, attributed, given, empty); err != nil {
		t.Fatal(err)
	}
	if attributed.Seq != 2 || empty.Seq != 3 || given.Seq != 2 {
		t.Errorf("seqs = %d, %d, %d; want 2, 3, 2", attributed.Seq, empty.Seq, given.Seq)
	}
	if given.ID != "evt_given" || !given.CreatedAt.Equal(at) {
		t.Errorf("given id/time overwritten: %s %v", given.ID, given.CreatedAt)
	}
	if len(attributed.ID) != len(baton.PrefixEvent)+32 || attributed.ID[:4] != baton.PrefixEvent {
		t.Errorf("filled id = %q", attributed.ID)
	}
	if attributed.CreatedAt.Before(before) || attributed.CreatedAt.Location() != time.UTC {
		t.Errorf("filled created_at = %v, want UTC, not before %v", attributed.CreatedAt, before)
	}

	got := allEvents(t, db, s1.ID)
	empty.Payload = json.RawMessage(`{}`) // an empty payload is stored as {}
	if diff := cmp.Diff([]*baton.Event{attributed, empty}, got[1:]); diff != "" {
		t.Errorf("session 1 events (-want +got):\n%s", diff)
	}
	got = allEvents(t, db, s2.ID)
	if diff := cmp.Diff(given, got[1]); diff != "" {
		t.Errorf("given event (-want +got):\n%s", diff)
	}
	if got[0].ClientKeyID != "" {
		t.Errorf("unattributed event has client key %q", got[0].ClientKeyID)
	}

	if err := db.Append(ctx); err != nil {
		t.Errorf("empty Append: %v", err)
	}
	if err := db.Append(ctx, &baton.Event{SessionID: s1.ID}); err == nil {
		t.Error("Append accepted an event without a type")
	}
	// A duplicate event id fails the whole call and consumes no seq.
	dup := &baton.Event{ID: "evt_given", SessionID: s1.ID, Type: "x"}
	if err := db.Append(ctx, newEvent(s1.ID, "x.ok"), dup); err == nil {
		t.Error("Append with a duplicate id succeeded")
	}
	next := newEvent(s1.ID, "x.next")
	if err := db.Append(ctx, next); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(oneTo(4), seqs(allEvents(t, db, s1.ID))); diff != "" {
		t.Errorf("seqs after a failed append (-want +got):\n%s", diff)
	}
}

func testAppendUnknownSession(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	s, _ := mkSession(t, db, ck)
	err := db.Append(ctx, newEvent(s.ID, "x.ok"), newEvent("ses_ghost", "x.ghost"))
	wantCode(t, err, baton.ECodeNotFound, "no session ses_ghost")
	if n := len(allEvents(t, db, s.ID)); n != 1 {
		t.Errorf("part of a failed Append was written: %d events", n)
	}
	ev := newEvent(s.ID, "x.after")
	if err := db.Append(ctx, ev); err != nil {
		t.Fatal(err)
	}
	if ev.Seq != 2 {
		t.Errorf("seq after failed append = %d, want 2", ev.Seq)
	}
}

// testAppendInvalidUTF8: an event whose payload is not valid UTF-8 (valid
// JSON to encoding/json) is refused with the rest of its Append, and the
// events page stays valid UTF-8.
func testAppendInvalidUTF8(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	s, _ := mkSession(t, db, ck)
	before := len(allEvents(t, db, s.ID))
	bad := &baton.Event{SessionID: s.ID, Type: "client.message.send", Payload: json.RawMessage("{\"role\":\"user\",\"content\":\"hi \xff\xfe\"}")}
	if err := db.Append(ctx, newEvent(s.ID, "x.ok"), bad); err == nil {
		t.Fatal("appended a payload that is not valid UTF-8")
	}
	evs := allEvents(t, db, s.ID)
	if len(evs) != before {
		t.Errorf("part of a refused Append was written: %d events, want %d", len(evs), before)
	}
	if err := db.Append(ctx, newEvent(s.ID, "x.after")); err != nil {
		t.Fatal(err)
	}
	for _, e := range allEvents(t, db, s.ID) {
		if !utf8.Valid(e.Payload) {
			t.Errorf("stored payload %q", e.Payload)
		}
	}
}

func testEventPages(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	s, _ := mkSession(t, db, ck)
	other, _ := mkSession(t, db, ck)
	for range 10 {
		if err := db.Append(ctx, newEvent(s.ID, "x"), newEvent(other.ID, "y")); err != nil {
			t.Fatal(err)
		}
	}
	// 11 events: pages of 4, 4, 3, cursors are seqs.
	var got []int64
	var cursors []string
	cursor := ""
	for {
		items, next, err := db.Events(ctx, s.ID, baton.Page{Cursor: cursor, Limit: 4})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range items {
			if e.SessionID != s.ID {
				t.Fatalf("event of session %s in %s's page", e.SessionID, s.ID)
			}
			got = append(got, e.Seq)
		}
		if next == "" {
			break
		}
		cursors = append(cursors, next)
		cursor = next
	}
	if diff := cmp.Diff(oneTo(11), got); diff != "" {
		t.Errorf("paged seqs (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"4", "8"}, cursors); diff != "" {
		t.Errorf("cursors (-want +got):\n%s", diff)
	}

	after, err := db.EventsAfter(ctx, s.ID, 7, 3)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]int64{8, 9, 10}, seqs(after)); diff != "" {
		t.Errorf("EventsAfter(7, 3) (-want +got):\n%s", diff)
	}
	after, err = db.EventsAfter(ctx, s.ID, 11, 3)
	if err != nil || len(after) != 0 {
		t.Errorf("EventsAfter(last) = %v, %v", after, err)
	}
	items, next, err := db.Events(ctx, "ses_none", baton.Page{})
	if err != nil || len(items) != 0 || next != "" {
		t.Errorf("Events(unknown) = %v, %q, %v", items, next, err)
	}
	items, _, err = db.Events(ctx, s.ID, baton.Page{Cursor: strconv.Itoa(10), Limit: 0})
	if err != nil || len(items) != 1 || items[0].Seq != 11 {
		t.Errorf("Events(cursor 10, default limit) = %v, %v", items, err)
	}
}

// testEventPageBytes pages through provider requests (most stored as
// deltas, so the budget must count whole payloads) and one event larger
// than the whole budget: every page stays within the budget unless it is
// that one event alone, ends only before an event that would not fit, and
// together the pages hold every event once.
func testEventPageBytes(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	s, _ := mkSession(t, db, ck)
	conv := &conversation{session: s.ID, note: multiNote}
	var reqs []*baton.Event
	for range 12 {
		req := reqEvent(s.ID, conv.next())
		reqs = append(reqs, req)
		if err := db.Append(ctx, req); err != nil {
			t.Fatal(err)
		}
	}
	db.pageBytes = 3 * len(reqs[len(reqs)-1].Payload)
	huge := baton.NewEvent(s.ID, "", "x", strings.Repeat("y", 2*db.pageBytes))
	if err := db.Append(ctx, huge, newEvent(s.ID, "after")); err != nil {
		t.Fatal(err)
	}
	want := allEvents(t, db, s.ID)
	if stored := storedRows(t, db, s.ID); stored[len(stored)-3].base == 0 {
		t.Fatal("last request not stored as a delta; the test needs one")
	}

	var got []*baton.Event
	cursor, pages := "", 0
	for {
		items, next, err := db.Events(ctx, s.ID, baton.Page{Cursor: cursor, Limit: 200})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		if len(items) == 0 {
			t.Fatalf("page %d after cursor %q is empty", pages, cursor)
		}
		size := 0
		for _, e := range items {
			size += len(e.Payload)
		}
		if size > db.pageBytes && len(items) > 1 {
			t.Errorf("page %d holds %d events of %d payload bytes, budget %d", pages, len(items), size, db.pageBytes)
		}
		got = append(got, items...)
		if next == "" {
			break
		}
		if last := items[len(items)-1].Seq; next != strconv.FormatInt(last, 10) {
			t.Errorf("page %d: next %q, last seq %d", pages, next, last)
		}
		if n := len(got); n < len(want) && size+len(want[n].Payload) <= db.pageBytes {
			t.Errorf("page %d ended before event %d, which fits (%d + %d <= %d)",
				pages, want[n].Seq, size, len(want[n].Payload), db.pageBytes)
		}
		cursor = next
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("paged events (-want +got):\n%s", diff)
	}
	if pages < 4 {
		t.Errorf("%d pages of %d events under a budget of %d bytes: want the budget to split them", pages, len(want), db.pageBytes)
	}
}
