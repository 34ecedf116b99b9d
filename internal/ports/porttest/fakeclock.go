package porttest

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// FakeClock is a ports.Clock that moves only when a test calls Advance (or
// Set). It is goroutine-safe and monotonic: time never goes backwards. Timers
// and After channels fire during Advance, in deadline order, each observing
// the clock at its own deadline.
type FakeClock struct {
	mu      sync.Mutex
	changed *sync.Cond
	now     time.Time
	seq     uint64
	timers  []*fakeTimer
}

var _ ports.Clock = (*FakeClock)(nil)

// NewFakeClock returns a FakeClock reading start.
func NewFakeClock(start time.Time) *FakeClock {
	c := &FakeClock{now: start}
	c.changed = sync.NewCond(&c.mu)
	return c
}

// Now returns the fake time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// After returns a channel that receives the fake time once Advance has moved
// the clock d past now.
func (c *FakeClock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

// NewTimer returns a timer that fires when the clock reaches now+d.
func (c *FakeClock) NewTimer(d time.Duration) ports.Timer {
	t := &fakeTimer{clock: c, ch: make(chan time.Time, 1)}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.arm(t, d)
	return t
}

// arm schedules t at now+d; c.mu is held. A timer due at once fires at once.
func (c *FakeClock) arm(t *fakeTimer, d time.Duration) {
	t.deadline = c.now.Add(d)
	c.seq++
	t.seq = c.seq
	if d <= 0 {
		t.fire(c.now)
		return
	}
	t.active = true
	c.timers = append(c.timers, t)
	c.changed.Broadcast()
}

// Advance moves the clock forward by d (negative d is ignored), firing every
// timer whose deadline is reached.
func (c *FakeClock) Advance(d time.Duration) {
	if d < 0 {
		d = 0
	}
	c.mu.Lock()
	target := c.now.Add(d)
	c.mu.Unlock()
	c.advanceTo(target)
}

// Set moves the clock forward to t; a t before now is ignored (the clock is
// monotonic).
func (c *FakeClock) Set(t time.Time) { c.advanceTo(t) }

func (c *FakeClock) advanceTo(target time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for {
		next := c.nextDue(target)
		if next == nil {
			break
		}
		if next.deadline.After(c.now) {
			c.now = next.deadline
		}
		c.remove(next)
		next.fire(c.now)
	}
	if target.After(c.now) {
		c.now = target
	}
	c.changed.Broadcast()
}

// nextDue returns the earliest active timer due at or before target; c.mu held.
func (c *FakeClock) nextDue(target time.Time) *fakeTimer {
	var best *fakeTimer
	for _, t := range c.timers {
		if t.deadline.After(target) {
			continue
		}
		if best == nil || t.deadline.Before(best.deadline) || (t.deadline.Equal(best.deadline) && t.seq < best.seq) {
			best = t
		}
	}
	return best
}

func (c *FakeClock) remove(t *fakeTimer) {
	for i, x := range c.timers {
		if x == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			break
		}
	}
	t.active = false
	c.changed.Broadcast()
}

// Waiters returns the number of timers (and After channels) armed and not yet
// fired or stopped: a proxy for the goroutines blocked on this clock.
func (c *FakeClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// Deadlines returns the pending timer deadlines, earliest first.
func (c *FakeClock) Deadlines() []time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]time.Time, 0, len(c.timers))
	for _, t := range c.timers {
		out = append(out, t.deadline)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Before(out[j]) })
	return out
}

// BlockUntil waits until at least n timers are armed on the clock, which
// tells a test that the goroutines it started are parked waiting for time to
// pass. It returns ctx.Err() if ctx ends first.
func (c *FakeClock) BlockUntil(ctx context.Context, n int) error {
	stop := context.AfterFunc(ctx, func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.changed.Broadcast()
	})
	defer stop()
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.timers) < n {
		if err := ctx.Err(); err != nil {
			return err
		}
		c.changed.Wait()
	}
	return nil
}

type fakeTimer struct {
	clock    *FakeClock
	ch       chan time.Time
	deadline time.Time
	seq      uint64
	active   bool
}

// fire delivers now without blocking (a full buffer keeps its older value,
// like a time.Timer whose channel was not read).
func (t *fakeTimer) fire(now time.Time) {
	select {
	case t.ch <- now:
	default:
	}
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	was := t.active
	if was {
		c.remove(t)
	}
	t.drain()
	return was
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	c := t.clock
	c.mu.Lock()
	defer c.mu.Unlock()
	was := t.active
	if was {
		c.remove(t)
	}
	t.drain()
	c.arm(t, d)
	return was
}

// drain empties the channel so a stopped or reset timer delivers no stale
// value (the Go 1.23 time.Timer semantics).
func (t *fakeTimer) drain() {
	select {
	case <-t.ch:
	default:
	}
}
