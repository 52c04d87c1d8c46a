package engine

import (
	"slices"
	"sync"
	"testing"
	"time"
)

// Test clocks, exported for the external tests too (package engine_test).

// guard bounds every wait of a test so that a broken feature fails it
// instead of hanging; nothing waits for it to pass.
const guard = 10 * time.Second

// FakeClock is a Clock that moves only when the test advances it. Due
// timers run on the advancing goroutine, in order of their due time, so
// when Advance returns everything due by then has run.
type FakeClock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced when a timer is armed
}

type fakeTimer struct {
	c       *FakeClock
	at      time.Time
	d       time.Duration
	f       func()
	stopped bool
}

// NewFakeClock returns a FakeClock reading start.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start, changed: make(chan struct{})}
}

func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *FakeClock) AfterFunc(d time.Duration, f func()) Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{c: c, at: c.now.Add(d), d: d, f: f}
	c.timers = append(c.timers, t)
	close(c.changed)
	c.changed = make(chan struct{})
	return t
}

func (t *fakeTimer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Advance moves the clock by d, running every timer that comes due on
// the way; a timer armed by one of them runs too if it is due by then.
func (c *FakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next *fakeTimer
		for _, t := range c.timers {
			if !t.stopped && !t.at.After(end) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		if next == nil {
			c.now = end
			c.timers = slices.DeleteFunc(c.timers, func(t *fakeTimer) bool { return t.stopped })
			c.mu.Unlock()
			return
		}
		next.stopped = true
		if next.at.After(c.now) {
			c.now = next.at
		}
		c.mu.Unlock()
		next.f()
	}
}

// AdvanceTo moves the clock to at (never back).
func (c *FakeClock) AdvanceTo(at time.Time) {
	c.Advance(max(0, at.Sub(c.Now())))
}

// WaitTimer waits until a pending timer armed for a duration match
// accepts exists and returns its due time; it fails the test after guard.
func (c *FakeClock) WaitTimer(t testing.TB, what string, match func(time.Duration) bool) time.Time {
	t.Helper()
	deadline := time.NewTimer(guard)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		i := slices.IndexFunc(c.timers, func(x *fakeTimer) bool { return !x.stopped && match(x.d) })
		var at time.Time
		if i >= 0 {
			at = c.timers[i].at
		}
		ch := c.changed
		c.mu.Unlock()
		if i >= 0 {
			return at
		}
		select {
		case <-ch:
		case <-deadline.C:
			t.Fatalf("no %s timer was armed", what)
		}
	}
}

// NowClock is a Clock whose Now the test sets by hand while its timers
// run on real time: time passes for the checks that read Now (a pause's
// deadline at the next message, a client's ttl) and never for timers.
type NowClock func() time.Time

func (f NowClock) Now() time.Time { return f() }

func (NowClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
