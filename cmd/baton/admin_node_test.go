package main

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const nodesJSON = `{"cluster":true,"nodes":[
	{"id":"node-a","advertise_url":"http://10.0.0.1:8080","version":"0.9.0","started_at":"2025-03-01T10:00:00.000Z",
	 "heartbeat_at":"2025-03-01T11:00:00.000Z","heartbeat_age_ms":1234,"draining":false,"sessions":12},
	{"id":"node-b","advertise_url":"","version":"0.9.1","started_at":"2025-03-01T10:01:00.000Z",
	 "heartbeat_at":"2025-03-01T11:00:00.000Z","heartbeat_age_ms":125000,"draining":true,"sessions":0}]}`

func TestAdminNodes(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		body string
		want string
	}{
		{"cluster", nodesJSON,
			"ID      ADDRESS               VERSION  SESSIONS  HEARTBEAT  DRAINING\n" +
				"node-a  http://10.0.0.1:8080  0.9.0    12        1.2s ago   no\n" +
				"node-b  -                     0.9.1    0         2m5s ago   yes\n"},
		{"no node registered", `{"cluster":true,"nodes":[]}`, "no nodes registered\n"},
		{"single node", `{"cluster":false,"nodes":[]}`, "this Baton is a single node (SQLite; on PostgreSQL every Baton is a cluster, of one node or more)\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAdmin(t)
			f.handle("GET /admin/v1/nodes", reply(200, tt.body))
			code, out, errs := runAdmin(t, tokenEnv(f), "nodes")
			mustOK(t, code, errs)
			if d := cmp.Diff(tt.want, out); d != "" {
				t.Errorf("stdout (-want +got):\n%s", d)
			}
			code, out, errs = runAdmin(t, tokenEnv(f), "nodes", "--json")
			mustOK(t, code, errs)
			jsonEqual(t, out, tt.body)
			if r := f.requests(); len(r) != 2 || r[0].Path != "/admin/v1/nodes" || r[0].Auth != "Bearer bae_admin_test" {
				t.Errorf("requests = %+v", r)
			}
		})
	}
}

func TestAdminNodesErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		status  int
		body    string
		wantErr string
	}{
		{"no nodes array", 200, `{"cluster":true}`, "baton: unexpected response from admin API"},
		{"node of wrong shape", 200, `{"cluster":true,"nodes":[{"sessions":"many"}]}`, "baton: unexpected response from admin API"},
		{"unavailable", 503, `{"type":"unavailable","title":"Service Unavailable","status":503,"detail":"clustering needs PostgreSQL"}`,
			"baton: clustering needs PostgreSQL\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFakeAdmin(t)
			f.handle("GET /admin/v1/nodes", reply(tt.status, tt.body))
			code, out, errs := runAdmin(t, tokenEnv(f), "nodes")
			if code != exitRuntime || out != "" || !strings.HasPrefix(errs, tt.wantErr) {
				t.Errorf("exit %d, stdout %q, stderr %q; want exit 1 and %q", code, out, errs, tt.wantErr)
			}
		})
	}
	f := newFakeAdmin(t)
	if code, _, errs := runAdmin(t, tokenEnv(f), "nodes", "extra"); code != exitUsage {
		t.Errorf("nodes extra: exit %d, stderr %q; want 2", code, errs)
	}
	if n := len(f.requests()); n != 0 {
		t.Errorf("a usage error sent %d requests", n)
	}
}

func TestAgo(t *testing.T) {
	for d, want := range map[time.Duration]string{
		-5 * time.Millisecond:              "0s ago",
		0:                                  "0s ago",
		40 * time.Millisecond:              "0s ago",
		850 * time.Millisecond:             "900ms ago",
		1234 * time.Millisecond:            "1.2s ago",
		59940 * time.Millisecond:           "59.9s ago",
		125 * time.Second:                  "2m5s ago",
		2*time.Hour + 3*time.Minute + 31e9: "2h4m0s ago",
	} {
		if got := ago(d); got != want {
			t.Errorf("ago(%v) = %q, want %q", d, got, want)
		}
	}
}

// TestAdminNodesAgainstServer: a server on SQLite is a single node, and
// `baton admin nodes` says so.
func TestAdminNodesAgainstServer(t *testing.T) {
	t.Parallel()
	onlySingleNode(t, "it checks what a single node (SQLite) answers")
	s := startServer(t)
	env := map[string]string{"BAE_ADMIN_ADDR": strings.TrimPrefix(s.adminURL, "http://"), "BAE_ADMIN_TOKEN": s.adminKey}
	code, out, errs := runCLI(t, env, "admin", "nodes")
	if code != 0 || out != singleNode+"\n" {
		t.Fatalf("admin nodes: exit %d, stdout %q, stderr %s", code, out, errs)
	}
	code, out, errs = runCLI(t, env, "admin", "nodes", "--json")
	if code != 0 {
		t.Fatalf("admin nodes --json: exit %d, stderr %s", code, errs)
	}
	jsonEqual(t, out, `{"cluster":false,"nodes":[]}`)
	// Behind the admin key like every admin route.
	bad := map[string]string{"BAE_ADMIN_ADDR": env["BAE_ADMIN_ADDR"], "BAE_ADMIN_TOKEN": "bae_admin_nope"}
	if code, _, errs = runCLI(t, bad, "admin", "nodes"); code != 1 || !strings.Contains(errs, "rejected the admin key") {
		t.Fatalf("bad token: exit %d, stderr %s", code, errs)
	}
}
