package domain_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// testFence is a lease fence as the keeper keeps it: open until its
// deadline, which a renewal moves.
type testFence struct {
	clk      ports.Clock
	mu       sync.Mutex
	deadline time.Time
	asked    int
}

func (f *testFence) check() (time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked++
	if !f.clk.Now().Before(f.deadline) {
		return time.Time{}, &domain.FenceError{Holder: "a", Lease: "mem://lease", Reason: "self-fencing deadline passed"}
	}
	return f.deadline, nil
}

func (f *testFence) renew(d time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.deadline = d
}

// wireSink is a sink whose requests hang until released (a leader frozen
// in the middle of a push), then ask the push's send gate just before
// the bytes would leave, as the Loki sink does; what passes is "sent".
type wireSink struct {
	release chan struct{}
	mu      sync.Mutex
	started int
	sent    [][]ports.Entry
}

func (s *wireSink) Push(ctx context.Context, batch []ports.Entry) error {
	s.mu.Lock()
	s.started++
	s.mu.Unlock()
	select {
	case <-s.release:
	case <-ctx.Done():
		return ports.Transient("push", ctx.Err())
	}
	if err := ports.SendGate(ctx); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = append(s.sent, batch)
	return nil
}

func (s *wireSink) counts() (started, sent int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.started, len(s.sent)
}

func fencedPipeline(t *testing.T, sink ports.Sink, clk ports.Clock, fence *testFence, obs domain.Observer) *domain.Pipeline {
	t.Helper()
	lane := smallLane
	lane.BatchEntries = 5
	p, err := domain.NewPipeline(sink, clk, domain.PipelineConfig{Realtime: lane, Bulk: lane, RetryMin: time.Second,
		RetryMax: 4 * time.Second, Jitter: func() float64 { return 0.5 }, Fence: fence.check, Observer: obs})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// fencedRun is a pipeline pushing n entries of key "k" into a wireSink,
// its fence closing at deadline; stop ends it and waits for Run.
type fencedRun struct {
	fence *testFence
	sink  *wireSink
	rec   *recorder
	log   *commitLog
	stop  func()
}

func startFenced(t *testing.T, clk *porttest.FakeClock, deadline time.Time, n int, released bool) *fencedRun {
	t.Helper()
	r := &fencedRun{fence: &testFence{clk: clk, deadline: deadline}, sink: &wireSink{release: make(chan struct{})},
		rec: &recorder{}, log: &commitLog{}}
	if released {
		close(r.sink.release)
	}
	p := fencedPipeline(t, r.sink, clk, r.fence, r.rec)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- p.Run(ctx, ctx, r.log, noResume, []ports.Source{&listSource{entries: entries("k", 0, n), wait: true}})
	}()
	r.stop = func() {
		cancel()
		settle(t, clk, time.Hour, func() bool { return len(done) == 1 })
	}
	return r
}

// TestAPushStopsWhenTheFenceCloses: a push in the air when the fence closes
// (the leader froze, no renewal landed) is stopped at the deadline, never
// sent, abandoned uncommitted and reported; a push whose fence a renewal
// moved runs on; a push after the fence closed never reaches the sink.
func TestAPushStopsWhenTheFenceCloses(t *testing.T) {
	t.Run("frozen past the deadline", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			r := startFenced(t, clk, t0.Add(5*time.Second), 5, false)
			settle(t, clk, time.Minute, func() bool { s, _ := r.sink.counts(); return s == 1 })
			advance(t, clk, 6*time.Second) // past the deadline, no renewal
			close(r.sink.release)          // the frozen request would go on now
			waitIdle()
			r.stop()
			if _, sent := r.sink.counts(); sent != 0 {
				t.Fatalf("%d batches were sent after the fence closed", sent)
			}
			for _, c := range r.log.all() {
				if _, ok := c["k"]; ok {
					t.Fatalf("the fenced batch's position was committed: %v", c)
				}
			}
			if r.rec.count(domain.EventPushFenced) != 1 {
				t.Fatalf("events %v, want one push_fenced", r.rec.kinds())
			}
		})
	})
	t.Run("the gate closes during the request", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			// The deadline timer has not fired yet (a paused process: its
			// timers and the request resume together); the sink's gate
			// still stops the bytes.
			r := startFenced(t, clk, t0.Add(time.Hour), 5, false)
			settle(t, clk, time.Minute, func() bool { s, _ := r.sink.counts(); return s == 1 })
			r.fence.renew(clk.Now()) // closed now, without a timer
			close(r.sink.release)
			waitIdle()
			r.stop()
			if _, sent := r.sink.counts(); sent != 0 || r.rec.count(domain.EventPushFenced) != 1 {
				t.Fatalf("sent %d, events %v; want nothing sent and one push_fenced", sent, r.rec.kinds())
			}
		})
	})
	t.Run("a renewal moves the deadline", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			r := startFenced(t, clk, t0.Add(5*time.Second), 5, false)
			settle(t, clk, time.Minute, func() bool { s, _ := r.sink.counts(); return s == 1 })
			advance(t, clk, 4*time.Second)
			r.fence.renew(t0.Add(20 * time.Second))
			advance(t, clk, 3*time.Second) // past the first deadline
			close(r.sink.release)
			settle(t, clk, time.Minute, func() bool { return len(r.log.all()) > 0 })
			r.stop()
			if _, sent := r.sink.counts(); sent != 1 || r.rec.count(domain.EventPushFenced) != 0 {
				t.Fatalf("sent %d, events %v; want the batch sent, nothing fenced", sent, r.rec.kinds())
			}
			if got := r.log.all()[0]["k"]; got != "000004" {
				t.Fatalf("committed %q, want 000004", got)
			}
		})
	})
	t.Run("closed before the push", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			r := startFenced(t, clk, t0, 12, true) // closed from the start
			settle(t, clk, time.Minute, func() bool { return r.rec.count(domain.EventPushFenced) >= 2 })
			r.stop()
			if started, _ := r.sink.counts(); started != 0 {
				t.Fatalf("the sink was asked %d times after the fence closed", started)
			}
			for _, e := range r.rec.all() {
				if e.Kind == domain.EventPushFenced && !errors.Is(e.Err, domain.ErrFenced) {
					t.Fatalf("push_fenced carries %v, want the fence's error", e.Err)
				}
			}
		})
	})
}
