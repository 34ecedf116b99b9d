package domain_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// acquireRunLock runs AcquireRunLock in the bubble, advancing the clock through
// its watch.
func acquireRunLock(t *testing.T, store *porttest.MemoryCAS, clk *porttest.FakeClock, holder string) (l *domain.RunLock, err error) {
	t.Helper()
	call(t, clk, func() { l, err = domain.AcquireRunLock(t.Context(), store, clk, domain.RunLockConfig{Holder: holder}) })
	return l, err
}

// A second run is refused once the holder renews; after Release the lock
// is free at once.
func TestRunLockRefusesWhileRenewedAndFreesOnRelease(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		store := porttest.NewMemoryCAS("backfill.lock")
		first, err := domain.AcquireRunLock(t.Context(), store, clk, domain.RunLockConfig{Holder: "host-1"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = acquireRunLock(t, store, clk, "host-2")
		if !errors.Is(err, domain.ErrRunLocked) || !strings.Contains(err.Error(), "host-1") {
			t.Fatalf("second run: %v, want ErrRunLocked naming host-1", err)
		}
		if clk.Now().Sub(t0) > domain.DefaultRunLockTTL/3+2*time.Second {
			t.Fatalf("refused after %s; want within the renewal interval", clk.Now().Sub(t0))
		}
		select {
		case <-first.Lost():
			t.Fatalf("the holder lost its lock: %v", first.Err())
		default:
		}
		if err := first.Release(t.Context()); err != nil {
			t.Fatal(err)
		}
		if _, ok := store.Peek(); ok {
			t.Fatal("the record outlived Release")
		}
		third, err := domain.AcquireRunLock(t.Context(), store, clk, domain.RunLockConfig{Holder: "host-3"})
		if err != nil {
			t.Fatalf("after release: %v", err)
		}
		_ = third.Release(t.Context())
	})
}

// A record nobody renews (its run died) is taken over after one ttl.
func TestRunLockTakesOverAStaleRecord(t *testing.T) {
	store := porttest.NewMemoryCAS("backfill.lock")
	store.Store([]byte(`{"holder":"dead-1","since":"2026-11-01T00:00:00Z"}`))
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		l, err := acquireRunLock(t, store, clk, "host-2")
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = l.Release(t.Context()) }()
		if waited := clk.Now().Sub(t0); waited < domain.DefaultRunLockTTL {
			t.Fatalf("took over after %s, want one ttl unchanged", waited)
		}
		if obj, _ := store.Peek(); !strings.Contains(string(obj.Data), "host-2") {
			t.Fatalf("record %s", obj.Data)
		}
	})
}

// A holder whose record another run overwrote loses the lock at its next
// renewal and does not delete the other's record.
func TestRunLockLostWhenTakenOver(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		store := porttest.NewMemoryCAS("backfill.lock")
		l, err := domain.AcquireRunLock(t.Context(), store, clk, domain.RunLockConfig{Holder: "host-1"})
		if err != nil {
			t.Fatal(err)
		}
		store.Store([]byte(`{"holder":"host-2"}`))
		settle(t, clk, domain.DefaultRunLockTTL, closed(l.Lost()))
		if err := l.Err(); err == nil || !strings.Contains(err.Error(), "taken over") {
			t.Fatalf("Err %v", err)
		}
		_ = l.Release(t.Context())
		if obj, _ := store.Peek(); !strings.Contains(string(obj.Data), "host-2") {
			t.Fatalf("the other run's record was touched: %s", obj.Data)
		}
	})
}
