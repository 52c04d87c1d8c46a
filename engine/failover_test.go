package engine

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/baton-engine/baton"
)

// Provider failover on a clocktest.Clock: the primary "a", then the fallback
// "b"; retryable failures wait out a backoff on the clock, others move on
// at once.

const rigRetryBase = time.Second

// newFailoverRig is a gate rig whose profile falls back from "a" to "b",
// with retries waiting rigRetryBase << try plus jitter.
func newFailoverRig(t *testing.T, retries int) *gateRig {
	return newGateRig(t, func(s *rigSetup) {
		s.opts.ProviderRetries, s.opts.RetryBase = retries, rigRetryBase
		s.prof.FallbackProviders = []string{"b"}
	})
}

// on returns the next provider call and checks it is made to entry.
func (r *gateRig) on(entry string) *providerCall {
	r.t.Helper()
	c := recv(r.t, r.p.calls)
	if c.entry != entry {
		r.t.Fatalf("provider call to %q; want %q", c.entry, entry)
	}
	return c
}

// backoffDue waits for the wait before retry try+1 and checks its length:
// rigRetryBase << try plus up to half as much jitter.
func (r *gateRig) backoffDue(try int) time.Time {
	r.t.Helper()
	lo := rigRetryBase << try
	return r.clk.WaitTimer(r.t, fmt.Sprintf("backoff %d", try), func(d time.Duration) bool { return d >= lo && d <= lo+lo/2 })
}

// noCallYet fails when a provider call was made.
func (r *gateRig) noCallYet(when string) {
	r.t.Helper()
	if n := len(r.p.calls); n != 0 {
		r.t.Fatalf("%d provider calls %s", n, when)
	}
}

// attempts returns the logged provider.request events as "attempt kind
// model" lines.
func (r *gateRig) attempts() []string {
	r.t.Helper()
	evs, err := r.db.EventsOfType(r.ctx, r.sid, []string{baton.EventProviderReq})
	if err != nil {
		r.t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		var p struct {
			Attempt     int
			Kind, Model string
		}
		_ = json.Unmarshal(ev.Payload, &p)
		out = append(out, fmt.Sprintf("%d %s %s", p.Attempt, p.Kind, p.Model))
	}
	return out
}

func retryable(status int) *baton.ProviderError {
	return &baton.ProviderError{Status: status, Detail: fmt.Sprintf("provider returned HTTP %d", status), Retryable: true}
}

// TestFailoverRetriesThenFallback: a retryable failure of the primary is
// retried after a backoff that ends on the clock, not before; once its
// retries are spent the fallback is called at once and its reply is the
// turn's.
func TestFailoverRetriesThenFallback(t *testing.T) {
	r := newFailoverRig(t, 2)
	turn := r.send(r.keys[0], "hi", false)
	r.on("a").fail(retryable(503))
	for try := range 2 {
		due := r.backoffDue(try)
		r.clk.AdvanceTo(due.Add(-time.Nanosecond))
		r.noCallYet("before the backoff ended")
		r.clk.AdvanceTo(due)
		r.on("a").fail(retryable(429))
	}
	r.on("b").text("from b") // no wait between providers
	r.wantDone(turn, "from b")
	want := []string{"0 primary ma", "0 primary ma", "0 primary ma", "1 fallback mb"}
	if got := r.attempts(); !slices.Equal(got, want) {
		t.Fatalf("provider.request attempts %q; want %q", got, want)
	}
	evs, _ := r.db.EventsOfType(r.ctx, r.sid, []string{baton.EventSessionError})
	if len(evs) != 1 || !strings.Contains(string(evs[0].Payload), `"reason":"provider_call_failed"`) {
		t.Fatalf("session.error events %v; want one provider_call_failed", evs)
	}
}

// TestFailoverNotRetryable: a failure that is not retryable moves to the
// next provider without a retry or a wait; when the last fails too the
// turn fails with all_providers_failed and the session is in error.
func TestFailoverNotRetryable(t *testing.T) {
	r := newFailoverRig(t, 2)
	turn := r.send(r.keys[0], "hi", false)
	r.on("a").fail(&baton.ProviderError{Status: 400, Detail: "provider returned HTTP 400"})
	r.on("b").fail(&baton.ProviderError{Status: 401, Detail: "provider returned HTTP 401"})
	res := r.resultOf(turn)
	if res.Err != nil || !strings.Contains(string(res.Message.Content), "The provider is currently unavailable.") {
		t.Fatalf("result %+v", res)
	}
	if got, want := r.attempts(), []string{"0 primary ma", "1 fallback mb"}; !slices.Equal(got, want) {
		t.Fatalf("provider.request attempts %q; want %q", got, want)
	}
	evs, _ := r.db.EventsOfType(r.ctx, r.sid, []string{baton.EventSessionError})
	if len(evs) != 2 || string(evs[1].Payload) != `{"attempts":2,"reason":"all_providers_failed"}` {
		t.Fatalf("session.error events %v", evs)
	}
	if s, err := r.db.Session(r.ctx, r.sid); err != nil || s.State != baton.StateError {
		t.Fatalf("session %+v (%v); want it in error", s, err)
	}
}

// TestFailoverRetryAfter: a Retry-After longer than the backoff is waited
// exactly, and one past the cap waits the cap.
func TestFailoverRetryAfter(t *testing.T) {
	for _, c := range []struct {
		after, want time.Duration
	}{{10 * time.Second, 10 * time.Second}, {time.Hour, maxRetryWait}} {
		t.Run(c.after.String(), func(t *testing.T) {
			r := newFailoverRig(t, 1)
			turn := r.send(r.keys[0], "hi", false)
			pe := retryable(429)
			pe.RetryAfter = c.after
			start := r.clk.Now()
			r.on("a").fail(pe)
			due := r.clk.WaitTimer(t, "retry-after", func(d time.Duration) bool { return d == c.want })
			if !due.Equal(start.Add(c.want)) {
				t.Fatalf("retry due at %v; want %v", due, start.Add(c.want))
			}
			r.clk.AdvanceTo(due.Add(-time.Nanosecond))
			r.noCallYet("before Retry-After")
			r.clk.AdvanceTo(due)
			r.on("a").text("retried")
			r.wantDone(turn, "retried")
		})
	}
}

// TestFailoverTimeout: a provider call still unanswered at
// ProviderTimeout is cancelled then, not before, and counts as a
// retryable failure; with no retries the fallback is next.
func TestFailoverTimeout(t *testing.T) {
	r := newFailoverRig(t, -1)
	turn := r.send(r.keys[0], "hi", false)
	start := r.clk.Now()
	hung := r.on("a")
	due := r.clk.WaitTimer(t, "provider timeout", func(d time.Duration) bool { return d == rigProviderTimeout })
	if !due.Equal(start.Add(rigProviderTimeout)) {
		t.Fatalf("timeout due at %v; want %v", due, start.Add(rigProviderTimeout))
	}
	r.clk.AdvanceTo(due.Add(-time.Nanosecond))
	if hung.ctx.Err() != nil {
		t.Fatal("the provider call was cancelled before its timeout")
	}
	r.clk.AdvanceTo(due)
	if hung.ctx.Err() == nil {
		t.Fatal("the provider call outlived its timeout")
	}
	r.on("b").text("from b")
	r.wantDone(turn, "from b")
	evs, _ := r.db.EventsOfType(r.ctx, r.sid, []string{baton.EventProviderResp})
	if len(evs) != 2 || !strings.Contains(string(evs[0].Payload), `"error":"provider call timed out after 7m0s"`) {
		t.Fatalf("provider.response events %v", evs)
	}
}
