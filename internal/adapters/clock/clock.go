// Package clock is the real ports.Clock, backed by package time.
//
// Imports: the standard library and internal/ports.
package clock

import (
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// Real is the system clock. Its Now readings carry Go's monotonic reading.
type Real struct{}

var _ ports.Clock = Real{}

// New returns the system clock.
func New() Real { return Real{} }

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// After returns time.After(d).
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// NewTimer returns a timer backed by time.NewTimer.
func (Real) NewTimer(d time.Duration) ports.Timer { return &timer{t: time.NewTimer(d)} }

type timer struct{ t *time.Timer }

func (t *timer) C() <-chan time.Time        { return t.t.C }
func (t *timer) Stop() bool                 { return t.t.Stop() }
func (t *timer) Reset(d time.Duration) bool { return t.t.Reset(d) }
