package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/baton-engine/baton"
	"github.com/baton-engine/baton/client"
)

// The session-loop benchmarks boot the whole server in-process (SQLite
// with synchronous=FULL, log level info as in production) and drive it
// through the Go SDK over loopback HTTP, on the scripted model. Client and
// server share the process, so CPU and allocation figures include the SDK.
// Targets (2 cores): ≤ 300 µs server CPU per client-tool round trip,
// ≥ 2,000 round trips/s over 100 sessions, p99 ≤ 50 ms to 1,000
// subscribers, ≤ 64 KiB per idle open session.

// benchToolReply is what the get_time handler returns, and benchReply the
// scripted model's answer to it.
const (
	benchToolReply = "12:00:00Z"
	benchReply     = "get_time returned: " + benchToolReply
)

// benchInfo runs the server at the production log level.
func benchInfo(env map[string]string) { env["BAE_LOG"] = "info" }

// benchWarn keeps the server's in-memory log from growing.
func benchWarn(env map[string]string) { env["BAE_LOG"] = "warn" }

// benchKey creates a scripted-model profile allowing get_time and returns
// a client key for it.
func benchKey(s *server) string {
	pro := s.profile(map[string]any{"name": "bench-loop", "primary_provider": "script", "allowed_tools": []any{"get_time"}})
	_, key := s.clientKey("bench", pro)
	return key
}

// benchHarness returns an SDK harness with the get_time tool whose HTTP
// pool keeps conns idle connections, so no benchmark pays for connection
// churn on the client side.
func benchHarness(s *server, key string, conns int) (*client.Harness, *http.Client) {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = conns, conns
	hc := &http.Client{Transport: tr}
	h := client.NewHarness(client.Config{BaseURL: s.clientURL, ClientKey: key, ClientVersion: "bench/1", HTTPClient: hc})
	h.RegisterTool(client.ToolDef{Name: "get_time", Description: "Return the time"},
		func(context.Context, json.RawMessage) (any, error) { return benchToolReply, nil })
	return h, hc
}

// benchCPU is the process's user+system CPU time so far.
func benchCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	tv := func(t syscall.Timeval) time.Duration {
		return time.Duration(t.Sec)*time.Second + time.Duration(t.Usec)*time.Microsecond
	}
	return tv(ru.Utime) + tv(ru.Stime)
}

// benchRoundTrip makes one client-tool round trip and checks its reply.
func benchRoundTrip(ctx context.Context, sess *client.Session) error {
	reply, err := sess.Send(ctx, "call get_time")
	if err != nil {
		return err
	}
	if got := reply.Message.Text(); got != benchReply {
		return fmt.Errorf("reply %q, want %q", got, benchReply)
	}
	return nil
}

// benchPercentile returns the q-quantile of sorted (nearest rank).
func benchPercentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.999999999) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func benchMS(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e6 }

// BenchmarkClientToolRoundTrip is one client-tool round trip per op on one
// session: sendMessage("call get_time") → the turn pauses on the tool_use
// → the SDK runs the handler → sendMessage(tool_result) → final reply. Two
// RPC streams, two model calls, ten events in nine group commits per op.
// cpu-µs/op is the process's CPU (server and in-process SDK) per op. The
// session's history grows with b.N; see BenchmarkClientToolRoundTripDeep.
func BenchmarkClientToolRoundTrip(b *testing.B) {
	benchRoundTrips(b, 0)
}

// BenchmarkClientToolRoundTripDeep is BenchmarkClientToolRoundTrip at a
// given history depth, to show how the per-turn cost grows with it:
// history=0 makes each op the first round trip of a new session (opened
// with the timer and the CPU count stopped); the others first make that
// many round trips on the session (the measured ops deepen it further,
// so compare runs at the same -benchtime, e.g. 100x).
func BenchmarkClientToolRoundTripDeep(b *testing.B) {
	b.Run("history=0", benchRoundTripsFresh)
	for _, depth := range []int{100, 500} {
		b.Run(fmt.Sprintf("history=%d", depth), func(b *testing.B) { benchRoundTrips(b, depth) })
	}
}

func benchRoundTripsFresh(b *testing.B) {
	s := startServer(b, benchInfo)
	h, _ := benchHarness(s, benchKey(s), 16)
	ctx := context.Background()
	connect := func() *client.Session {
		sess, err := h.Connect(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return sess
	}
	if err := benchRoundTrip(ctx, connect()); err != nil { // warm-up
		b.Fatal(err)
	}
	b.ReportAllocs()
	var cpu time.Duration
	for b.Loop() {
		b.StopTimer()
		sess := connect()
		b.StartTimer()
		cpu0 := benchCPU(b)
		if err := benchRoundTrip(ctx, sess); err != nil {
			b.Fatal(err)
		}
		cpu += benchCPU(b) - cpu0
	}
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
}

func benchRoundTrips(b *testing.B, depth int) {
	s := startServer(b, benchInfo)
	h, _ := benchHarness(s, benchKey(s), 16)
	ctx := context.Background()
	sess, err := h.Connect(ctx)
	if err != nil {
		b.Fatal(err)
	}
	for range max(depth, 1) { // at least one: warms connections and caches
		if err := benchRoundTrip(ctx, sess); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	var cpu0 time.Duration
	first := true
	for b.Loop() {
		if first {
			cpu0, first = benchCPU(b), false
		}
		if err := benchRoundTrip(ctx, sess); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((benchCPU(b)-cpu0).Microseconds())/float64(b.N), "cpu-µs/op")
}

// BenchmarkRoundTrips100Sessions spreads b.N client-tool round trips over
// 100 sessions driven concurrently, each session making its round trips
// back to back, and reports the aggregate rate and the latency of one
// round trip.
func BenchmarkRoundTrips100Sessions(b *testing.B) {
	const sessions = 100
	s := startServer(b, benchInfo)
	h, _ := benchHarness(s, benchKey(s), 2*sessions+16)
	ctx := context.Background()
	all := make([]*client.Session, sessions)
	var wg sync.WaitGroup
	errs := make([]error, sessions)
	for i := range all {
		wg.Go(func() {
			if all[i], errs[i] = h.Connect(ctx); errs[i] == nil {
				errs[i] = benchRoundTrip(ctx, all[i]) // warm-up
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	lat := make([][]time.Duration, sessions)
	var next atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := benchCPU(b)
	for i, sess := range all {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if errs[i] = benchRoundTrip(ctx, sess); errs[i] != nil {
					return
				}
				lat[i] = append(lat[i], time.Since(t0))
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	cpu := benchCPU(b) - cpu0
	for _, err := range errs {
		if err != nil {
			b.Fatal(err)
		}
	}
	flat := slices.Sorted(slices.Values(slices.Concat(lat...)))
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "round-trips/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/op")
	b.ReportMetric(benchMS(benchPercentile(flat, 0.50)), "p50-ms")
	b.ReportMetric(benchMS(benchPercentile(flat, 0.99)), "p99-ms")
}

// BenchmarkFanout1000Subscribers has 1,000 raw session.subscribe streams
// (POST …/rpc, NDJSON read line by line, no JSON decoding, so the client
// side stays cheap) on one session. Each op publishes events and waits
// until every subscriber has the last one:
//
//   - turn: a plain sendMessage on the scripted model, four events (the
//     user message, the provider request and response, the reply). The
//     provider.request event carries the whole history, so events grow
//     with b.N: compare runs at the same -benchtime.
//   - join: the client joins the session again (POST …/join), one small
//     session.join event of constant size.
//
// The latency of a delivery is its arrival time minus the event's
// created_at, which the store stamps inside the commit (millisecond
// precision, so up to 1 ms is added): it covers the commit and fsync, the
// hub, the per-subscriber NDJSON write and the loopback read.
func BenchmarkFanout1000Subscribers(b *testing.B) {
	b.Run("turn", func(b *testing.B) {
		benchFanout(b, "server.message.send", func(ctx context.Context, sess *client.Session, _ *client.Harness) error {
			_, err := sess.Send(ctx, "hello")
			return err
		})
	})
	b.Run("join", func(b *testing.B) {
		benchFanout(b, "session.join", func(ctx context.Context, sess *client.Session, h *client.Harness) error {
			_, err := h.Join(ctx, sess.ID)
			return err
		})
	})
}

func benchFanout(b *testing.B, last string, publish func(context.Context, *client.Session, *client.Harness) error) {
	const subs = 1000
	s := startServer(b, benchInfo)
	h, hc := benchHarness(s, benchKey(s), subs+16)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sess, err := h.Connect(ctx)
	if err != nil {
		b.Fatal(err)
	}
	page, err := sess.Events(ctx, "", 0)
	if err != nil || len(page.Items) == 0 {
		b.Fatalf("events: %v %v", page, err)
	}
	since := page.Items[len(page.Items)-1].ID // no gap between subscribe and live
	body := fmt.Sprintf(`{"jsonrpc":"2.0","id":1,"method":"session.subscribe","params":{"since_event_id":%q}}`, since)

	var measuring atomic.Bool
	lat := make([][]time.Duration, subs)
	got := make(chan struct{}, subs) // one per subscriber per op
	failed := make(chan error, subs)
	var wg sync.WaitGroup
	for i := range subs {
		req, err := http.NewRequestWithContext(ctx, "POST", s.clientURL+"/api/v1/sessions/"+sess.ID+"/rpc", strings.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+sess.Key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		if resp.StatusCode != http.StatusOK {
			b.Fatalf("subscribe: HTTP %d", resp.StatusCode)
		}
		wg.Go(func() {
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			sc.Buffer(make([]byte, 64<<10), 64<<20)
			for sc.Scan() {
				typ, at, err := benchNotice(sc.Bytes())
				if err != nil {
					failed <- fmt.Errorf("subscriber %d: %w", i, err)
					return
				}
				if measuring.Load() {
					lat[i] = append(lat[i], time.Since(at))
				}
				if typ == last {
					got <- struct{}{}
				}
			}
			if ctx.Err() == nil {
				failed <- fmt.Errorf("subscriber %d: stream ended: %v", i, sc.Err())
			}
		})
	}
	defer wg.Wait()
	defer cancel()
	op := func() {
		if err := publish(ctx, sess, h); err != nil {
			b.Fatal(err)
		}
		timeout := time.NewTimer(time.Minute)
		defer timeout.Stop()
		for n := range subs {
			select {
			case <-got:
			case err := <-failed:
				b.Fatal(err)
			case <-timeout.C:
				b.Fatalf("only %d of %d subscribers got %s", n, subs, last)
			}
		}
	}
	op() // every subscriber is live once all have this op's events
	b.ReportAllocs()
	var cpu0 time.Duration
	first := true
	for b.Loop() {
		if first {
			cpu0, first = benchCPU(b), false
			measuring.Store(true)
		}
		op()
	}
	measuring.Store(false)
	cpu := benchCPU(b) - cpu0
	flat := slices.Sorted(slices.Values(slices.Concat(lat...)))
	b.ReportMetric(benchMS(benchPercentile(flat, 0.50)), "p50-ms")
	b.ReportMetric(benchMS(benchPercentile(flat, 0.99)), "p99-ms")
	b.ReportMetric(benchMS(flat[len(flat)-1]), "max-ms")
	b.ReportMetric(float64(len(flat))/b.Elapsed().Seconds(), "deliveries/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(flat)), "cpu-µs/delivery")
}

// benchNotice extracts event_type and created_at from a session.event
// frame as the server writes it (event_type before the payload,
// created_at last), without decoding the payload.
func benchNotice(line []byte) (typ string, at time.Time, err error) {
	const (
		prefix = `{"jsonrpc":"2.0","method":"session.event",`
		typeK  = `"event_type":"`
		atK    = `,"created_at":"`
	)
	if !bytes.HasPrefix(line, []byte(prefix)) {
		return "", time.Time{}, fmt.Errorf("unexpected frame %.200s", line)
	}
	i := bytes.Index(line, []byte(typeK))
	j := bytes.LastIndex(line, []byte(atK))
	if i < 0 || j < 0 {
		return "", time.Time{}, fmt.Errorf("malformed event %.200s", line)
	}
	rest := line[i+len(typeK):]
	typ = string(rest[:bytes.IndexByte(rest, '"')])
	stamp := line[j+len(atK):]
	at, err = time.Parse(baton.TimeLayout, string(stamp[:bytes.IndexByte(stamp, '"')]))
	return typ, at, err
}

// BenchmarkIdleSessionMemory opens 1,000 sessions per op and registers a
// driver on each, then drops every client-side reference and idle
// connection and reports the live heap each open session leaves behind
// (after a forced GC) and the goroutines it keeps. SQLite's page cache
// lives outside the Go heap (modernc's allocator) and is not counted.
func BenchmarkIdleSessionMemory(b *testing.B) {
	const perOp = 1000
	s := startServer(b, benchWarn)
	key := benchKey(s)
	ctx := context.Background()
	h, hc := benchHarness(s, key, 64)
	if _, err := h.Connect(ctx); err != nil { // warm up pools and caches
		b.Fatal(err)
	}
	hc.CloseIdleConnections()
	heap0, g0 := benchHeap()
	b.ReportAllocs()
	opened := 0
	for b.Loop() {
		errs := make([]error, perOp)
		var wg sync.WaitGroup
		sem := make(chan struct{}, 32)
		for i := range perOp {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				_, errs[i] = h.Connect(ctx)
			})
		}
		wg.Wait()
		for _, err := range errs {
			if err != nil {
				b.Fatal(err)
			}
		}
		opened += perOp
	}
	hc.CloseIdleConnections()
	heap1, g1 := benchHeap()
	b.ReportMetric(float64(int64(heap1)-int64(heap0))/float64(opened), "heap-B/session")
	b.ReportMetric(float64(g1-g0)/float64(opened), "goroutines/session")
}

// benchHeap returns the live heap and goroutine count once the goroutines
// of closed connections have wound down: they exit asynchronously when
// the peer closes, so the count is polled until it is stable (bounded).
func benchHeap() (uint64, int) {
	var ms runtime.MemStats
	prev := -1
	for range 100 {
		runtime.GC()
		n := runtime.NumGoroutine()
		if n == prev {
			break
		}
		prev = n
		time.Sleep(20 * time.Millisecond)
	}
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, runtime.NumGoroutine()
}
