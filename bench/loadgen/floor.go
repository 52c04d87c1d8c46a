package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"time"
)

// floorEnv, set in loadgen's environment, makes the process the floor
// server: it serves on a loopback port, prints the address on stdout and
// runs until stdin closes. The value is the mock provider's URL.
const floorEnv = "BATON_LOADGEN_FLOOR_MOCK"

// floorHistoryEnv carries -floor-history to the floor server.
const floorHistoryEnv = "BATON_LOADGEN_FLOOR_HISTORY"

// The floor server is what a Baton round trip costs net/http and the
// kernel alone, with no engine, store or JSON behind it: each of its
// requests reads a sendMessage body, makes one Messages API call to the
// mock with a history of -floor-history bytes and reads the server-sent
// events to the end, then answers with the two NDJSON frames a Baton
// stream sends at least (the provider.request notice, which carries that
// history, and the result), flushed apart. A round trip is two such
// requests, as in Baton: four HTTP exchanges. Its CPU per round trip is
// the floor under Baton's on the same machine.
type floorServer struct {
	hc      *http.Client
	mockURL string
	call    [2][]byte // provider request bodies: the first call, the one with results
	notice  [2][]byte // their provider.request frames
	result  []byte
}

// resultsMarker is in the second sendMessage of a round trip, which
// carries the tool results.
const resultsMarker = `"tool_results"`

func newFloorServer(mockURL string, history int) *floorServer {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 1024
	f := &floorServer{hc: &http.Client{Transport: tr}, mockURL: mockURL}
	var past bytes.Buffer
	for i := 0; past.Len() < history; i++ {
		role := [2]string{"user", "assistant"}[i%2]
		fmt.Fprintf(&past, `{"role":%q,"content":[{"type":"text","text":"message %d %s"}]},`, role, i, strings.Repeat("x", 64))
	}
	head := `{"model":"loadgen-mock","max_tokens":1024,"stream":true,"messages":[` + past.String()
	tools := `],"tools":[{"name":"get_time","description":"loadgen no-op tool","input_schema":{"type":"object","properties":{}}}]}`
	turn := `{"role":"user","content":[{"type":"text","text":"go"}]}`
	f.call[0] = []byte(head + turn + tools)
	f.call[1] = []byte(head + turn + `,{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_time","input":{}}]}` +
		`,{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}]}` + tools)
	for i, c := range f.call {
		f.notice[i] = []byte(`{"jsonrpc":"2.0","method":"session.event","params":{"id":"evt_floor","session_id":"ses_floor","type":"provider.request","created_at":"2026-01-01T00:00:00.000Z","payload":` +
			string(c) + "}}\n")
	}
	f.result = []byte(`{"jsonrpc":"2.0","id":1,"result":{"stop_reason":"end_turn","message":{"role":"assistant","content":[{"type":"text","text":"done"}]},"events":[]}}` + "\n")
	return f
}

func (f *floorServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, 1<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	i := 0
	if bytes.Contains(body, []byte(resultsMarker)) {
		i = 1
	}
	resp, err := f.hc.Post(f.mockURL+"/v1/messages", "application/json", bytes.NewReader(f.call[i]))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK {
		http.Error(w, fmt.Sprintf("provider: %d %v", resp.StatusCode, err), http.StatusBadGateway)
		return
	}
	w.Header().Set("Content-Type", "application/x-ndjson")
	_, _ = w.Write(f.notice[i])
	http.NewResponseController(w).Flush()
	_, _ = w.Write(f.result)
}

// serveFloor runs the floor server until stdin closes.
func serveFloor(mockURL, history string, stdin io.Reader, stdout io.Writer) error {
	n, err := strconv.Atoi(history)
	if err != nil {
		return fmt.Errorf("floor history %q: %w", history, err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: newFloorServer(mockURL, n), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Fprintln(stdout, ln.Addr())
	_, _ = io.Copy(io.Discard, stdin)
	_ = srv.Close()
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// floor measures the floor server in a child process with -sessions
// concurrent clients making -round-trips round trips each, and prints
// the figures Baton's run prints.
func floor(ctx context.Context, o *options, out io.Writer) error {
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	m := newMock(o.mockAddr, 1, log)
	if err := m.Open(ctx); err != nil {
		return err
	}
	defer m.Close()

	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), floorEnv+"="+m.URL(), floorHistoryEnv+"="+strconv.Itoa(o.floorHistory))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("floor server: %w", err)
	}
	defer func() {
		stdin.Close() // the server stops when its stdin closes
		_ = cmd.Wait()
	}()
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return fmt.Errorf("floor server: no address: %w", err)
	}
	url := "http://" + strings.TrimSpace(line) + "/rpc"

	hc := newHTTPClient(2*o.sessions + 16)
	bodies := [2][]byte{
		[]byte(`{"jsonrpc":"2.0","id":1,"method":"session.sendMessage","params":{"content":"go"}}`),
		[]byte(`{"jsonrpc":"2.0","id":1,"method":"session.sendMessage","params":{` + resultsMarker + `:[{"tool_use_id":"toolu_1","content":"ok"}]}}`),
	}
	post := func(body []byte) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if _, err := io.Copy(io.Discard, resp.Body); err != nil {
			return err
		}
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("floor server: status %d", resp.StatusCode)
		}
		return nil
	}

	pid := cmd.Process.Pid
	before, err := sample("/proc", pid)
	if err != nil {
		return err
	}
	lat := make([][]time.Duration, o.sessions)
	errs := make([]error, o.sessions)
	start := time.Now()
	var wg sync.WaitGroup
	for i := range o.sessions {
		wg.Go(func() {
			for range o.roundTrips {
				t0 := time.Now()
				for _, b := range bodies {
					if err := post(b); err != nil {
						errs[i] = err
						return
					}
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	after, err := sample("/proc", pid)
	if err != nil {
		return err
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	n := len(all)
	s := summarize(all)
	cpu := after.CPU() - before.CPU()
	fmt.Fprintf(out, "floor             net/http alone: %d sessions, %d-byte history, four HTTP exchanges per round trip\n", o.sessions, o.floorHistory)
	fmt.Fprintf(out, "round trips       %d in %s: %.1f round trips/s\n", n, elapsed.Round(time.Millisecond), float64(n)/elapsed.Seconds())
	fmt.Fprintf(out, "latency           p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms\n", ms(s.P50), ms(s.P90), ms(s.P99), ms(s.Max))
	fmt.Fprintf(out, "floor server pid %-6d CPU %s (user %s, sys %s): %d µs per round trip\n",
		pid, cpu, after.User-before.User, after.System-before.System, (cpu / time.Duration(max(n, 1))).Microseconds())
	fmt.Fprintf(out, "mock provider     %d calls served\n", m.Calls())
	return nil
}
