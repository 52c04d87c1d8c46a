package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	exsdk "github.com/baton-engine/baton/client/executor"
)

// handlerStamps records when an executor's handler ran last.
type handlerStamps struct {
	mu        sync.Mutex
	in, out   time.Time
	legs      [2][]time.Duration // model request → handler; handler → next model request
	overheads []time.Duration
}

func (h *handlerStamps) handle(context.Context, exsdk.Call) (exsdk.Result, error) {
	h.mu.Lock()
	h.in = time.Now()
	h.mu.Unlock()
	defer func() {
		h.mu.Lock()
		h.out = time.Now()
		h.mu.Unlock()
	}()
	return exsdk.TextResult("ok"), nil
}

// add records one round trip whose model requests arrived at asked and
// next.
func (h *handlerStamps) add(asked, next time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	in, out := h.in.Sub(asked), next.Sub(h.out)
	h.legs[0], h.legs[1] = append(h.legs[0], in), append(h.legs[1], out)
	h.overheads = append(h.overheads, in+out)
}

// report sets the benchmark's p50/p99 metrics in milliseconds.
func (h *handlerStamps) report(b *testing.B) {
	ms := func(ds []time.Duration, q int) float64 {
		s := slices.Sorted(slices.Values(ds))
		return float64(s[len(s)*q/100].Microseconds()) / 1000
	}
	b.ReportMetric(ms(h.overheads, 50), "p50-overhead-ms")
	b.ReportMetric(ms(h.overheads, 99), "p99-overhead-ms")
	b.ReportMetric(ms(h.legs[0], 50), "p50-in-ms")
	b.ReportMetric(ms(h.legs[1], 50), "p50-out-ms")
}

// BenchmarkExecutorToolRoundTrip measures the server's overhead on one
// executor tool call through the real server, with a streaming mock
// model on loopback and an SDK executor over a real WebSocket: from the
// model's tool_use request arriving at the mock to the executor's handler
// starting ("in"), plus from the handler returning to the next model
// request arriving ("out"). Both legs include the SDK's work on the same
// machine, so they bound the server's share from above. Each session
// serves 16 calls, so the figure is that of a conversation of ordinary
// length rather than one growing with b.N.
func BenchmarkExecutorToolRoundTrip(b *testing.B) {
	m := newMockProvider(b)
	s := startServer(b, loopConfig(b, m.entry("mock")))
	env, secret, _ := s.environment("bench")
	pro := loopProfile(b, s, map[string]any{"primary_provider": "mock", "executor_environments": []string{env}})
	stamps := &handlerStamps{}
	startSDKExecutor(b, newExecNet(b, s), exsdk.Config{Credential: secret, Scope: exsdk.Environment(env),
		Tools: []exsdk.Tool{{Def: exsdk.ToolDef{Name: "echo", Description: "echo"}, Handle: stamps.handle}}})
	harness, _ := loopHarness(b, s, pro)
	ctx := context.Background()

	b.ReportAllocs()
	b.ResetTimer()
	for done := 0; done < b.N; {
		b.StopTimer()
		sess, err := harness.Connect(ctx)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		for n := 0; n < 16 && done < b.N; n, done = n+1, done+1 {
			m.push(mockTool(mockUse{ID: fmt.Sprintf("toolu_%d", done), Name: "echo"}), mockText("done"))
			if _, err := sess.Send(ctx, "go"); err != nil {
				b.Fatal(err)
			}
			reqs := m.requests()
			stamps.add(reqs[len(reqs)-2].At, reqs[len(reqs)-1].At)
		}
		b.StopTimer()
		_ = sess.Close(ctx)
		b.StartTimer()
	}
	b.StopTimer()
	stamps.report(b)
}
