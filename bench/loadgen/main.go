// Command loadgen drives a running Baton server with many concurrent
// sessions, each making client-tool round trips through the Go SDK, and
// reports throughput, round-trip latency and the server's CPU time and
// memory.
//
// Baton only knows the providers of its bae-config.toml, so the flow has
// three steps:
//
//	go run ./bench/loadgen -print-config > /tmp/lg/bae-config.toml
//	BAE_CONFIG=/tmp/lg/bae-config.toml BAE_DB_PATH=/tmp/lg/bae.db \
//	  BAE_ADMIN_KEY_FILE=/tmp/lg/admin-key.pem BAE_ADMIN_KEY_HASH_FILE=/tmp/lg/admin-key-hash.pem \
//	  BAE_ADDR=127.0.0.1:18080 BAE_ADMIN_ADDR=127.0.0.1:18081 go run ./cmd/baton serve &
//	go run ./bench/loadgen -url http://127.0.0.1:18080 -admin-url http://127.0.0.1:18081 \
//	  -admin-key-file /tmp/lg/admin-key.pem
//
// The config names two providers: "loadgen-mock", an Anthropic entry whose
// base_url is -mock-addr, where loadgen itself serves a zero-latency model
// speaking the Messages API with server-sent events (it calls the client
// tool, then answers the tool results with text); and "loadgen-scripted",
// Baton's offline scripted model, used with -scripted (no mock is started;
// the message is "call <tool>" lines). Through the admin API loadgen then
// creates a profile (primary provider -provider) and a client key, opens
// -sessions sessions and makes -round-trips round trips on each,
// concurrently. A round trip is one SDK Send: sendMessage, the pause on
// -tools-per-turn tool_use blocks, the handlers, sendMessage with the
// results, the final reply — two model calls.
//
// The server's CPU time (utime+stime of /proc/<pid>/stat, all threads)
// and RSS (VmRSS and VmHWM of /proc/<pid>/status) are sampled before and
// after the round trips. The pid is -server-pid, or else the process
// holding the listening socket of -url's port: its inode is looked up in
// /proc/net/tcp and tcp6, then among the /proc/<pid>/fd links. That needs
// the server on this machine and readable by this user. With `go run`, the
// socket belongs to the compiled child, not to the go command, which is
// what the port lookup finds. loadgen's own CPU time over the round trips
// is reported too; -cpuprofile writes its profile.
//
// -url may list the client URLs of several nodes of one cluster,
// comma-separated (and -server-pid their pids, in the same order). Session
// i is opened on node i mod N, its owner; its later requests go to the
// nodes in turn, as behind a round-robin load balancer, so most reach a
// node that forwards them to the owner. With -pin they all go to the
// owner. CPU is then reported summed over the nodes and per node (nodes.go).
// -db-pid, PostgreSQL's postmaster, adds the database server's CPU: its
// processes' and that of the backends it reaped. The busy time of the
// whole machine (/proc/stat) is printed too: on a shared machine it tells
// a quiet run from a noisy one.
//
// With -floor, loadgen measures a baseline instead of Baton: a stand-in
// server, run as loadgen's child, making a round trip's four HTTP
// exchanges (two sendMessage requests, two model calls to the mock) with
// nothing behind them. Its CPU per round trip is what net/http and the
// kernel cost on this machine, the floor under Baton's figure.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"
)

// Provider names in the printed config.
const (
	mockProvider     = "loadgen-mock"
	scriptedProvider = "loadgen-scripted"
)

// options are the command-line flags.
type options struct {
	url, adminURL, adminKey, adminKeyFile string
	sessions, roundTrips, perTurn         int
	duration, timeout                     time.Duration
	printConfig, scripted                 bool
	mockAddr, provider, tool              string
	serverPID                             string // -server-pid as given
	cpuProfile                            string
	pin                                   bool
	dbPID                                 int
	floor                                 bool
	floorHistory                          int

	urls []string // -url's client URLs, one per node
	pids []int    // -server-pid's process ids, one per URL, or nil to find them
}

func main() {
	if mock := os.Getenv(floorEnv); mock != "" {
		if err := serveFloor(mock, os.Getenv(floorHistoryEnv), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "loadgen floor server:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("loadgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.url, "url", "", "Baton client URL, e.g. http://127.0.0.1:18080, or the comma-separated client URLs of several nodes of one cluster (required to run)")
	fs.StringVar(&o.adminURL, "admin-url", "", "Baton admin URL, e.g. http://127.0.0.1:18081 (required to run)")
	fs.StringVar(&o.adminKey, "admin-key", "", "admin key (bae_admin_…)")
	fs.StringVar(&o.adminKeyFile, "admin-key-file", "", "file holding the admin key (the server's BAE_ADMIN_KEY_FILE)")
	fs.IntVar(&o.sessions, "sessions", 100, "concurrent sessions")
	fs.IntVar(&o.roundTrips, "round-trips", 20, "client-tool round trips per session")
	fs.IntVar(&o.perTurn, "tools-per-turn", 1, "parallel client tool calls per round trip")
	fs.DurationVar(&o.duration, "duration", 0, "run for this long instead of -round-trips per session")
	fs.DurationVar(&o.timeout, "timeout", time.Minute, "bound of one round trip")
	fs.BoolVar(&o.printConfig, "print-config", false, "print the bae-config.toml providers for loadgen and exit")
	fs.StringVar(&o.mockAddr, "mock-addr", "127.0.0.1:18089", "where the mock provider listens (the config's base_url)")
	fs.BoolVar(&o.scripted, "scripted", false, "use Baton's scripted model instead of the mock provider")
	fs.StringVar(&o.provider, "provider", "", "primary provider of the profile (default "+mockProvider+", or "+scriptedProvider+" with -scripted)")
	fs.StringVar(&o.tool, "tool", "get_time", "name of the client tool")
	fs.StringVar(&o.serverPID, "server-pid", "", "server process id, or one per -url node, comma-separated in the same order (default: found by each URL's listening port)")
	fs.IntVar(&o.dbPID, "db-pid", 0, "PostgreSQL's postmaster pid on this machine: also report the database server's CPU (its processes and the backends it reaped)")
	fs.BoolVar(&o.pin, "pin", false, "with several -url nodes, send each session's requests to the node that opened it (its owner) instead of round-robin over the nodes")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write loadgen's own CPU profile of the round trips to this file")
	fs.BoolVar(&o.floor, "floor", false, "measure net/http's floor instead: a stand-in server making a round trip's four HTTP exchanges and nothing else (no Baton needed)")
	fs.IntVar(&o.floorHistory, "floor-history", 4096, "with -floor, bytes of history in each provider request and provider.request notice")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: loadgen -print-config | loadgen -floor [flags] | loadgen -url URL[,URL…] -admin-url URL (-admin-key KEY | -admin-key-file FILE) [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "loadgen: unexpected arguments %q\n", fs.Args())
		return 2
	}
	if o.printConfig {
		fmt.Fprint(stdout, configSnippet(o.mockAddr))
		return 0
	}
	if o.floor {
		if o.sessions < 1 || o.roundTrips < 1 || o.floorHistory < 0 {
			fmt.Fprintln(stderr, "loadgen: -sessions and -round-trips must be at least 1, -floor-history not negative")
			return 2
		}
		if err := floor(ctx, &o, stdout); err != nil {
			fmt.Fprintln(stderr, "loadgen:", err)
			return 1
		}
		return 0
	}
	if o.url == "" {
		fmt.Fprint(stderr, explain)
		return 2
	}
	if err := o.check(); err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 2
	}
	if err := generate(ctx, &o, stdout); err != nil {
		fmt.Fprintln(stderr, "loadgen:", err)
		return 1
	}
	return 0
}

// explain is printed when -url is missing: loadgen starts nothing itself.
const explain = `loadgen: -url is required; loadgen drives a Baton server it does not start.

  1. go run ./bench/loadgen -print-config > DIR/bae-config.toml
  2. start Baton with that config, e.g.
       BAE_CONFIG=DIR/bae-config.toml BAE_DB_PATH=DIR/bae.db \
       BAE_ADMIN_KEY_FILE=DIR/admin-key.pem BAE_ADMIN_KEY_HASH_FILE=DIR/admin-key-hash.pem \
       BAE_ADDR=127.0.0.1:18080 BAE_ADMIN_ADDR=127.0.0.1:18081 go run ./cmd/baton serve
  3. go run ./bench/loadgen -url http://127.0.0.1:18080 -admin-url http://127.0.0.1:18081 \
       -admin-key-file DIR/admin-key.pem

loadgen serves the mock provider on -mock-addr (the config's base_url);
-scripted uses Baton's scripted model instead. Run loadgen -h for the flags.
`

// configSnippet is the bae-config.toml that makes a server usable by loadgen.
func configSnippet(mockAddr string) string {
	return fmt.Sprintf(`# Providers for bench/loadgen. %[1]s is served by loadgen itself on
# -mock-addr while it runs; %[2]s is Baton's offline model (-scripted).
[[providers.entries]]
name = %[3]q
provider = "anthropic"
model = "loadgen-mock"
base_url = %[4]q
auth_token = "loadgen"

[[providers.entries]]
name = %[2]q
provider = "scripted"
`, mockProvider, scriptedProvider, mockProvider, "http://"+mockAddr)
}

func (o *options) check() error {
	urls, err := parseURLs(o.url)
	if err != nil {
		return err
	}
	o.urls = urls
	if o.pids, err = parsePIDs(o.serverPID, len(urls)); err != nil {
		return err
	}
	switch {
	case o.adminURL == "":
		return errors.New("-admin-url is required")
	case o.adminKey != "" && o.adminKeyFile != "":
		return errors.New("-admin-key and -admin-key-file are exclusive")
	case o.sessions < 1 || o.roundTrips < 1 || o.perTurn < 1:
		return errors.New("-sessions, -round-trips and -tools-per-turn must be at least 1")
	case o.dbPID < 0:
		return errors.New("-db-pid must not be negative")
	case o.duration < 0 || o.timeout <= 0:
		return errors.New("-duration must not be negative and -timeout must be positive")
	}
	if o.adminKeyFile != "" {
		b, err := os.ReadFile(o.adminKeyFile)
		if err != nil {
			return fmt.Errorf("admin key: %w", err)
		}
		o.adminKey = strings.TrimSpace(string(b))
	}
	if o.provider == "" {
		o.provider = mockProvider
		if o.scripted {
			o.provider = scriptedProvider
		}
	}
	return nil
}

// generate runs the load and prints the report.
func generate(ctx context.Context, o *options, out io.Writer) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	message := "go"
	if o.scripted {
		message = strings.Repeat("call "+o.tool+"\n", o.perTurn)
	} else {
		m := newMock(o.mockAddr, o.perTurn, log)
		if err := m.Open(ctx); err != nil {
			return err
		}
		defer m.Close()
		defer func() { fmt.Fprintf(out, "mock provider     %d calls served on %s\n", m.Calls(), m.URL()) }()
	}

	hc := newHTTPClient(2*o.sessions + 16)
	name := fmt.Sprintf("loadgen-%d-%d", os.Getpid(), time.Now().UnixNano())
	_, key, err := (&admin{base: o.adminURL, token: o.adminKey, hc: hc}).setup(ctx, name, o.provider, o.tool)
	if err != nil {
		return err
	}
	l := &load{
		urls: o.urls, key: key, sessions: o.sessions, roundTrips: o.roundTrips, duration: o.duration,
		perTurn: o.perTurn, tool: o.tool, message: message, timeout: o.timeout, hc: hc,
	}
	if len(o.urls) > 1 && !o.pin {
		if l.rr, err = newRoundRobin(hc.Transport, o.urls); err != nil {
			return err
		}
		l.hc = &http.Client{Transport: l.rr}
	}

	pids, pidErr := serverPIDs(o.urls, o.pids)

	sessions, err := l.open(ctx)
	if err != nil {
		return err
	}
	defer l.close(sessions)

	before := make([]usage, len(pids))
	after := make([]usage, len(pids))
	for i, pid := range pids {
		if pidErr == nil {
			before[i], pidErr = sample("/proc", pid)
		}
	}
	stopProfile, err := startProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	var self0, self1 syscall.Rusage
	var local0, fwd0, local1, fwd1 int64
	if l.rr != nil {
		local0, fwd0 = l.rr.counts()
	}
	var db0, db1 time.Duration
	dbErr := errors.New("no -db-pid")
	if o.dbPID > 0 {
		db0, dbErr = sampleTree("/proc", o.dbPID)
	}
	machine0, machineErr := machineCPU("/proc")
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
	res := l.run(ctx, sessions)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
	machine1, err := machineCPU("/proc")
	machineErr = errors.Join(machineErr, err)
	if dbErr == nil {
		db1, dbErr = sampleTree("/proc", o.dbPID)
	}
	if l.rr != nil {
		local1, fwd1 = l.rr.counts()
	}
	if err := stopProfile(); err != nil {
		return err
	}
	for i, pid := range pids {
		if pidErr == nil {
			after[i], pidErr = sample("/proc", pid)
		}
	}

	n := len(res.latencies)
	rate := float64(n) / res.elapsed.Seconds()
	lat := summarize(res.latencies)
	mode := "mock provider"
	if o.scripted {
		mode = "scripted model"
	}
	fmt.Fprintf(out, "loadgen           %d sessions, %d tool call(s) per round trip, %s (profile provider %s)\n", o.sessions, o.perTurn, mode, o.provider)
	switch {
	case l.rr != nil:
		local, fwd := local1-local0, fwd1-fwd0
		fmt.Fprintf(out, "nodes             %d, session requests round-robin: %d of %d forwarded to the owner (%.1f%%)\n",
			len(o.urls), fwd, local+fwd, 100*float64(fwd)/float64(max(local+fwd, 1)))
	case len(o.urls) > 1:
		fmt.Fprintf(out, "nodes             %d, pinned: each session's requests go to its owner, none forwarded\n", len(o.urls))
	}
	fmt.Fprintf(out, "round trips       %d in %s: %.1f round trips/s, %.1f tool calls/s\n", n, res.elapsed.Round(time.Millisecond), rate, float64(res.calls)/res.elapsed.Seconds())
	fmt.Fprintf(out, "latency           p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms\n", ms(lat.P50), ms(lat.P90), ms(lat.P99), ms(lat.Max))
	perRT := func(cpu time.Duration) time.Duration {
		if n == 0 {
			return 0
		}
		return cpu / time.Duration(n)
	}
	if pidErr != nil {
		fmt.Fprintf(out, "server            unavailable: %v\n", pidErr)
	} else {
		printServers(out, o.urls, pids, before, after, perRT, res.elapsed)
	}
	if o.dbPID > 0 {
		if dbErr != nil {
			fmt.Fprintf(out, "database          unavailable: %v\n", dbErr)
		} else {
			cpu := db1 - db0
			fmt.Fprintf(out, "database pid %-6d CPU %s: %d µs per round trip, %.0f%% of one core (with anything else this PostgreSQL serves)\n",
				o.dbPID, cpu, perRT(cpu).Microseconds(), 100*cpu.Seconds()/res.elapsed.Seconds())
		}
	}
	self := tv(self1.Utime) + tv(self1.Stime) - tv(self0.Utime) - tv(self0.Stime)
	fmt.Fprintf(out, "loadgen CPU       %s (SDK and mock; they share the machine with the server)\n", self.Round(time.Millisecond))
	if machineErr == nil {
		busy, total := machine1.Busy-machine0.Busy, machine1.Total-machine0.Total
		frac := busy.Seconds() / max(total.Seconds(), 1e-9)
		cores := frac * float64(machine1.CPUs)
		fmt.Fprintf(out, "machine CPU       %.2f of %d CPUs busy (%.0f%%), %d µs per round trip: servers, loadgen, the database and anything else running\n",
			cores, machine1.CPUs, 100*frac, perRT(time.Duration(cores*float64(res.elapsed))).Microseconds())
	}
	if res.failed > 0 {
		return fmt.Errorf("%d of %d sessions failed; first: %w", res.failed, o.sessions, res.firstErr)
	}
	return nil
}

// printServers reports the CPU time and memory of the nodes between two
// samples: as loadgen always did for one node, summed and per node for
// several.
func printServers(out io.Writer, urls []string, pids []int, before, after []usage, perRT func(time.Duration) time.Duration, elapsed time.Duration) {
	if len(pids) == 1 {
		pid, b, a := pids[0], before[0], after[0]
		cpu := a.CPU() - b.CPU()
		fmt.Fprintf(out, "server pid %-6d CPU %s (user %s, sys %s): %d µs per round trip, %.0f%% of one core\n",
			pid, cpu, a.User-b.User, a.System-b.System, perRT(cpu).Microseconds(), 100*cpu.Seconds()/elapsed.Seconds())
		fmt.Fprintf(out, "server memory     RSS %.1f MiB before, %.1f MiB after, peak %.1f MiB\n", mib(b.RSS), mib(a.RSS), mib(a.PeakRSS))
		return
	}
	var cpu, user, sys time.Duration
	for i := range pids {
		cpu += after[i].CPU() - before[i].CPU()
		user += after[i].User - before[i].User
		sys += after[i].System - before[i].System
	}
	fmt.Fprintf(out, "servers (%d)       CPU %s (user %s, sys %s): %d µs per round trip, %.0f%% of one core\n",
		len(pids), cpu, user, sys, perRT(cpu).Microseconds(), 100*cpu.Seconds()/elapsed.Seconds())
	for i, pid := range pids {
		b, a := before[i], after[i]
		c := a.CPU() - b.CPU()
		fmt.Fprintf(out, "node %d pid %-6d CPU %s: %d µs per round trip, %.0f%% of one core; RSS %.1f MiB after, peak %.1f MiB (%s)\n",
			i+1, pid, c, perRT(c).Microseconds(), 100*c.Seconds()/elapsed.Seconds(), mib(a.RSS), mib(a.PeakRSS), urls[i])
	}
}

// startProfile starts a CPU profile written to path ("" profiles
// nothing) and returns the function that stops it and closes the file.
func startProfile(path string) (stop func() error, err error) {
	if path == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("cpu profile: %w", err)
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func tv(t syscall.Timeval) time.Duration {
	return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
}
