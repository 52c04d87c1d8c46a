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
	serverPID                             int
	cpuProfile                            string
	floor                                 bool
	floorHistory                          int
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
	fs.StringVar(&o.url, "url", "", "Baton client URL, e.g. http://127.0.0.1:18080 (required to run)")
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
	fs.IntVar(&o.serverPID, "server-pid", 0, "server process id (default: found by -url's listening port)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write loadgen's own CPU profile of the round trips to this file")
	fs.BoolVar(&o.floor, "floor", false, "measure net/http's floor instead: a stand-in server making a round trip's four HTTP exchanges and nothing else (no Baton needed)")
	fs.IntVar(&o.floorHistory, "floor-history", 4096, "with -floor, bytes of history in each provider request and provider.request notice")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: loadgen -print-config | loadgen -floor [flags] | loadgen -url URL -admin-url URL (-admin-key KEY | -admin-key-file FILE) [flags]")
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
	switch {
	case o.adminURL == "":
		return errors.New("-admin-url is required")
	case o.adminKey != "" && o.adminKeyFile != "":
		return errors.New("-admin-key and -admin-key-file are exclusive")
	case o.sessions < 1 || o.roundTrips < 1 || o.perTurn < 1:
		return errors.New("-sessions, -round-trips and -tools-per-turn must be at least 1")
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
		url: o.url, key: key, sessions: o.sessions, roundTrips: o.roundTrips, duration: o.duration,
		perTurn: o.perTurn, tool: o.tool, message: message, timeout: o.timeout, hc: hc,
	}

	pid, pidErr := o.serverPID, error(nil)
	if pid == 0 {
		var port int
		if port, pidErr = urlPort(o.url); pidErr == nil {
			pid, pidErr = findListener("/proc", port)
		}
	}

	sessions, err := l.open(ctx)
	if err != nil {
		return err
	}
	defer l.close(sessions)

	var before, after usage
	if pidErr == nil {
		before, pidErr = sample("/proc", pid)
	}
	stopProfile, err := startProfile(o.cpuProfile)
	if err != nil {
		return err
	}
	var self0, self1 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self0)
	res := l.run(ctx, sessions)
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self1)
	if err := stopProfile(); err != nil {
		return err
	}
	if pidErr == nil {
		after, pidErr = sample("/proc", pid)
	}

	n := len(res.latencies)
	rate := float64(n) / res.elapsed.Seconds()
	lat := summarize(res.latencies)
	mode := "mock provider"
	if o.scripted {
		mode = "scripted model"
	}
	fmt.Fprintf(out, "loadgen           %d sessions, %d tool call(s) per round trip, %s (profile provider %s)\n", o.sessions, o.perTurn, mode, o.provider)
	fmt.Fprintf(out, "round trips       %d in %s: %.1f round trips/s, %.1f tool calls/s\n", n, res.elapsed.Round(time.Millisecond), rate, float64(res.calls)/res.elapsed.Seconds())
	fmt.Fprintf(out, "latency           p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms\n", ms(lat.P50), ms(lat.P90), ms(lat.P99), ms(lat.Max))
	if pidErr != nil {
		fmt.Fprintf(out, "server            unavailable: %v\n", pidErr)
	} else {
		cpu := after.CPU() - before.CPU()
		perRT := time.Duration(0)
		if n > 0 {
			perRT = cpu / time.Duration(n)
		}
		fmt.Fprintf(out, "server pid %-6d CPU %s (user %s, sys %s): %d µs per round trip, %.0f%% of one core\n",
			pid, cpu, after.User-before.User, after.System-before.System, perRT.Microseconds(), 100*cpu.Seconds()/res.elapsed.Seconds())
		fmt.Fprintf(out, "server memory     RSS %.1f MiB before, %.1f MiB after, peak %.1f MiB\n", mib(before.RSS), mib(after.RSS), mib(after.PeakRSS))
	}
	self := tv(self1.Utime) + tv(self1.Stime) - tv(self0.Utime) - tv(self0.Stime)
	fmt.Fprintf(out, "loadgen CPU       %s (SDK and mock; they share the machine with the server)\n", self.Round(time.Millisecond))
	if res.failed > 0 {
		return fmt.Errorf("%d of %d sessions failed; first: %w", res.failed, o.sessions, res.firstErr)
	}
	return nil
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
