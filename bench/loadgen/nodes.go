package main

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Several nodes. -url may list the client URLs of several nodes of one
// Baton cluster (docs/cluster.md). Session i is opened on node i mod N,
// which makes that node its owner. Then, by default, every request about
// a session goes to the next node in turn, whichever owns it, as behind
// a round-robin load balancer: with N nodes about (N-1)/N of them reach
// a node that forwards them to the owner. With -pin a session's requests
// all go to the node that opened it (a client that knows the owner), and
// none is forwarded.

// parseURLs splits -url into client URLs: http(s)://host[:port] origins,
// distinct, without the trailing slash.
func parseURLs(s string) ([]string, error) {
	var out []string
	seen := map[string]bool{}
	for _, raw := range strings.Split(s, ",") {
		raw = strings.TrimSuffix(strings.TrimSpace(raw), "/")
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" {
			return nil, fmt.Errorf("-url: %q is not a client origin, http(s)://host[:port]", raw)
		}
		if seen[raw] {
			return nil, fmt.Errorf("-url: %q is listed twice", raw)
		}
		seen[raw] = true
		out = append(out, raw)
	}
	return out, nil
}

// parsePIDs reads -server-pid: empty or 0 means "find each node by its
// port" (nil), otherwise one process id per client URL, in -url's order.
func parsePIDs(s string, nodes int) ([]int, error) {
	if s = strings.TrimSpace(s); s == "" || s == "0" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		pid, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || pid < 1 {
			return nil, fmt.Errorf("-server-pid: %q is not a process id", f)
		}
		out = append(out, pid)
	}
	if len(out) != nodes {
		return nil, fmt.Errorf("-server-pid: %d process ids for %d URLs; give one per -url entry, in order, or none", len(out), nodes)
	}
	return out, nil
}

// serverPIDs returns the process id of each node: pids when given, or the
// owner of the socket listening on each URL's port.
func serverPIDs(urls []string, pids []int) ([]int, error) {
	if pids != nil {
		return pids, nil
	}
	out := make([]int, len(urls))
	for i, u := range urls {
		port, err := urlPort(u)
		if err == nil {
			out[i], err = findListener("/proc", port)
		}
		if err != nil {
			if len(urls) > 1 {
				err = fmt.Errorf("%s: %w", u, err)
			}
			return nil, err
		}
	}
	return out, nil
}

// sessionOf returns the session a client-port path is about
// (/api/v1/sessions/{id}/…), or "" (opening a session, other routes).
func sessionOf(path string) string {
	rest, ok := strings.CutPrefix(path, "/api/v1/sessions/")
	if !ok {
		return ""
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}

// roundRobin is the load balancer: a RoundTripper that sends each request
// about a session to the next node in turn, rewriting its scheme and host.
// Other requests (opening a session, the admin API) go where they were
// addressed. For sessions whose owner it was told (own), it counts the
// requests that reached the owner and those that reached another node,
// which forwards them.
type roundRobin struct {
	next  http.RoundTripper
	nodes []*url.URL

	turn             atomic.Uint64
	owners           sync.Map // session id → node index
	local, forwarded atomic.Int64
}

var _ http.RoundTripper = (*roundRobin)(nil)

func newRoundRobin(next http.RoundTripper, urls []string) (*roundRobin, error) {
	if len(urls) == 0 {
		return nil, errors.New("round robin over no nodes")
	}
	rr := &roundRobin{next: next}
	for _, raw := range urls {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, err
		}
		rr.nodes = append(rr.nodes, u)
	}
	return rr, nil
}

// own records that node i (in -url's order) owns session.
func (rr *roundRobin) own(session string, i int) { rr.owners.Store(session, i) }

// counts returns how many requests about sessions of known owner were
// sent to the owner and to another node.
func (rr *roundRobin) counts() (local, forwarded int64) {
	return rr.local.Load(), rr.forwarded.Load()
}

func (rr *roundRobin) RoundTrip(req *http.Request) (*http.Response, error) {
	id := sessionOf(req.URL.Path)
	if id == "" {
		return rr.next.RoundTrip(req)
	}
	i := int((rr.turn.Add(1) - 1) % uint64(len(rr.nodes)))
	if owner, ok := rr.owners.Load(id); ok {
		if owner.(int) == i {
			rr.local.Add(1)
		} else {
			rr.forwarded.Add(1)
		}
	}
	out := req.Clone(req.Context()) // a RoundTripper must not modify req
	out.URL.Scheme, out.URL.Host = rr.nodes[i].Scheme, rr.nodes[i].Host
	out.Host = ""
	return rr.next.RoundTrip(out)
}

// cpuTimes is the machine's CPU time from /proc/stat, all CPUs together.
type cpuTimes struct {
	Busy, Total time.Duration
	CPUs        int
}

// machineCPU reads /proc/stat under root ("/proc" outside tests).
func machineCPU(root string) (cpuTimes, error) {
	b, err := os.ReadFile(filepath.Join(root, "stat"))
	if err != nil {
		return cpuTimes{}, err
	}
	return parseProcStat(string(b))
}

// parseProcStat reads the aggregate "cpu" line of /proc/stat (user nice
// system idle iowait irq softirq steal, in USER_HZ ticks; guest time is
// already inside user) and counts the cpuN lines. Idle and iowait are
// idle; the rest is busy.
func parseProcStat(s string) (cpuTimes, error) {
	var t cpuTimes
	found := false
	for line := range strings.Lines(s) {
		f := strings.Fields(line)
		if len(f) == 0 || !strings.HasPrefix(f[0], "cpu") {
			continue
		}
		if f[0] != "cpu" {
			t.CPUs++
			continue
		}
		if len(f) < 9 {
			return t, errors.New("/proc/stat: short cpu line")
		}
		tick := time.Second / userHZ
		for i, v := range f[1:9] {
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return t, fmt.Errorf("/proc/stat: %w", err)
			}
			d := time.Duration(n) * tick
			t.Total += d
			if i != 3 && i != 4 { // idle, iowait
				t.Busy += d
			}
		}
		found = true
	}
	if !found || t.CPUs == 0 {
		return t, errors.New("/proc/stat: no cpu lines")
	}
	return t, nil
}

// sampleTree returns the CPU time of process pid, of its live children and
// of the children it has reaped (cutime and cstime): for PostgreSQL's
// postmaster, the whole database server, backends that ended included.
// root is "/proc" outside tests.
func sampleTree(root string, pid int) (time.Duration, error) {
	b, err := os.ReadFile(filepath.Join(root, strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, err
	}
	_, self, reaped, err := parseStatTree(string(b))
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	total := self + reaped
	dirs, err := os.ReadDir(root)
	if err != nil {
		return 0, err
	}
	for _, d := range dirs {
		child, err := strconv.Atoi(d.Name())
		if err != nil || child == pid {
			continue
		}
		b, err := os.ReadFile(filepath.Join(root, d.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile; its time is in the parent's reaped time
		}
		ppid, cpu, _, err := parseStatTree(string(b))
		if err == nil && ppid == pid {
			total += cpu
		}
	}
	return total, nil
}

// parseStatTree returns the parent pid (field 4), utime+stime (14, 15)
// and cutime+cstime (16, 17) of a stat line.
func parseStatTree(s string) (ppid int, self, reaped time.Duration, err error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, 0, errors.New("no command field")
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
	if len(f) < 15 {
		return 0, 0, 0, errors.New("too few fields")
	}
	var n [5]int64
	for j, k := range []int{1, 11, 12, 13, 14} {
		if n[j], err = strconv.ParseInt(f[k], 10, 64); err != nil {
			return 0, 0, 0, err
		}
	}
	tick := time.Second / userHZ
	return int(n[0]), time.Duration(n[1]+n[2]) * tick, time.Duration(n[3]+n[4]) * tick, nil
}
