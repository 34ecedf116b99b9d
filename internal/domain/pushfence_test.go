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

// TestAPushStopsWhenTheFenceCloses: a push in the air when the fence closes
// (the leader froze, no renewal landed) is stopped at the deadline, never
// sent, abandoned uncommitted and reported; a push whose fence a renewal
// moved runs on; a push after the fence closed never reaches the sink.
func TestAPushStopsWhenTheFenceCloses(t *testing.T) {
	t.Run("frozen past the deadline", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			fence := &testFence{clk: clk, deadline: t0.Add(5 * time.Second)}
			sink := &wireSink{release: make(chan struct{})}
			rec := &recorder{}
			log := &commitLog{}
			p := fencedPipeline(t, sink, clk, fence, rec)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				done <- p.Run(ctx, ctx, log, noResume, []ports.Source{&listSource{entries: entries("k", 0, 5), wait: true}})
			}()
			settle(t, clk, time.Minute, func() bool { s, _ := sink.counts(); return s == 1 })
			advance(t, clk, 6*time.Second) // past the deadline, no renewal
			close(sink.release)            // the frozen request would go on now
			waitIdle()
			cancel()
			settle(t, clk, time.Hour, func() bool { return len(done) == 1 })
			if _, sent := sink.counts(); sent != 0 {
				t.Fatalf("%d batches were sent after the fence closed", sent)
			}
			for _, c := range log.all() {
				if _, ok := c["k"]; ok {
					t.Fatalf("the fenced batch's position was committed: %v", c)
				}
			}
			if rec.count(domain.EventPushFenced) != 1 {
				t.Fatalf("events %v, want one push_fenced", rec.kinds())
			}
		})
	})
	t.Run("the gate closes during the request", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			// The deadline timer has not fired yet (a paused process: its
			// timers and the request resume together); the sink's gate
			// still stops the bytes.
			fence := &testFence{clk: clk, deadline: t0.Add(time.Hour)}
			sink := &wireSink{release: make(chan struct{})}
			rec := &recorder{}
			p := fencedPipeline(t, sink, clk, fence, rec)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				done <- p.Run(ctx, ctx, &commitLog{}, noResume, []ports.Source{&listSource{entries: entries("k", 0, 5), wait: true}})
			}()
			settle(t, clk, time.Minute, func() bool { s, _ := sink.counts(); return s == 1 })
			fence.renew(clk.Now()) // closed now, without a timer
			close(sink.release)
			waitIdle()
			cancel()
			settle(t, clk, time.Hour, func() bool { return len(done) == 1 })
			if _, sent := sink.counts(); sent != 0 || rec.count(domain.EventPushFenced) != 1 {
				t.Fatalf("sent %d, events %v; want nothing sent and one push_fenced", sent, rec.kinds())
			}
		})
	})
	t.Run("a renewal moves the deadline", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			fence := &testFence{clk: clk, deadline: t0.Add(5 * time.Second)}
			sink := &wireSink{release: make(chan struct{})}
			rec := &recorder{}
			log := &commitLog{}
			p := fencedPipeline(t, sink, clk, fence, rec)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				done <- p.Run(ctx, ctx, log, noResume, []ports.Source{&listSource{entries: entries("k", 0, 5), wait: true}})
			}()
			settle(t, clk, time.Minute, func() bool { s, _ := sink.counts(); return s == 1 })
			advance(t, clk, 4*time.Second)
			fence.renew(t0.Add(20 * time.Second))
			advance(t, clk, 3*time.Second) // past the first deadline
			close(sink.release)
			settle(t, clk, time.Minute, func() bool { return len(log.all()) > 0 })
			cancel()
			settle(t, clk, time.Hour, func() bool { return len(done) == 1 })
			if _, sent := sink.counts(); sent != 1 || rec.count(domain.EventPushFenced) != 0 {
				t.Fatalf("sent %d, events %v; want the batch sent, nothing fenced", sent, rec.kinds())
			}
			if got := log.all()[0]["k"]; got != "000004" {
				t.Fatalf("committed %q, want 000004", got)
			}
		})
	})
	t.Run("closed before the push", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			fence := &testFence{clk: clk, deadline: t0} // closed from the start
			sink := &wireSink{release: make(chan struct{})}
			close(sink.release)
			rec := &recorder{}
			p := fencedPipeline(t, sink, clk, fence, rec)
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() {
				done <- p.Run(ctx, ctx, &commitLog{}, noResume, []ports.Source{&listSource{entries: entries("k", 0, 12), wait: true}})
			}()
			settle(t, clk, time.Minute, func() bool { return rec.count(domain.EventPushFenced) >= 2 })
			cancel()
			settle(t, clk, time.Hour, func() bool { return len(done) == 1 })
			if started, _ := sink.counts(); started != 0 {
				t.Fatalf("the sink was asked %d times after the fence closed", started)
			}
			for _, e := range rec.all() {
				if e.Kind == domain.EventPushFenced && !errors.Is(e.Err, domain.ErrFenced) {
					t.Fatalf("push_fenced carries %v, want the fence's error", e.Err)
				}
			}
		})
	})
}
