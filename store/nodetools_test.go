package store

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/google/go-cmp/cmp"
)

func toolDef(name string) baton.ToolDef {
	desc := "does " + name
	return baton.ToolDef{Name: name, Description: &desc, InputSchema: json.RawMessage(`{"type":"object"}`)}
}

func register(t *testing.T, db *DB, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := db.RegisterNode(context.Background(), &baton.Node{ID: id, AdvertiseURL: "http://" + id + ":1", Version: "v1"}); err != nil {
			t.Fatal(err)
		}
	}
}

func remoteTools(t *testing.T, db *DB, self string) []baton.NodeTools {
	t.Helper()
	got, err := db.RemoteTools(context.Background(), self, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestClusterNodeTools(t *testing.T) {
	c := newCluster(t, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	ctx := context.Background()
	register(t, a, "a", "b", "c")

	// Nobody published: the live nodes are listed, without tools.
	want := []baton.NodeTools{
		{NodeID: "b", AdvertiseURL: "http://b:1", Tools: map[string][]baton.ToolDef{}},
		{NodeID: "c", AdvertiseURL: "http://c:1", Tools: map[string][]baton.ToolDef{}},
	}
	if diff := cmp.Diff(want, remoteTools(t, a, "a")); diff != "" {
		t.Fatalf("before any publish (-want +got):\n%s", diff)
	}

	for node, tools := range map[string]map[string][]baton.ToolDef{
		"a": {"env_a": {toolDef("mine")}},
		"b": {"env_a": {toolDef("grep"), toolDef("ls")}, "env_b": {toolDef("lookup")}, "env_none": nil},
		"c": {"env_b": {toolDef("lookup")}},
	} {
		if err := b.PublishNodeTools(ctx, node, tools); err != nil {
			t.Fatal(err)
		}
	}
	want = []baton.NodeTools{
		{NodeID: "b", AdvertiseURL: "http://b:1", Tools: map[string][]baton.ToolDef{
			"env_a": {toolDef("grep"), toolDef("ls")}, "env_b": {toolDef("lookup")},
		}},
		{NodeID: "c", AdvertiseURL: "http://c:1", Tools: map[string][]baton.ToolDef{"env_b": {toolDef("lookup")}}},
	}
	if diff := cmp.Diff(want, remoteTools(t, a, "a")); diff != "" {
		t.Fatalf("published (-want +got):\n%s", diff)
	}
	if got := remoteTools(t, b, "b"); len(got) != 2 || got[0].NodeID != "a" || len(got[0].Tools["env_a"]) != 1 {
		t.Errorf("b sees %+v, want a (with its tool) and c", got)
	}

	// A publish replaces the node's rows whole.
	if err := b.PublishNodeTools(ctx, "b", map[string][]baton.ToolDef{"env_c": {toolDef("x")}}); err != nil {
		t.Fatal(err)
	}
	want[0].Tools = map[string][]baton.ToolDef{"env_c": {toolDef("x")}}
	if diff := cmp.Diff(want, remoteTools(t, a, "a")); diff != "" {
		t.Fatalf("replaced (-want +got):\n%s", diff)
	}

	// A draining node is flagged; a silent one is left out.
	if err := a.SetDraining(ctx, "b", true); err != nil {
		t.Fatal(err)
	}
	if _, err := a.write.Exec(`UPDATE nodes SET heartbeat_at = now() - interval '10 seconds' WHERE id = 'c'`); err != nil {
		t.Fatal(err)
	}
	got, err := a.RemoteTools(ctx, "a", 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	want = []baton.NodeTools{{NodeID: "b", AdvertiseURL: "http://b:1", Draining: true, Tools: map[string][]baton.ToolDef{"env_c": {toolDef("x")}}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("draining b, silent c (-want +got):\n%s", diff)
	}

	// A removed node's tools are not listed, and the next publish, by any
	// node, deletes them.
	if err := a.RemoveNode(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if got := remoteTools(t, a, "a"); len(got) != 1 || got[0].NodeID != "b" {
		t.Errorf("after removing c: %+v, want b alone", got)
	}
	if err := a.PublishNodeTools(ctx, "a", nil); err != nil {
		t.Fatal(err)
	}
	var rows int
	if err := a.write.QueryRow(`SELECT COUNT(*) FROM node_tools WHERE node_id IN ('a', 'c')`).Scan(&rows); err != nil {
		t.Fatal(err)
	}
	if rows != 0 {
		t.Errorf("%d rows of a (published none) and c (removed) left, want 0", rows)
	}
}

func TestClusterSecret(t *testing.T) {
	c := newCluster(t, "a", "b")
	ctx := context.Background()
	first, err := c.nodes["a"].ClusterSecret(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if b, err := hex.DecodeString(first); err != nil || len(b) != 32 {
		t.Fatalf("secret %q: want 32 bytes in hex (%v)", first, err)
	}
	for _, db := range []*DB{c.nodes["b"], c.nodes["a"]} {
		if again, err := db.ClusterSecret(ctx); err != nil || again != first {
			t.Errorf("%s: secret %q, %v; want the first one, %q", db.node, again, err, first)
		}
	}
}

func TestNodeToolsSQLite(t *testing.T) {
	db := openSQLite(t)
	ctx := context.Background()
	if err := db.PublishNodeTools(ctx, "a", nil); baton.ErrorCode(err) != baton.ECodeUnavailable {
		t.Errorf("PublishNodeTools: %v, want unavailable", err)
	}
	if _, err := db.RemoteTools(ctx, "a", time.Minute); baton.ErrorCode(err) != baton.ECodeUnavailable {
		t.Errorf("RemoteTools: %v, want unavailable", err)
	}
	if _, err := db.ClusterSecret(ctx); baton.ErrorCode(err) != baton.ECodeUnavailable {
		t.Errorf("ClusterSecret: %v, want unavailable", err)
	}
}
