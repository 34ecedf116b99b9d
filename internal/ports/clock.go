package ports

import "time"

// Clock is the core's only source of time. The real clock lives in
// internal/adapters/clock; tests use porttest.FakeClock, which moves only when
// the test advances it.
//
// The core measures durations only as differences between two Now readings
// of the same Clock (t2.Sub(t1)). The real clock's readings carry Go's
// monotonic reading, so those differences are immune to wall-clock steps
// (NTP, an operator's date command). Wall-clock values are used only for
// human-readable timestamps and are never compared across processes.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// After returns a channel that receives the current time once d has
	// elapsed. d <= 0 fires at once.
	After(d time.Duration) <-chan time.Time
	// NewTimer returns a Timer that fires once after d.
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer created by a Clock.
type Timer interface {
	// C returns the channel on which the timer delivers its firing time.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It returns false if the timer had
	// already fired or been stopped.
	Stop() bool
	// Reset re-arms the timer to fire after d. It returns true if the timer
	// had been active.
	Reset(d time.Duration) bool
}
