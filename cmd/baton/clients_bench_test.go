package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/baton-engine/baton/client"
)

// BenchmarkRegisteredCallOverhead measures the server's overhead on one
// registered-client tool call, with a streaming mock model on loopback:
// from the mock having written its tool_use reply to the call reaching the
// client's handler, plus from the handler returning to the next model
// request arriving. Both legs include every commit the server
// makes for the call (synchronous=FULL) and the SDK's own HTTP work on the
// same machine, so they are an upper bound of the server's share.
func BenchmarkRegisteredCallOverhead(b *testing.B) {
	m := newMockProvider(b)
	s := startServer(b, loopConfig(b, m.entry("mock")))
	pro := loopProfile(b, s, map[string]any{"primary_provider": "mock"})
	h, _ := loopHarness(b, s, pro)
	ctx := context.Background()
	var (
		mu         sync.Mutex
		start, end time.Time
	)
	tool := client.RegisteredTool{Name: "echo", Description: "echo", Handler: func(context.Context, json.RawMessage) (any, error) {
		mu.Lock()
		start = time.Now()
		mu.Unlock()
		defer func() {
			mu.Lock()
			end = time.Now()
			mu.Unlock()
		}()
		return "ok", nil
	}}
	// A session serves callsPerSession calls, then a fresh one takes over,
	// so the figure is that of a conversation of ordinary length rather
	// than of one whose history grows with b.N.
	const callsPerSession = 16
	var (
		sess *client.Session
		rc   *client.RegisteredClient
	)
	rotate := func() {
		if rc != nil {
			rc.Close(ctx)
			sess.Close(ctx)
		}
		var err error
		if sess, err = h.Connect(ctx); err != nil {
			b.Fatal(err)
		}
		if rc, err = client.RegisterClient(ctx, client.Config{BaseURL: s.clientURL}, sess.ID, sess.Key, "bench", client.Never(), tool); err != nil {
			b.Fatal(err)
		}
	}
	rotate()
	defer func() { rc.Close(ctx) }()
	overheads := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if i > 0 && i%callsPerSession == 0 {
			b.StopTimer()
			rotate()
			b.StartTimer()
		}
		m.push(mockTool(mockUse{ID: fmt.Sprintf("toolu_%d", i), Name: "client__bench__echo"}), mockText("done"))
		if _, err := sess.Send(ctx, "go"); err != nil {
			b.Fatal(err)
		}
		reqs := m.requests()
		answered, next := m.replied(len(reqs)-2), reqs[len(reqs)-1].At
		mu.Lock()
		overheads = append(overheads, start.Sub(answered)+next.Sub(end))
		mu.Unlock()
	}
	b.StopTimer()
	slices.Sort(overheads)
	b.ReportMetric(float64(overheads[len(overheads)/2].Microseconds())/1000, "p50-overhead-ms")
	b.ReportMetric(float64(overheads[len(overheads)*99/100].Microseconds())/1000, "p99-overhead-ms")
}
