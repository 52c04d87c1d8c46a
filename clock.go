package baton

import "time"

// Clock is a time source: the time now, and timers. The engine and the
// executor hub run every deadline, timeout and wait on the Clock their
// options name, so that tests can move time by hand.
type Clock interface {
	Now() time.Time
	// AfterFunc calls f once d has elapsed (on RealClock, in its own
	// goroutine).
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending AfterFunc.
type Timer interface {
	// Stop prevents the call; it reports false when it already ran or
	// was stopped.
	Stop() bool
}

// RealClock is real time: time.Now and time.AfterFunc.
type RealClock struct{}

var _ Clock = RealClock{}

func (RealClock) Now() time.Time { return time.Now() }

func (RealClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }
