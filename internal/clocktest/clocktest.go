// Package clocktest holds the test clocks of baton.Clock: Clock, which
// moves only when the test advances it, and NowFunc, whose Now the test
// sets while its timers run on real time.
//
// Clock runs due timers on the goroutine that advances it, in the order
// of their due time, so when Advance returns everything due by then has
// run. Its Wait methods let a test wait for the code under test to arm a
// timer instead of sleeping; each gives up, failing the test, after a
// guard of 10 s, so that a broken feature fails instead of hanging.
package clocktest

import (
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/baton-engine/baton"
)

// guard bounds every wait, so that a broken feature fails the test
// instead of hanging it; nothing waits for it to pass.
const guard = 10 * time.Second

// Clock is a baton.Clock that moves only when the test advances it.
type Clock struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*timer
	changed chan struct{} // closed and replaced when a timer is armed
}

var _ baton.Clock = (*Clock)(nil)

type timer struct {
	c       *Clock
	armed   time.Time
	at      time.Time
	d       time.Duration
	f       func()
	stopped bool
}

// New returns a Clock reading start.
func New(start time.Time) *Clock {
	return &Clock{now: start, changed: make(chan struct{})}
}

func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *Clock) AfterFunc(d time.Duration, f func()) baton.Timer {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &timer{c: c, armed: c.now, at: c.now.Add(d), d: d, f: f}
	c.timers = append(c.timers, t)
	close(c.changed)
	c.changed = make(chan struct{})
	return t
}

func (t *timer) Stop() bool {
	t.c.mu.Lock()
	defer t.c.mu.Unlock()
	was := !t.stopped
	t.stopped = true
	return was
}

// Advance moves the clock by d, running every timer that comes due on
// the way; a timer armed by one of them runs too if it is due by then.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	end := c.now.Add(d)
	c.mu.Unlock()
	for {
		c.mu.Lock()
		var next *timer
		for _, t := range c.timers {
			if !t.stopped && !t.at.After(end) && (next == nil || t.at.Before(next.at)) {
				next = t
			}
		}
		if next == nil {
			c.now = end
			c.timers = slices.DeleteFunc(c.timers, func(t *timer) bool { return t.stopped })
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
func (c *Clock) AdvanceTo(at time.Time) {
	c.Advance(max(0, at.Sub(c.Now())))
}

// WaitTimer waits until a pending timer armed for a duration match
// accepts exists and returns its due time. match runs with the clock
// locked: it must not call the clock.
func (c *Clock) WaitTimer(t testing.TB, what string, match func(time.Duration) bool) time.Time {
	t.Helper()
	return c.wait(t, what, func(x *timer) bool { return match(x.d) })
}

// WaitArmed waits until a pending timer armed for d exists.
func (c *Clock) WaitArmed(t testing.TB, d time.Duration) {
	t.Helper()
	c.wait(t, d.String(), func(x *timer) bool { return x.d == d })
}

// WaitArmedNow waits until a pending timer armed for d at the clock's
// current time exists: one armed for d before the last Advance does not
// count.
func (c *Clock) WaitArmedNow(t testing.TB, d time.Duration) {
	t.Helper()
	c.wait(t, d.String()+" from now", func(x *timer) bool { return x.d == d && x.armed.Equal(c.now) })
}

// wait waits until a pending timer match accepts exists and returns its
// due time; match runs under c.mu.
func (c *Clock) wait(t testing.TB, what string, match func(*timer) bool) time.Time {
	t.Helper()
	deadline := time.NewTimer(guard)
	defer deadline.Stop()
	for {
		c.mu.Lock()
		i := slices.IndexFunc(c.timers, func(x *timer) bool { return !x.stopped && match(x) })
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

// NowFunc is a baton.Clock whose Now the test sets by hand while its
// timers run on real time: time passes for the checks that read Now (a
// pause's deadline at the next message, a client's ttl) and never for
// timers.
type NowFunc func() time.Time

var _ baton.Clock = NowFunc(nil)

func (f NowFunc) Now() time.Time { return f() }

func (NowFunc) AfterFunc(d time.Duration, f func()) baton.Timer { return time.AfterFunc(d, f) }
