package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseURLs(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		err  string
	}{
		{in: "http://127.0.0.1:18080", want: []string{"http://127.0.0.1:18080"}},
		{in: "http://a:1/, https://b:2 ,http://c", want: []string{"http://a:1", "https://b:2", "http://c"}},
		{in: "", err: "not a client origin"},
		{in: "http://a:1,", err: "not a client origin"},
		{in: "a:1", err: "not a client origin"},
		{in: "ftp://a:1", err: "not a client origin"},
		{in: "http://a:1/api", err: "not a client origin"},
		{in: "http://a:1?x=1", err: "not a client origin"},
		{in: "http://a:1,http://a:1/", err: "listed twice"},
	}
	for _, tc := range tests {
		got, err := parseURLs(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseURLs(%q) = %q, %v; want an error with %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseURLs(%q): %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("parseURLs(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestParsePIDs(t *testing.T) {
	tests := []struct {
		in    string
		nodes int
		want  []int
		err   string
	}{
		{in: "", nodes: 3},  // find them by port
		{in: "0", nodes: 1}, // the old default, written out
		{in: "42", nodes: 1, want: []int{42}},
		{in: "42, 43,44", nodes: 3, want: []int{42, 43, 44}},
		{in: "42,43", nodes: 3, err: "2 process ids for 3 URLs"},
		{in: "42,x", nodes: 2, err: "not a process id"},
		{in: "42,0", nodes: 2, err: "not a process id"},
		{in: "-1", nodes: 1, err: "not a process id"},
	}
	for _, tc := range tests {
		got, err := parsePIDs(tc.in, tc.nodes)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parsePIDs(%q, %d) = %v, %v; want an error with %q", tc.in, tc.nodes, got, err, tc.err)
			}
			continue
		}
		if err != nil || !cmp.Equal(tc.want, got) {
			t.Errorf("parsePIDs(%q, %d) = %v, %v; want %v", tc.in, tc.nodes, got, err, tc.want)
		}
	}
}

func TestSessionOf(t *testing.T) {
	for path, want := range map[string]string{
		"/api/v1/sessions/ses_1/rpc": "ses_1",
		"/api/v1/sessions/ses_1":     "ses_1",
		"/api/v1/sessions":           "", // opening one
		"/api/v1/sessions/":          "",
		"/admin/v1/sessions/ses_1":   "",
		"/v1/sessions/ses_1":         "", // loadgen does not use the registered-client routes
	} {
		if got := sessionOf(path); got != want {
			t.Errorf("sessionOf(%q) = %q, want %q", path, got, want)
		}
	}
}

// node is a loopback server standing for a Baton node: it records the
// paths it was asked for.
type node struct {
	*httptest.Server
	mu    sync.Mutex
	paths []string
}

func startNode(t *testing.T) *node {
	t.Helper()
	n := &node{}
	n.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.mu.Lock()
		n.paths = append(n.paths, r.URL.Path)
		n.mu.Unlock()
		io.WriteString(w, n.URL)
	}))
	t.Cleanup(n.Close)
	return n
}

func (n *node) got() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.paths...)
}

func TestRoundRobin(t *testing.T) {
	nodes := []*node{startNode(t), startNode(t), startNode(t)}
	var urls []string
	for _, n := range nodes {
		urls = append(urls, n.URL)
	}
	rr, err := newRoundRobin(http.DefaultTransport, urls)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: rr}
	t.Cleanup(hc.CloseIdleConnections)
	get := func(base, path string) string {
		t.Helper()
		req, err := http.NewRequest(http.MethodPost, base+path, strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatal(err)
		}
		if req.URL.String() != base+path {
			t.Fatalf("the transport changed the caller's request to %s", req.URL)
		}
		return string(b)
	}

	// Opening a session (and the admin API) is not spread: it goes to the
	// node it is addressed to, which becomes the owner.
	for range 2 {
		if got := get(urls[2], "/api/v1/sessions"); got != urls[2] {
			t.Fatalf("open addressed to node 3 answered by %s", got)
		}
	}
	rr.own("s1", 0)
	rr.own("s2", 2)

	// Requests about sessions, whatever node they are addressed to, go to
	// node 1, 2, 3, 1, 2, 3: each node gets a third.
	var answered []string
	for i := range 6 {
		id := []string{"s1", "s2", "s3"}[i%3] // s3's owner is unknown: not counted
		answered = append(answered, get(urls[0], "/api/v1/sessions/"+id+"/rpc"))
	}
	want := []string{urls[0], urls[1], urls[2], urls[0], urls[1], urls[2]}
	if diff := cmp.Diff(want, answered); diff != "" {
		t.Fatalf("answering nodes (-want +got):\n%s", diff)
	}
	// s1 (owner node 1) went to nodes 1 and 1; s2 (owner node 3) to nodes
	// 2 and 2.
	if local, fwd := rr.counts(); local != 2 || fwd != 2 {
		t.Fatalf("local %d forwarded %d, want 2 and 2", local, fwd)
	}
	for i, n := range nodes {
		var sessionPaths int
		for _, p := range n.got() {
			if sessionOf(p) != "" {
				sessionPaths++
			}
		}
		if sessionPaths != 2 {
			t.Errorf("node %d served %d session requests, want 2 (%q)", i+1, sessionPaths, n.got())
		}
	}
	if got := nodes[2].got(); got[0] != "/api/v1/sessions" || got[1] != "/api/v1/sessions" {
		t.Errorf("node 3 did not serve both opens: %q", got)
	}

	if _, err := newRoundRobin(http.DefaultTransport, nil); err == nil {
		t.Error("round robin over no nodes accepted")
	}
}

func TestServerPIDsByPort(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("needs /proc")
	}
	var urls []string
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		urls = append(urls, "http://"+ln.Addr().String())
	}
	pids, err := serverPIDs(urls, nil)
	if err != nil {
		t.Fatal(err)
	}
	if me := os.Getpid(); len(pids) != 2 || pids[0] != me || pids[1] != me {
		t.Fatalf("pids %v, want this process %d twice", pids, me)
	}
	if got, err := serverPIDs(urls, []int{7, 8}); err != nil || !cmp.Equal(got, []int{7, 8}) {
		t.Fatalf("given pids: %v, %v", got, err)
	}
	// A node that is not listening names its URL.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := "http://" + ln.Addr().String()
	ln.Close()
	if _, err := serverPIDs(append(urls, gone), nil); err == nil || !strings.Contains(err.Error(), gone) {
		t.Fatalf("stopped node: %v", err)
	}
}

func TestParseProcStat(t *testing.T) {
	stat := `cpu  100 5 50 800 40 3 2 0 10 0
cpu0 50 2 25 400 20 1 1 0 5 0
cpu1 50 3 25 400 20 2 1 0 5 0
intr 12345
ctxt 999
`
	got, err := parseProcStat(stat)
	if err != nil {
		t.Fatal(err)
	}
	// Busy: user+nice+system+irq+softirq+steal = 160 ticks; total adds
	// idle and iowait: 1000 ticks. Guest (10) is inside user already.
	want := cpuTimes{Busy: 1600 * time.Millisecond, Total: 10 * time.Second, CPUs: 2}
	if got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	for _, bad := range []string{"", "cpu  1 2 3\ncpu0 1 2 3 4 5 6 7 8\n", "cpu  1 2 3 4 5 6 7 x\ncpu0 1\n", "cpu  1 2 3 4 5 6 7 8\n"} {
		if _, err := parseProcStat(bad); err == nil {
			t.Errorf("parseProcStat(%q) succeeded", bad)
		}
	}
	if runtime.GOOS == "linux" {
		if c, err := machineCPU("/proc"); err != nil || c.CPUs < 1 || c.Total <= 0 || c.Busy > c.Total {
			t.Fatalf("this machine: %+v, %v", c, err)
		}
	}
}

func TestSampleTree(t *testing.T) {
	// A fake /proc: the postmaster 100 (utime 10, stime 5, reaped 30 + 20
	// ticks), its backend 101 (7 + 3), an unrelated process 102 and a
	// grandchild 103 (counted in 101's reaped time once it ends, not now).
	root := t.TempDir()
	stat := func(pid, ppid, ut, st, cut, cst int) {
		dir := filepath.Join(root, strconv.Itoa(pid))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		line := fmt.Sprintf("%d (postgres: x (y)) S %d 1 1 0 -1 0 0 0 0 0 %d %d %d %d 20 0 1 0\n", pid, ppid, ut, st, cut, cst)
		if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	stat(100, 1, 10, 5, 30, 20)
	stat(101, 100, 7, 3, 0, 0)
	stat(102, 1, 1000, 1000, 0, 0)
	stat(103, 101, 500, 0, 0, 0)
	if err := os.MkdirAll(filepath.Join(root, "net"), 0o755); err != nil { // not a process
		t.Fatal(err)
	}
	got, err := sampleTree(root, 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := 750 * time.Millisecond; got != want { // 15 + 50 + 10 ticks
		t.Fatalf("tree CPU %v, want %v", got, want)
	}
	if _, err := sampleTree(root, 999); err == nil {
		t.Fatal("a missing process sampled")
	}
	if _, _, _, err := parseStatTree("1 (x) S 1 2 3"); err == nil {
		t.Fatal("short stat line parsed")
	}
}

func TestPrintServers(t *testing.T) {
	perRT := func(d time.Duration) time.Duration { return d / 100 } // 100 round trips
	u := func(user, sys time.Duration) usage {
		return usage{User: user, System: sys, RSS: 1 << 20, PeakRSS: 2 << 20}
	}
	var b strings.Builder
	printServers(&b, []string{"http://a:1", "http://b:2"}, []int{11, 12},
		[]usage{u(0, 0), u(time.Second, 0)},
		[]usage{u(30*time.Millisecond, 10*time.Millisecond), u(time.Second+50*time.Millisecond, 10*time.Millisecond)},
		perRT, time.Second)
	got := b.String()
	for _, want := range []string{
		"servers (2)       CPU 100ms (user 80ms, sys 20ms): 1000 µs per round trip, 10% of one core\n",
		"node 1 pid 11     CPU 40ms: 400 µs per round trip, 4% of one core; RSS 1.0 MiB after, peak 2.0 MiB (http://a:1)\n",
		"node 2 pid 12     CPU 60ms: 600 µs per round trip, 6% of one core; RSS 1.0 MiB after, peak 2.0 MiB (http://b:2)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("report lacks %q:\n%s", want, got)
		}
	}
	b.Reset()
	printServers(&b, []string{"http://a:1"}, []int{11}, []usage{u(0, 0)}, []usage{u(30*time.Millisecond, 10*time.Millisecond)}, perRT, time.Second)
	if want := "server pid 11     CPU 40ms (user 30ms, sys 10ms): 400 µs per round trip, 4% of one core\n"; !strings.HasPrefix(b.String(), want) {
		t.Errorf("one node: %q, want it to start with %q", b.String(), want)
	}
}
