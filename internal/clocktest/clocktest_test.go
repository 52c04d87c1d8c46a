package clocktest

import (
	"slices"
	"testing"
	"time"
)

var start = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// TestAdvance: due timers run in due order on the advancing goroutine,
// each seeing the clock at its due time; a timer armed by one runs in
// the same Advance when it is due by then; a stopped one never runs and
// a later one waits for its time.
func TestAdvance(t *testing.T) {
	c := New(start)
	var ran []string
	at := map[string]time.Duration{}
	record := func(name string) func() {
		return func() {
			ran = append(ran, name)
			at[name] = c.Now().Sub(start)
		}
	}
	c.AfterFunc(3*time.Second, record("three"))
	c.AfterFunc(time.Second, func() {
		record("one")()
		c.AfterFunc(time.Second, record("one+one"))
	})
	stopped := c.AfterFunc(2*time.Second, record("stopped"))
	c.AfterFunc(time.Minute, record("minute"))
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop reports true only the first time")
	}

	c.Advance(5 * time.Second)
	if want := []string{"one", "one+one", "three"}; !slices.Equal(ran, want) {
		t.Fatalf("ran %v, want %v", ran, want)
	}
	for name, d := range map[string]time.Duration{"one": time.Second, "one+one": 2 * time.Second, "three": 3 * time.Second} {
		if at[name] != d {
			t.Errorf("%s ran at +%v, want +%v", name, at[name], d)
		}
	}
	if got := c.Now().Sub(start); got != 5*time.Second {
		t.Fatalf("clock at +%v after Advance(5s)", got)
	}

	c.AdvanceTo(start.Add(time.Minute - time.Nanosecond))
	if len(ran) != 3 {
		t.Fatalf("the minute timer ran early: %v", ran)
	}
	c.AdvanceTo(start) // never back
	if !c.Now().Equal(start.Add(time.Minute - time.Nanosecond)) {
		t.Fatalf("AdvanceTo moved the clock back to %v", c.Now())
	}
	c.Advance(time.Nanosecond)
	if ran[len(ran)-1] != "minute" {
		t.Fatalf("the minute timer did not run at its time: %v", ran)
	}
}

// TestWait: the Wait methods return once the awaited timer is armed on
// another goroutine, and WaitTimer reports the due time of a pending
// timer, never of a stopped one.
func TestWait(t *testing.T) {
	c := New(start)
	old := c.AfterFunc(time.Minute, func() {})
	c.Advance(time.Second)

	armed := make(chan struct{})
	go func() {
		defer close(armed)
		c.AfterFunc(time.Minute, func() {})
		c.AfterFunc(time.Hour, func() {})
	}()
	c.WaitArmedNow(t, time.Minute)
	if due := c.WaitTimer(t, "hour", func(d time.Duration) bool { return d == time.Hour }); !due.Equal(start.Add(time.Second + time.Hour)) {
		t.Errorf("the hour timer is due at %v", due)
	}
	<-armed
	c.WaitArmed(t, time.Minute)
	old.Stop()
	if due := c.WaitTimer(t, "minute", func(d time.Duration) bool { return d == time.Minute }); !due.Equal(start.Add(time.Second + time.Minute)) {
		t.Errorf("the pending minute timer is due at %v, want the one armed after the Advance", due)
	}
}

// TestNowFunc: Now is the test's function; timers run on real time.
func TestNowFunc(t *testing.T) {
	c := NowFunc(func() time.Time { return start })
	if !c.Now().Equal(start) {
		t.Fatalf("Now = %v", c.Now())
	}
	fired := make(chan struct{})
	c.AfterFunc(0, func() { close(fired) })
	<-fired
}
