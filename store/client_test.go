package store

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton"
)

func TestAssignName(t *testing.T) {
	long := strings.Repeat("a", 32)
	cases := []struct {
		asked string
		spent []string
		want  string
	}{
		{"laptop", nil, "laptop"},
		{"laptop", []string{"laptop"}, "laptop-2"},
		{"laptop", []string{"laptop", "laptop-2", "laptop-3"}, "laptop-4"},
		{"laptop", []string{"laptop", "laptop-3"}, "laptop-2"},
		{long, []string{long}, strings.Repeat("a", 30) + "-2"},
		{long, append([]string{long}, names("a", 30, 2, 9)...), strings.Repeat("a", 29) + "-10"},
	}
	for _, c := range cases {
		spent := map[string]bool{}
		for _, s := range c.spent {
			spent[s] = true
		}
		if got := AssignName(c.asked, spent); got != c.want {
			t.Errorf("AssignName(%q, %v) = %q, want %q", c.asked, c.spent, got, c.want)
		}
	}
}

// names returns base(len n)-i for i in [from, to].
func names(b string, n, from, to int) []string {
	var out []string
	for i := from; i <= to; i++ {
		out = append(out, strings.Repeat(b, n)+"-"+string(rune('0'+i)))
	}
	return out
}

func TestClientStore(t *testing.T) { testClientStore(t, openSQLite) }

func TestClientStorePostgres(t *testing.T) {
	if os.Getenv(pgEnv) == "" {
		t.Skipf("%s is not set; skipping the PostgreSQL run of the client store", pgEnv)
	}
	testClientStore(t, openPostgres)
}

func testClientStore(t *testing.T, open func(t testing.TB) *DB) {
	db := open(t)
	ctx := context.Background()
	p := mkProfile(t, db, "p")
	ck := mkKey(t, db, baton.RoleClient, p.ID)
	s, _ := mkSession(t, db, ck)
	at := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(c *baton.RegisteredClient) *baton.Event { return newEvent(s.ID, baton.EventClientRegister) }
	reg := func(name string, ttl int) (*baton.RegisteredClient, error) {
		c := &baton.RegisteredClient{SessionID: s.ID, RequestedName: name, TTLSeconds: ttl, CreatedAt: at,
			Tools: []baton.ClientTool{{Name: "x", Description: "d", Parameters: []byte(`{"type":"object"}`)}}}
		return c, db.CreateClient(ctx, c, 2, mk)
	}
	a, err := reg("lap", 10)
	if err != nil {
		t.Fatal(err)
	}
	b, err := reg("lap", 0)
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "lap" || b.Name != "lap-2" || a.ExpiresAt == nil || !a.ExpiresAt.Equal(at.Add(10*time.Second)) || b.ExpiresAt != nil {
		t.Fatalf("a %+v b %+v", a, b)
	}
	if _, err := reg("c", 0); baton.ErrorCode(err) != baton.ECodeConflict {
		t.Fatalf("cap: %v", err)
	}
	got, err := db.Client(ctx, s.ID, a.ID)
	if err != nil || got.Tools[0].Name != "x" || string(got.Tools[0].Parameters) != `{"type":"object"}` {
		t.Fatalf("Client: %+v %v", got, err)
	}
	if due, _ := db.DueClients(ctx, at.Add(9*time.Second)); len(due) != 0 {
		t.Errorf("due early: %d", len(due))
	}
	if _, err := db.PingClient(ctx, s.ID, a.ID, at.Add(8*time.Second)); err != nil {
		t.Fatal(err)
	}
	if due, _ := db.DueClients(ctx, at.Add(17*time.Second)); len(due) != 0 {
		t.Errorf("due after ping: %d", len(due))
	}
	due, _ := db.DueClients(ctx, at.Add(18*time.Second))
	if len(due) != 1 || due[0].ID != a.ID {
		t.Fatalf("due %v", due)
	}
	ok, err := db.EndClient(ctx, s.ID, a.ID, baton.ClientGoneTTL, at.Add(19*time.Second), newEvent(s.ID, baton.EventClientExpire))
	if !ok || err != nil {
		t.Fatalf("EndClient: %v %v", ok, err)
	}
	if _, err := db.PingClient(ctx, s.ID, a.ID, at.Add(20*time.Second)); baton.ErrorCode(err) != baton.ECodeNotFound {
		t.Errorf("ping of a gone client: %v", err)
	}
	if ok, _ := db.EndClient(ctx, s.ID, a.ID, baton.ClientGoneTTL, at, nil); ok {
		t.Error("second EndClient ended again")
	}
	if _, err := db.EndClient(ctx, s.ID, "nope", baton.ClientGoneTTL, at, nil); baton.ErrorCode(err) != baton.ECodeNotFound {
		t.Errorf("unknown EndClient: %v", err)
	}
	// The gone client's name stays spent, and its slot is free.
	c, err := reg("lap", 0)
	if err != nil || c.Name != "lap-3" {
		t.Fatalf("after end: %+v %v", c, err)
	}
	if err := db.SetRegisteredTools(ctx, s.ID, b.ID, nil, at, newEvent(s.ID, baton.EventClientTools)); err != nil {
		t.Fatal(err)
	}
	live, _ := db.LiveClients(ctx, s.ID)
	if len(live) != 2 || live[0].ID != b.ID || len(live[0].Tools) != 0 {
		t.Errorf("live %+v", live)
	}
	// Survives a reopen.
	db.Close()
	again := openURL(t, db.url)
	if live, _ := again.LiveClients(ctx, s.ID); len(live) != 2 {
		t.Errorf("after reopen: %d live", len(live))
	}
	if _, err := again.EndSession(ctx, s.ID, baton.StateClosed, nil); err != nil {
		t.Fatal(err)
	}
	if err := again.CreateClient(ctx, &baton.RegisteredClient{SessionID: s.ID, RequestedName: "x"}, 9, nil); baton.ErrorCode(err) != baton.ECodeSessionClosed {
		t.Error("registered on a closed session")
	}
}
