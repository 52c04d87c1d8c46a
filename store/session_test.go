package store

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

func strp(s string) *string { return &s }

func testSessionRoundTrip(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	timeout := uint64(90)
	s := &baton.Session{
		ID:            baton.NewID(baton.PrefixSession),
		ClientKeyID:   ck.ID,
		ProfileID:     p.ID,
		ClientVersion: strp("ts-sdk/1.2"),
		ClientTools: map[string][]baton.ToolDef{ck.ID: {
			{Name: "notify", Description: strp("tell the user"), InputSchema: json.RawMessage(`{"type":"object"}`)},
			{Name: "bare", InputSchema: json.RawMessage(`{}`)},
		}},
		SandboxTools: map[string][]baton.ToolDef{ck.ID: nil},
		SubagentTools: map[string][]baton.SubagentToolDef{ck.ID: {{
			Name: "delegate", InputSchema: json.RawMessage(`{}`), Image: "agents:1",
			Subagents: []baton.SubagentDef{{Harness: "claude", CommandTemplate: "claude -p {prompt}", PromptVia: "arg", TimeoutSecs: &timeout}},
		}}},
	}
	sk, plain := baton.MintKey(baton.RoleSession, s.ID, p.ID, ck.ID)
	evs := []*baton.Event{newEvent("", baton.EventSessionOpen), newEvent("", "session.note")}
	if err := db.CreateSession(ctx, s, sk, evs...); err != nil {
		t.Fatal(err)
	}
	if s.State != baton.StateOpen || s.CreatedAt.IsZero() {
		t.Errorf("CreateSession did not default state/created_at: %+v", s)
	}
	got, err := db.Session(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := *s
	want.SandboxTools = map[string][]baton.ToolDef{ck.ID: {}} // nil lists come back empty
	if diff := cmp.Diff(&want, got); diff != "" {
		t.Errorf("session round trip (-want +got):\n%s", diff)
	}
	if _, err := db.KeyByHash(ctx, baton.RoleSession, baton.Digest(plain)); err != nil {
		t.Errorf("session key not stored: %v", err)
	}
	for i, e := range evs {
		if e.SessionID != s.ID || e.Seq != int64(i+1) || e.ID == "" {
			t.Errorf("event %d = %+v, want session %s seq %d", i, e, s.ID, i+1)
		}
	}
	if diff := cmp.Diff(evs, allEvents(t, db, s.ID)); diff != "" {
		t.Errorf("stored events (-want +got):\n%s", diff)
	}

	// A failed-open audit row: no key, error state, no close time (it was
	// never open), nil maps → empty maps.
	audit := &baton.Session{ClientKeyID: ck.ID, ProfileID: "pro_gone", State: baton.StateError}
	if err := db.CreateSession(ctx, audit, nil, newEvent("", baton.EventSessionError)); err != nil {
		t.Fatal(err)
	}
	got, err = db.Session(ctx, audit.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.State != baton.StateError || got.ClosedAt != nil || got.ClientVersion != nil ||
		got.ClientTools == nil || len(got.ClientTools) != 0 || got.SandboxTools == nil || got.SubagentTools == nil {
		t.Errorf("audit session = %+v", got)
	}

	_, err = db.Session(ctx, "ses_missing")
	wantCode(t, err, baton.ECodeNotFound, "no session ses_missing")
}

func testSessionCreateAtomic(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	_, sk := mkSession(t, db, ck)

	// The key insert fails (its id is taken): the session and its events
	// must not exist either.
	s := &baton.Session{ID: baton.NewID(baton.PrefixSession), ClientKeyID: ck.ID, ProfileID: p.ID}
	dupKey := *sk
	dupKey.Name = s.ID
	if err := db.CreateSession(ctx, s, &dupKey, newEvent("", baton.EventSessionOpen)); err == nil {
		t.Fatal("CreateSession with a duplicate key id succeeded")
	}
	if _, err := db.Session(ctx, s.ID); baton.ErrorCode(err) != baton.ECodeNotFound {
		t.Errorf("half-created session exists (err %v)", err)
	}
	if n := len(allEvents(t, db, s.ID)); n != 0 {
		t.Errorf("half-created session has %d events", n)
	}
	// The id is free to use afterwards, and numbering starts at 1.
	ev := newEvent("", baton.EventSessionOpen)
	if err := db.CreateSession(ctx, s, nil, ev); err != nil {
		t.Fatal(err)
	}
	if ev.Seq != 1 {
		t.Errorf("first event seq = %d, want 1", ev.Seq)
	}
}

func testSessionList(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	var all []string
	byState := map[baton.SessionState][]string{}
	for i := range 7 {
		s, _ := mkSession(t, db, ck)
		st := baton.StateOpen
		switch i % 3 {
		case 1:
			st = baton.StateClosed
		case 2:
			st = baton.StateError
		}
		if st != baton.StateOpen {
			if _, err := db.EndSession(ctx, s.ID, st, nil); err != nil {
				t.Fatal(err)
			}
		}
		all = append(all, s.ID)
		byState[st] = append(byState[st], s.ID)
	}
	collect := func(state baton.SessionState) []string {
		var ids []string
		cursor := ""
		for {
			items, next, err := db.ListSessions(ctx, state, baton.Page{Cursor: cursor, Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range items {
				if state != "" && s.State != state {
					t.Errorf("ListSessions(%q) returned a %s session", state, s.State)
				}
				ids = append(ids, s.ID)
			}
			if next == "" {
				return ids
			}
			cursor = next
		}
	}
	if diff := cmp.Diff(all, collect("")); diff != "" {
		t.Errorf("all sessions (-want +got):\n%s", diff)
	}
	for _, st := range []baton.SessionState{baton.StateOpen, baton.StateClosed, baton.StateError} {
		if diff := cmp.Diff(byState[st], collect(st)); diff != "" {
			t.Errorf("%s sessions (-want +got):\n%s", st, diff)
		}
	}
}

func testJoinSession(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	a := mkKey(t, db, baton.RoleClient, p.ID)
	b := mkKey(t, db, baton.RoleClient, p.ID)
	aTools := []baton.ToolDef{{Name: "a-tool", InputSchema: json.RawMessage(`{}`)}}
	s := &baton.Session{ClientKeyID: a.ID, ProfileID: p.ID, ClientTools: map[string][]baton.ToolDef{a.ID: aTools}}
	if err := db.CreateSession(ctx, s, nil, newEvent("", baton.EventSessionOpen)); err != nil {
		t.Fatal(err)
	}

	first := baton.Participant{
		ClientKeyID:  b.ID,
		Tools:        []baton.ToolDef{{Name: "old", InputSchema: json.RawMessage(`{}`)}},
		SandboxTools: []baton.ToolDef{{Name: "sbx", InputSchema: json.RawMessage(`{}`)}},
	}
	k1, _ := baton.MintKey(baton.RoleSession, s.ID, p.ID, b.ID)
	ev := newEvent("", baton.EventSessionJoin)
	if err := db.JoinSession(ctx, s.ID, first, k1, ev); err != nil {
		t.Fatal(err)
	}
	if ev.SessionID != s.ID || ev.Seq != 2 {
		t.Errorf("join event = %+v, want seq 2 of %s", ev, s.ID)
	}
	// Rejoining replaces b's entries; a's stay.
	second := baton.Participant{ClientKeyID: b.ID, Tools: []baton.ToolDef{{Name: "new", InputSchema: json.RawMessage(`{}`)}}}
	k2, _ := baton.MintKey(baton.RoleSession, s.ID, p.ID, b.ID)
	if err := db.JoinSession(ctx, s.ID, second, k2, newEvent("", baton.EventSessionJoin)); err != nil {
		t.Fatal(err)
	}
	got, err := db.Session(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	wantTools := map[string][]baton.ToolDef{a.ID: aTools, b.ID: second.Tools}
	if diff := cmp.Diff(wantTools, got.ClientTools); diff != "" {
		t.Errorf("client tools after rejoin (-want +got):\n%s", diff)
	}
	wantSbx := map[string][]baton.ToolDef{b.ID: {}}
	if diff := cmp.Diff(wantSbx, got.SandboxTools); diff != "" {
		t.Errorf("sandbox tools after rejoin (-want +got):\n%s", diff)
	}
	if _, ok := got.SubagentTools[b.ID]; !ok {
		t.Errorf("subagent tools has no entry for the joiner: %v", got.SubagentTools)
	}
	for _, k := range []*baton.Key{k1, k2} {
		if _, err := db.KeyByHash(ctx, baton.RoleSession, k.Hash); err != nil {
			t.Errorf("joiner session key %s not stored: %v", k.ID, err)
		}
	}
	if diff := cmp.Diff([]int64{1, 2, 3}, seqs(allEvents(t, db, s.ID))); diff != "" {
		t.Errorf("seqs (-want +got):\n%s", diff)
	}
}

func testJoinSessionErrors(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	a := mkKey(t, db, baton.RoleClient, p.ID)
	closed, _ := mkSession(t, db, a)
	failed, _ := mkSession(t, db, a)
	if _, err := db.EndSession(ctx, closed.ID, baton.StateClosed, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := db.EndSession(ctx, failed.ID, baton.StateError, nil); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ id, msg string }{
		{closed.ID, "session is already closed"},
		{failed.ID, "session is already error"},
	} {
		k, _ := baton.MintKey(baton.RoleSession, c.id, p.ID, a.ID)
		err := db.JoinSession(ctx, c.id, baton.Participant{ClientKeyID: a.ID}, k, newEvent("", baton.EventSessionJoin))
		wantCode(t, err, baton.ECodeSessionClosed, c.msg)
		if _, err := db.KeyByHash(ctx, baton.RoleSession, k.Hash); baton.ErrorCode(err) != baton.ECodeNotFound {
			t.Errorf("failed join stored its key (err %v)", err)
		}
		if n := len(allEvents(t, db, c.id)); n != 1 {
			t.Errorf("failed join appended events: %d", n)
		}
	}
	err := db.JoinSession(ctx, "ses_nope", baton.Participant{ClientKeyID: a.ID}, nil, nil)
	wantCode(t, err, baton.ECodeNotFound, "no session ses_nope")
}

func testEndSession(t *testing.T, db *DB) {
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	a := mkKey(t, db, baton.RoleClient, p.ID)
	for _, st := range []baton.SessionState{baton.StateClosed, baton.StateError} {
		s, _ := mkSession(t, db, a)
		ev := newEvent("", "session."+string(st))
		ended, err := db.EndSession(ctx, s.ID, st, ev)
		if err != nil || !ended {
			t.Fatalf("EndSession(%s) = %v, %v", st, ended, err)
		}
		got, err := db.Session(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.State != st || got.ClosedAt == nil || got.ClosedAt.Before(got.CreatedAt) {
			t.Errorf("ended session = state %s closed_at %v", got.State, got.ClosedAt)
		}
		if ev.Seq != 2 || ev.SessionID != s.ID {
			t.Errorf("end event = %+v", ev)
		}
		// Terminal states never change, and nothing is appended.
		ended, err = db.EndSession(ctx, s.ID, baton.StateClosed, newEvent("", baton.EventSessionClose))
		if err != nil || ended {
			t.Errorf("second EndSession = %v, %v; want false, nil", ended, err)
		}
		again, err := db.Session(ctx, s.ID)
		if err != nil {
			t.Fatal(err)
		}
		if again.State != st || !again.ClosedAt.Equal(*got.ClosedAt) {
			t.Errorf("terminal session changed: %s %v", again.State, again.ClosedAt)
		}
		if diff := cmp.Diff([]int64{1, 2}, seqs(allEvents(t, db, s.ID))); diff != "" {
			t.Errorf("seqs (-want +got):\n%s", diff)
		}
	}
	_, err := db.EndSession(ctx, "ses_nope", baton.StateClosed, nil)
	wantCode(t, err, baton.ECodeNotFound, "no session ses_nope")
	s, _ := mkSession(t, db, a)
	if _, err := db.EndSession(ctx, s.ID, baton.StateOpen, nil); err == nil {
		t.Error("EndSession to open succeeded")
	}
}
