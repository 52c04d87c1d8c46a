package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/baton-engine/baton/client"
)

// openConcurrency bounds how many sessions are opened (or closed) at once.
const openConcurrency = 16

// load is one load run: sessions driven concurrently through the SDK.
type load struct {
	urls       []string // client URLs of the nodes; session i is opened on urls[i mod len]
	key        string
	sessions   int
	roundTrips int           // per session, when duration is zero
	duration   time.Duration // run until it elapses instead, when > 0
	perTurn    int           // client tool calls per round trip
	tool       string
	message    string        // the user message of every round trip
	timeout    time.Duration // bound of one round trip
	hc         *http.Client
	rr         *roundRobin // hc's transport when requests are spread over the nodes, or nil

	calls atomic.Int64 // tool handler invocations
}

// outcome is what a run measured.
type outcome struct {
	latencies []time.Duration // one per completed round trip
	elapsed   time.Duration
	failed    int   // sessions that stopped on an error
	firstErr  error // the first of those errors
	calls     int64 // client tool calls answered
}

// newHTTPClient returns a client whose idle pool keeps one connection per
// concurrent stream, so the load measures the server and not connection
// churn on the client side.
func newHTTPClient(conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conns
	tr.MaxIdleConnsPerHost = conns
	return &http.Client{Transport: tr}
}

// harness returns the SDK harness with the one client tool, addressed
// to the client URL base.
func (l *load) harness(base string) *client.Harness {
	h := client.NewHarness(client.Config{BaseURL: base, ClientKey: l.key, ClientVersion: "baton-loadgen/1", HTTPClient: l.hc})
	h.RegisterTool(client.ToolDef{Name: l.tool, Description: "loadgen no-op tool"},
		func(context.Context, json.RawMessage) (any, error) {
			l.calls.Add(1)
			return "ok", nil
		})
	return h
}

// open opens l.sessions sessions and registers as driver on each;
// session i is opened on node i mod len(l.urls), its owner.
func (l *load) open(ctx context.Context) ([]*client.Session, error) {
	hs := make([]*client.Harness, len(l.urls))
	for i, u := range l.urls {
		hs[i] = l.harness(u)
	}
	out := make([]*client.Session, l.sessions)
	errs := make([]error, l.sessions)
	sem := make(chan struct{}, openConcurrency)
	var wg sync.WaitGroup
	for i := range out {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			node := i % len(hs)
			out[i], errs[i] = hs[node].Connect(ctx)
			if errs[i] == nil && l.rr != nil {
				l.rr.own(out[i].ID, node)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		l.close(out)
		return nil, fmt.Errorf("open sessions: %w", err)
	}
	return out, nil
}

// close closes the sessions that were opened, ignoring failures.
func (l *load) close(sessions []*client.Session) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sem := make(chan struct{}, openConcurrency)
	var wg sync.WaitGroup
	for _, s := range sessions {
		if s == nil {
			continue
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			_ = s.Close(ctx)
		})
	}
	wg.Wait()
}

// run drives every session concurrently: each goroutine makes round trips
// back to back until its quota or the deadline. A round trip is one
// Session.Send: sendMessage, the pause on the tool_use blocks, the
// handlers, sendMessage with the results, the final reply.
func (l *load) run(ctx context.Context, sessions []*client.Session) *outcome {
	lat := make([][]time.Duration, len(sessions))
	errs := make([]error, len(sessions))
	var deadline time.Time
	start := time.Now()
	if l.duration > 0 {
		deadline = start.Add(l.duration)
	}
	calls0 := l.calls.Load()
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Go(func() {
			for n := 0; ; n++ {
				if deadline.IsZero() && n >= l.roundTrips || !deadline.IsZero() && !time.Now().Before(deadline) {
					return
				}
				if ctx.Err() != nil {
					return
				}
				d, err := l.roundTrip(ctx, s)
				if err != nil {
					errs[i] = fmt.Errorf("session %s, round trip %d: %w", s.ID, n+1, err)
					return
				}
				lat[i] = append(lat[i], d)
			}
		})
	}
	wg.Wait()
	o := &outcome{elapsed: time.Since(start), calls: l.calls.Load() - calls0}
	for i := range sessions {
		o.latencies = append(o.latencies, lat[i]...)
		if errs[i] != nil {
			o.failed++
			if o.firstErr == nil {
				o.firstErr = errs[i]
			}
		}
	}
	return o
}

// roundTrip makes one Send and checks the exchange went as planned.
func (l *load) roundTrip(ctx context.Context, s *client.Session) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	t0 := time.Now()
	reply, err := s.Send(ctx, l.message)
	d := time.Since(t0)
	if err != nil {
		return d, err
	}
	if len(reply.Message.ToolCalls()) > 0 {
		return d, errors.New("the final reply still calls tools")
	}
	calls := 0
	for _, ev := range reply.Events {
		if ev.Type == "tool.call" {
			calls++
		}
	}
	if calls != l.perTurn {
		return d, fmt.Errorf("%d calls of %s, want %d (reply %q)", calls, l.tool, l.perTurn, reply.Message.Text())
	}
	return d, nil
}
