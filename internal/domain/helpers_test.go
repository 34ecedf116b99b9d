package domain_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

const (
	ttl   = 30 * time.Second
	renew = 10 * time.Second
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// recorder is an Observer that keeps every event.
type recorder struct {
	mu     sync.Mutex
	events []domain.Event
}

func (r *recorder) Observe(e domain.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, e)
}

func (r *recorder) kinds() []domain.EventKind {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]domain.EventKind, 0, len(r.events))
	for _, e := range r.events {
		out = append(out, e.Kind)
	}
	return out
}

func (r *recorder) count(k domain.EventKind) int {
	return len(slices.DeleteFunc(r.kinds(), func(x domain.EventKind) bool { return x != k }))
}

func (r *recorder) all() []domain.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// logBuffer captures slog output.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.String()
}

func (l *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// bubble runs f in a synctest bubble with a fresh FakeClock.
func bubble(t *testing.T, f func(t *testing.T, clk *porttest.FakeClock)) {
	t.Helper()
	synctest.Test(t, func(t *testing.T) {
		f(t, porttest.NewFakeClock(t0))
	})
}

// settle lets every goroutine in the bubble run until all are blocked, then
// moves the clock to the next timer deadline, until done reports true or
// the clock has moved by limit.
func settle(t *testing.T, clk *porttest.FakeClock, limit time.Duration, done func() bool) {
	t.Helper()
	end := clk.Now().Add(limit)
	for {
		synctest.Wait()
		if done() {
			return
		}
		ds := clk.Deadlines()
		if len(ds) == 0 || ds[0].After(end) {
			if done() {
				return
			}
			t.Fatalf("condition not reached by %s (next timer %v)", end.Sub(t0), ds)
		}
		clk.Set(ds[0])
	}
}

// closed returns a condition that is true once ch is closed.
func closed(ch <-chan struct{}) func() bool {
	return func() bool {
		select {
		case <-ch:
			return true
		default:
			return false
		}
	}
}

// call runs f to completion in the bubble, advancing the clock through any
// waits (backoff, timeouts) it makes.
func call(t *testing.T, clk *porttest.FakeClock, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	settle(t, clk, time.Hour, closed(done))
}

// runWith runs k.Run with cb in the bubble. The returned stop cancels Run
// and waits for it to return, advancing the clock through a graceful stop.
func runWith(t *testing.T, clk *porttest.FakeClock, k *domain.LeaseKeeper, cb domain.Callbacks) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = k.Run(ctx, cb)
	}()
	return func() {
		cancel()
		settle(t, clk, 2*time.Hour, closed(done))
	}
}

// advance moves the clock by d, letting the bubble run at every timer on
// the way.
func advance(t *testing.T, clk *porttest.FakeClock, d time.Duration) {
	t.Helper()
	end := clk.Now().Add(d)
	settle(t, clk, d, func() bool {
		ds := clk.Deadlines()
		return len(ds) == 0 || ds[0].After(end)
	})
	clk.Set(end)
	synctest.Wait()
}

// keeperOpts tweak a test keeper's config.
type keeperOpt func(*domain.LeaseConfig)

func newKeeper(t *testing.T, cas ports.ObjectCAS, clk ports.Clock, holder string, opts ...keeperOpt) (*domain.LeaseKeeper, *recorder) {
	t.Helper()
	rec := &recorder{}
	cfg := domain.LeaseConfig{Holder: holder, Instance: holder + "-instance", TTL: ttl, RenewInterval: renew,
		Observer: rec, Retry: domain.RetryPolicy{Jitter: func() float64 { return 0.5 }}}
	for _, o := range opts {
		o(&cfg)
	}
	k, err := domain.NewLeaseKeeper(cas, clk, cfg)
	if err != nil {
		t.Fatalf("NewLeaseKeeper: %v", err)
	}
	return k, rec
}

// stored decodes the lease record in m.
func stored(t *testing.T, m *porttest.MemoryCAS) (domain.LeaseRecord, ports.Version) {
	t.Helper()
	obj, ok := m.Peek()
	if !ok {
		t.Fatal("lease object is absent")
	}
	r, err := domain.DecodeLeaseRecord(obj.Data)
	if err != nil {
		t.Fatalf("stored lease: %v", err)
	}
	return r, obj.Version
}

// plant stores a lease record written by someone else.
func plant(m *porttest.MemoryCAS, r domain.LeaseRecord) ports.Version {
	return m.Store(r.Encode())
}

// putPreconditions records the precondition of every put on m.
func putPreconditions(m *porttest.MemoryCAS) func() []ports.Precondition {
	var mu sync.Mutex
	var pres []ports.Precondition
	m.Inject(porttest.Fault{Op: porttest.OpPut, When: func(c porttest.Call) bool {
		mu.Lock()
		defer mu.Unlock()
		pres = append(pres, c.Pre)
		return false
	}})
	return func() []ports.Precondition {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(pres)
	}
}

func docOf(t *testing.T, m *porttest.MemoryCAS) map[string]string {
	t.Helper()
	obj, ok := m.Peek()
	if !ok {
		t.Fatal("checkpoint object is absent")
	}
	var doc map[string]string
	if err := json.Unmarshal(obj.Data, &doc); err != nil {
		t.Fatalf("checkpoint document: %v", err)
	}
	return doc
}

func ctx(t *testing.T) context.Context { return t.Context() }

// waitIdle waits until every goroutine in the bubble is blocked.
func waitIdle() { synctest.Wait() }
