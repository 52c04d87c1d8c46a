package main

import (
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/baton-engine/baton/internal/pgtest"
)

// clusterNodesEnv, with BATON_TEST_POSTGRES_DSN, runs the end-to-end suite
// against a cluster (docs/cluster.md): every startServer starts that many
// nodes on one fresh PostgreSQL schema, and its client URL is a proxy
// that sends each request to the next node in turn, as a round-robin load
// balancer would. scripts/test-cluster.sh sets it.
const clusterNodesEnv = "BATON_TEST_CLUSTER_NODES"

// clusterNodes is the number of nodes of the cluster mode, 0 when off.
func clusterNodes() int {
	n, _ := strconv.Atoi(os.Getenv(clusterNodesEnv))
	if n < 2 || os.Getenv(pgtest.Env) == "" {
		return 0
	}
	return n
}

// onlySingleNode skips t in cluster mode: it checks something a cluster
// does differently on purpose, or that docs/cluster.md lists as not yet
// working across nodes.
func onlySingleNode(t testing.TB, why string) {
	t.Helper()
	if clusterNodes() > 0 {
		t.Skip("single node only: " + why)
	}
}

// startClusterServer starts the nodes of the cluster mode with env (the
// first writes the admin key; each has a data directory of its own for
// what it keeps on disk) and returns the first node with its client URL
// replaced by the round-robin proxy's.
func startClusterServer(t testing.TB, dir string, env map[string]string, n int) *server {
	t.Helper()
	env["BATON_DATABASE_URL"] = pgtest.Schema(t)
	env["BATON_LEASE_TTL"] = "1s"
	first := runServer(t, dir, env)
	urls := []string{first.clientURL}
	for range n - 1 {
		e := maps.Clone(env)
		d := t.TempDir()
		e["BAE_DB_PATH"] = filepath.Join(d, "bae.db")
		urls = append(urls, runServer(t, d, e).clientURL)
	}
	first.clientURL = roundRobinProxy(t, urls)
	return first
}

// roundRobinProxy serves a reverse proxy on loopback that sends each
// request to the next of urls, streaming answers as they come (NDJSON,
// WebSocket upgrades).
func roundRobinProxy(t testing.TB, urls []string) string {
	t.Helper()
	targets := make([]*url.URL, len(urls))
	for i, u := range urls {
		p, err := url.Parse(u)
		if err != nil {
			t.Fatal(err)
		}
		targets[i] = p
	}
	var next atomic.Uint64
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(targets[next.Add(1)%uint64(len(targets))])
			r.Out.Host = r.In.Host
		},
		FlushInterval: -1,
	}
	srv := httptest.NewServer(http.Handler(proxy))
	t.Cleanup(srv.Close)
	return srv.URL
}

// storeURL is what the server's store opens: its PostgreSQL URL, in the
// cluster mode or when a test set one, else its SQLite file.
func (s *server) storeURL() string {
	if u := s.env["BATON_DATABASE_URL"]; u != "" {
		return u
	}
	return s.env["BAE_DB_PATH"]
}
