package clock_test

import (
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
)

func TestRealClockIsMonotonicAndFires(t *testing.T) {
	c := clock.New()
	a := c.Now()
	b := c.Now()
	if b.Before(a) {
		t.Fatalf("Now went backwards: %v then %v", a, b)
	}
	select {
	case <-c.After(time.Millisecond):
	case <-time.After(10 * time.Second):
		t.Fatal("After(1ms) did not fire within 10s")
	}
	tm := c.NewTimer(time.Hour)
	if !tm.Stop() {
		t.Fatal("Stop on an active timer returned false")
	}
	tm.Reset(time.Millisecond)
	select {
	case <-tm.C():
	case <-time.After(10 * time.Second):
		t.Fatal("reset timer did not fire within 10s")
	}
	if c.Now().Sub(a) <= 0 {
		t.Fatal("no time elapsed across waits")
	}
}
