package adminapi

import (
	"context"
	"errors"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/adminapi/adminclient"
	"github.com/baton-engine/baton/internal/httpx/httpxtest"
	"github.com/google/go-cmp/cmp"
)

// fakeNodes is a NodeRegistry whose Nodes returns nodes, or err; it counts
// the calls. The admin port only reads, so the writes panic.
type fakeNodes struct {
	mu    sync.Mutex
	nodes []*baton.Node
	err   error
	calls int
}

func (f *fakeNodes) Nodes(context.Context) ([]*baton.Node, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	return f.nodes, f.err
}

func (f *fakeNodes) RegisterNode(context.Context, *baton.Node) error {
	panic("not used by the admin port")
}

func (f *fakeNodes) HeartbeatNode(context.Context, string) error {
	panic("not used by the admin port")
}

func (f *fakeNodes) SetDraining(context.Context, string, bool) error {
	panic("not used by the admin port")
}

func (f *fakeNodes) RemoveNode(context.Context, string) error {
	panic("not used by the admin port")
}

func (f *fakeNodes) called() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

var _ baton.NodeRegistry = (*fakeNodes)(nil)

// clusterNodes are two nodes as the store lists them, oldest first; the
// times are not UTC, to show the wire is.
func clusterNodes() []*baton.Node {
	paris := time.FixedZone("CET", 3600)
	t0 := time.Date(2025, 3, 1, 11, 0, 0, 0, paris)
	return []*baton.Node{
		{ID: "node-a", AdvertiseURL: "http://10.0.0.1:8080", Version: "0.9.0", StartedAt: t0,
			HeartbeatAt: t0.Add(time.Hour + 1500*time.Microsecond), HeartbeatAge: 1234567 * time.Microsecond, Sessions: 3},
		{ID: "node-b", AdvertiseURL: "http://10.0.0.2:8080", Version: "0.9.1", StartedAt: t0.Add(time.Minute),
			HeartbeatAt: t0.Add(time.Hour), HeartbeatAge: 45 * time.Second, Draining: true},
	}
}

const clusterNodesJSON = `{"cluster":true,"nodes":[` +
	`{"id":"node-a","advertise_url":"http://10.0.0.1:8080","version":"0.9.0","started_at":"2025-03-01T10:00:00.000Z",` +
	`"heartbeat_at":"2025-03-01T11:00:00.001Z","heartbeat_age_ms":1234,"draining":false,"sessions":3},` +
	`{"id":"node-b","advertise_url":"http://10.0.0.2:8080","version":"0.9.1","started_at":"2025-03-01T10:01:00.000Z",` +
	`"heartbeat_at":"2025-03-01T11:00:00.000Z","heartbeat_age_ms":45000,"draining":true,"sessions":0}]}`

// newNodeServer is an admin server with authentication whose registry is
// nodes (nil for none).
func newNodeServer(t *testing.T, nodes baton.NodeRegistry) (*Server, *fakeAuth) {
	t.Helper()
	db := openStore(t)
	auth := &fakeAuth{}
	return New(Options{Addr: "127.0.0.1:0", Auth: auth, Store: db, Sessions: &fakeSessions{db: db}, Nodes: nodes}), auth
}

func TestListNodes(t *testing.T) {
	nodes := &fakeNodes{}
	srv, auth := newNodeServer(t, nodes)
	reset := func() {
		auth.err = nil
		nodes.mu.Lock()
		nodes.nodes, nodes.err, nodes.calls = clusterNodes(), nil, 0
		nodes.mu.Unlock()
	}
	set := func(list []*baton.Node, err error) func() {
		return func() {
			nodes.mu.Lock()
			defer nodes.mu.Unlock()
			nodes.nodes, nodes.err = list, err
		}
	}
	notCalled := func(t *testing.T, _ *httptest.ResponseRecorder) {
		if n := nodes.called(); n != 0 {
			t.Errorf("the registry was read %d times before authentication", n)
		}
	}
	const path = "/admin/v1/nodes"
	httpxtest.Run(t, srv.Handler(), reset, []httpxtest.Scenario{
		{Name: "no token", Method: "GET", Path: path,
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header"), Check: notCalled},
		{Name: "unknown token", Method: "GET", Path: path, Headers: httpxtest.Auth("Bearer bae_admin_nope"),
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "invalid admin key"), Check: notCalled},
		{Name: "oldest first, UTC, whole milliseconds", Method: "GET", Path: path, Headers: admin(),
			Status: 200, Want: clusterNodesJSON},
		{Name: "no node registered yet", Method: "GET", Path: path, Headers: admin(), Setup: set(nil, nil),
			Status: 200, Want: `{"cluster":true,"nodes":[]}`},
		{Name: "heartbeat after the read is no age", Method: "GET", Path: path, Headers: admin(),
			Setup:  set([]*baton.Node{{ID: "n", StartedAt: time.Unix(0, 0), HeartbeatAt: time.Unix(1, 0), HeartbeatAge: -3 * time.Millisecond}}, nil),
			Status: 200, Want: `{"cluster":true,"nodes":[{"id":"n","advertise_url":"","version":"","started_at":"1970-01-01T00:00:00.000Z",` +
				`"heartbeat_at":"1970-01-01T00:00:01.000Z","heartbeat_age_ms":0,"draining":false,"sessions":0}]}`},
		{Name: "registry unavailable", Method: "GET", Path: path, Headers: admin(),
			Setup:  set(nil, baton.Errorf(baton.ECodeUnavailable, "clustering needs PostgreSQL; a SQLite store serves one node")),
			Status: 503, Problem: httpxtest.Problem(503, "unavailable", "clustering needs PostgreSQL; a SQLite store serves one node")},
		{Name: "store failure does not leak", Method: "GET", Path: path, Headers: admin(),
			Setup:  set(nil, errors.New("list nodes: pq: password authentication failed for user secret_admin")),
			Status: 500, Check: func(t *testing.T, rec *httptest.ResponseRecorder) {
				httpxtest.Internal(t, rec)
				if strings.Contains(rec.Body.String(), "secret_admin") {
					t.Errorf("the error leaks: %s", rec.Body)
				}
			}},
		{Name: "read-only", Method: "POST", Path: path, Headers: admin(), Body: `{}`, Status: 405, Empty: true},
		{Name: "no node route", Method: "GET", Path: path + "/node-a", Headers: admin(), Status: 404, Empty: true},
	})
}

// Without a registry the server is a single node: a 200, never an error,
// so that `baton admin nodes` can say so.
func TestListNodesSingleNode(t *testing.T) {
	srv, _ := newNodeServer(t, nil)
	httpxtest.Run(t, srv.Handler(), nil, []httpxtest.Scenario{
		{Name: "single node", Method: "GET", Path: "/admin/v1/nodes", Headers: admin(),
			Status: 200, Want: `{"cluster":false,"nodes":[]}`},
		{Name: "still behind the admin key", Method: "GET", Path: "/admin/v1/nodes",
			Status: 401, Problem: httpxtest.Problem(401, "unauthorized", "missing Authorization header")},
	})
}

// TestNodesThroughClient: what the handler writes is what the admin
// client (and so `baton admin nodes`) reads, field for field.
func TestNodesThroughClient(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes baton.NodeRegistry
		want  *adminclient.NodeList
	}{
		{"cluster", &fakeNodes{nodes: clusterNodes()}, &adminclient.NodeList{Cluster: true, Nodes: []adminclient.Node{
			{ID: "node-a", AdvertiseURL: "http://10.0.0.1:8080", Version: "0.9.0", StartedAt: "2025-03-01T10:00:00.000Z",
				HeartbeatAt: "2025-03-01T11:00:00.001Z", HeartbeatAgeMS: 1234, Sessions: 3},
			{ID: "node-b", AdvertiseURL: "http://10.0.0.2:8080", Version: "0.9.1", StartedAt: "2025-03-01T10:01:00.000Z",
				HeartbeatAt: "2025-03-01T11:00:00.000Z", HeartbeatAgeMS: 45000, Draining: true},
		}}},
		{"single node", nil, &adminclient.NodeList{Nodes: []adminclient.Node{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := newNodeServer(t, tc.nodes)
			hs := httptest.NewServer(srv.Handler())
			defer hs.Close()
			c, err := adminclient.New(hs.URL, adminToken, hs.Client())
			if err != nil {
				t.Fatal(err)
			}
			got, _, err := c.Nodes(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("NodeList (-want +got):\n%s", diff)
			}
		})
	}
}
