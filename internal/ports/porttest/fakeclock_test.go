package porttest_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

var epoch0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func TestFakeClockNowMovesOnlyOnAdvance(t *testing.T) {
	c := porttest.NewFakeClock(epoch0)
	if !c.Now().Equal(epoch0) {
		t.Fatalf("Now = %v, want %v", c.Now(), epoch0)
	}
	c.Advance(1500 * time.Millisecond)
	if got := c.Now().Sub(epoch0); got != 1500*time.Millisecond {
		t.Fatalf("after Advance(1.5s) elapsed %v", got)
	}
	c.Advance(-time.Hour)
	c.Set(epoch0)
	if got := c.Now().Sub(epoch0); got != 1500*time.Millisecond {
		t.Fatalf("clock went backwards: elapsed %v", got)
	}
}

func TestFakeClockTimersFireInDeadlineOrderAtTheirDeadline(t *testing.T) {
	c := porttest.NewFakeClock(epoch0)
	late := c.After(3 * time.Second)
	early := c.After(time.Second)
	c.Advance(999 * time.Millisecond)
	select {
	case <-early:
		t.Fatal("timer fired before its deadline")
	default:
	}
	c.Advance(5 * time.Second)
	if at := <-early; !at.Equal(epoch0.Add(time.Second)) {
		t.Fatalf("early timer saw %v, want deadline %v", at, epoch0.Add(time.Second))
	}
	if at := <-late; !at.Equal(epoch0.Add(3 * time.Second)) {
		t.Fatalf("late timer saw %v", at)
	}
	if c.Waiters() != 0 {
		t.Fatalf("Waiters = %d after all fired", c.Waiters())
	}
}

func TestFakeClockZeroDurationFiresAtOnce(t *testing.T) {
	c := porttest.NewFakeClock(epoch0)
	select {
	case <-c.After(0):
	default:
		t.Fatal("After(0) did not fire at once")
	}
}

func TestFakeClockStopAndReset(t *testing.T) {
	c := porttest.NewFakeClock(epoch0)
	tm := c.NewTimer(time.Second)
	if !tm.Stop() {
		t.Fatal("Stop of an active timer = false")
	}
	if tm.Stop() {
		t.Fatal("second Stop = true")
	}
	c.Advance(2 * time.Second)
	select {
	case <-tm.C():
		t.Fatal("stopped timer fired")
	default:
	}
	if tm.Reset(time.Second) {
		t.Fatal("Reset of a stopped timer = true")
	}
	if got := c.Deadlines(); len(got) != 1 || !got[0].Equal(epoch0.Add(3*time.Second)) {
		t.Fatalf("Deadlines = %v", got)
	}
	c.Advance(time.Second)
	<-tm.C()
	// A fired-but-unread timer that is reset delivers only the new firing.
	tm.Reset(time.Second)
	c.Advance(time.Second)
	tm.Reset(time.Second)
	select {
	case <-tm.C():
		t.Fatal("reset timer delivered a stale firing")
	default:
	}
}

func TestFakeClockBlockUntilAndConcurrentUse(t *testing.T) {
	c := porttest.NewFakeClock(epoch0)
	const n = 8
	var wg sync.WaitGroup
	fired := make(chan time.Duration, n)
	for i := range n {
		wg.Go(func() {
			d := time.Duration(i+1) * time.Second
			<-c.After(d)
			fired <- c.Now().Sub(epoch0)
		})
	}
	if err := c.BlockUntil(ctxTimeout(t), n); err != nil {
		t.Fatalf("BlockUntil(%d): %v", n, err)
	}
	c.Advance(n * time.Second)
	wg.Wait()
	close(fired)
	count := 0
	for d := range fired {
		if d < time.Second || d > n*time.Second {
			t.Fatalf("a waiter woke at +%v", d)
		}
		count++
	}
	if count != n {
		t.Fatalf("%d of %d waiters woke", count, n)
	}
}

func TestFakeClockBlockUntilHonoursContext(t *testing.T) {
	c := porttest.NewFakeClock(epoch0)
	ctx, cancel := contextWithCancel(t)
	cancel()
	if err := c.BlockUntil(ctx, 1); err == nil {
		t.Fatal("BlockUntil with a cancelled context and no waiters returned nil")
	}
}

func contextWithCancel(t *testing.T) (context.Context, context.CancelFunc) {
	return context.WithCancel(t.Context())
}
