package domain_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// listSource emits fixed entries, then waits for ctx (or returns if done).
type listSource struct {
	lane    ports.Lane
	entries []ports.Entry
	wait    bool
	emitted int
	mu      sync.Mutex
}

func (s *listSource) Name() string     { return "list" }
func (s *listSource) Lane() ports.Lane { return s.lane }
func (s *listSource) Run(ctx context.Context, _ func(string) (string, bool), emit func(ports.Entry) error) error {
	for _, e := range s.entries {
		if err := emit(e); err != nil {
			return err
		}
		s.mu.Lock()
		s.emitted++
		s.mu.Unlock()
	}
	if s.wait {
		<-ctx.Done()
	}
	return nil
}

func (s *listSource) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.emitted
}

// recordingSink records batches; fail decides per call whether to refuse.
type recordingSink struct {
	mu      sync.Mutex
	batches [][]ports.Entry
	calls   int
	fail    func(call int, batch []ports.Entry) error
	gate    chan struct{} // if set, each push waits for a receive
}

func (s *recordingSink) Push(ctx context.Context, batch []ports.Entry) error {
	if s.gate != nil {
		select {
		case <-s.gate:
		case <-ctx.Done():
			return ports.Transient("push", ctx.Err())
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	if s.fail != nil {
		if err := s.fail(s.calls, batch); err != nil {
			return err
		}
	}
	s.batches = append(s.batches, append([]ports.Entry(nil), batch...))
	return nil
}

func (s *recordingSink) sizes() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, b := range s.batches {
		out = append(out, len(b))
	}
	return out
}

// commitLog records commits.
type commitLog struct {
	mu      sync.Mutex
	commits []map[string]string
	err     func(n int) error
}

func (c *commitLog) CommitMany(_ context.Context, kv map[string]string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		if err := c.err(len(c.commits) + 1); err != nil {
			return err
		}
	}
	c.commits = append(c.commits, maps.Clone(kv))
	return nil
}

func (c *commitLog) all() []map[string]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]map[string]string(nil), c.commits...)
}

func entries(key string, from, n int) []ports.Entry {
	out := make([]ports.Entry, n)
	for i := range out {
		out[i] = ports.Entry{Time: t0.Add(time.Duration(from+i) * time.Millisecond), Line: fmt.Sprintf("line %d", from+i),
			Labels: map[string]string{"source": "test"}, Checkpoint: ports.Checkpoint{Key: key, Value: fmt.Sprintf("%06d", from+i)}}
	}
	return out
}

func newPipeline(t *testing.T, sink ports.Sink, clk ports.Clock, lane domain.LaneConfig) *domain.Pipeline {
	t.Helper()
	p, err := domain.NewPipeline(sink, clk, domain.PipelineConfig{Realtime: lane, Bulk: lane, RetryMin: time.Second,
		RetryMax: 4 * time.Second, Jitter: func() float64 { return 0.5 }})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var smallLane = domain.LaneConfig{QueueEntries: 100, QueueBytes: 1 << 20, BatchEntries: 10, BatchBytes: 1 << 20, BatchWait: time.Second}

func noResume(string) (string, bool) { return "", false }

func TestPipelineBatchesByEntriesBytesAndWait(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		sink, log := &recordingSink{}, &commitLog{}
		src := &listSource{entries: entries("k", 0, 25)}
		p := newPipeline(t, sink, clk, smallLane)
		var err error
		call(t, clk, func() { err = p.Run(t.Context(), t.Context(), log, noResume, []ports.Source{src}) })
		if err != nil || fmt.Sprint(sink.sizes()) != "[10 10 5]" {
			t.Fatalf("batches %v (%v), want [10 10 5] by entry count", sink.sizes(), err)
		}
		// By bytes: each entry costs ~80 bytes; a 200-byte batch holds 3.
		sink = &recordingSink{}
		byBytes := smallLane
		byBytes.BatchBytes = 200
		p = newPipeline(t, sink, clk, byBytes)
		call(t, clk, func() {
			err = p.Run(t.Context(), t.Context(), log, noResume, []ports.Source{&listSource{entries: entries("k", 0, 7)}})
		})
		if err != nil || fmt.Sprint(sink.sizes()) != "[3 3 1]" {
			t.Fatalf("batches %v, want [3 3 1] by bytes", sink.sizes())
		}
		// By wait: three entries, then the source idles; the batch goes
		// after BatchWait.
		sink = &recordingSink{}
		p = newPipeline(t, sink, clk, smallLane)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		start := clk.Now()
		go func() {
			defer close(done)
			_ = p.Run(ctx, t.Context(), log, noResume, []ports.Source{&listSource{entries: entries("k", 0, 3), wait: true}})
		}()
		settle(t, clk, time.Minute, func() bool { return len(sink.sizes()) == 1 })
		if got := clk.Now().Sub(start); got != time.Second || fmt.Sprint(sink.sizes()) != "[3]" {
			t.Fatalf("batch %v pushed after %s, want [3] after BatchWait 1s", sink.sizes(), got)
		}
		cancel()
		settle(t, clk, time.Minute, closed(done))
	})
}

func TestPipelineBackpressureBlocksTheSourceAndDropsNothing(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		sink := &recordingSink{gate: make(chan struct{})}
		lane := smallLane
		lane.QueueEntries = 20
		src := &listSource{entries: entries("k", 0, 200)}
		p := newPipeline(t, sink, clk, lane)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = p.Run(t.Context(), t.Context(), &commitLog{}, noResume, []ports.Source{src})
		}()
		waitIdle()
		// One batch is held at the sink, the queue is full: the source blocks.
		if n := src.count(); n != lane.BatchEntries+lane.QueueEntries {
			t.Fatalf("source emitted %d with the sink stalled, want batch %d + queue %d", n, lane.BatchEntries, lane.QueueEntries)
		}
		go func() {
			for {
				select {
				case sink.gate <- struct{}{}:
				case <-done:
					return
				}
			}
		}()
		settle(t, clk, time.Hour, closed(done))
		total := 0
		for _, n := range sink.sizes() {
			total += n
		}
		if total != 200 {
			t.Fatalf("%d of 200 entries pushed", total)
		}
	})
}

func TestPipelineBytesBudgetBlocks(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		sink := &recordingSink{gate: make(chan struct{})}
		lane := smallLane
		lane.QueueBytes = 400 // about 5 entries
		src := &listSource{entries: entries("k", 0, 100)}
		p := newPipeline(t, sink, clk, lane)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = p.Run(t.Context(), t.Context(), &commitLog{}, noResume, []ports.Source{src})
		}()
		waitIdle()
		if n := src.count(); n > lane.BatchEntries+6 {
			t.Fatalf("source emitted %d under a 400-byte budget with the sink stalled", n)
		}
		close(sink.gate)
		settle(t, clk, time.Hour, closed(done))
		if src.count() != 100 {
			t.Fatalf("source emitted %d of 100", src.count())
		}
	})
}

func TestPipelineCommitsAfterPushLastValuePerKey(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		var pushedBeforeCommit []int
		log := &commitLog{}
		sink := &recordingSink{fail: func(call int, _ []ports.Entry) error {
			if call == 1 {
				return ports.Transient("push", errors.New("503"))
			}
			return nil
		}}
		log.err = func(int) error {
			pushedBeforeCommit = append(pushedBeforeCommit, len(sink.sizes()))
			return nil
		}
		es := append(entries("a", 0, 3), ports.Entry{CheckpointOnly: true, Checkpoint: ports.Checkpoint{Key: "b", Value: "token-7"}})
		es = append(es, entries("c", 10, 2)...)
		p := newPipeline(t, sink, clk, smallLane)
		var err error
		call(t, clk, func() { err = p.Run(t.Context(), t.Context(), log, noResume, []ports.Source{&listSource{entries: es}}) })
		if err != nil {
			t.Fatal(err)
		}
		commits := log.all()
		if len(commits) != 1 || fmt.Sprint(commits[0]) != "map[a:000002 b:token-7 c:000011]" {
			t.Fatalf("commits %v, want one commit of the last value per key", commits)
		}
		if fmt.Sprint(pushedBeforeCommit) != "[1]" || fmt.Sprint(sink.sizes()) != "[5]" {
			t.Fatalf("pushed batches %v before the commit; want the retried batch of 5 lines (the token is not pushed)", sink.sizes())
		}
		// A batch of tokens only commits without a push.
		sink2, log2 := &recordingSink{}, &commitLog{}
		p = newPipeline(t, sink2, clk, smallLane)
		call(t, clk, func() {
			_ = p.Run(t.Context(), t.Context(), log2, noResume, []ports.Source{&listSource{entries: []ports.Entry{
				{CheckpointOnly: true, Checkpoint: ports.Checkpoint{Key: "b", Value: "t1"}}}}})
		})
		if len(sink2.sizes()) != 0 || len(log2.all()) != 1 {
			t.Fatalf("token-only batch: pushes %v, commits %v", sink2.sizes(), log2.all())
		}
	})
}

// The monotonic guard (sfl-0002): once a key's batch is abandoned, no later
// commit for that key may leapfrog it in this run, not even a token's.
func TestPipelineAbandonedBatchIsNeverLeapfrogged(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		lane := smallLane
		lane.BatchEntries = 2
		sink := &recordingSink{fail: func(_ int, batch []ports.Entry) error {
			if batch[0].Checkpoint.Key == "a" {
				return ports.Transient("push", errors.New("503"))
			}
			return nil
		}}
		log := &commitLog{}
		es := append(entries("a", 0, 2), ports.Entry{CheckpointOnly: true, Checkpoint: ports.Checkpoint{Key: "a", Value: "999999"}},
			ports.Entry{CheckpointOnly: true, Checkpoint: ports.Checkpoint{Key: "z", Value: "1"}})
		p := newPipeline(t, sink, clk, lane)
		ctx, stop := context.WithCancel(t.Context())
		drain, endDrain := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = p.Run(ctx, drain, log, noResume, []ports.Source{&listSource{entries: es, wait: true}})
		}()
		advance(t, clk, 10*time.Second) // the batch for a keeps failing
		stop()
		advance(t, clk, 10*time.Second)
		endDrain() // the grace is over: the batch is abandoned
		settle(t, clk, time.Hour, closed(done))
		for _, c := range log.all() {
			if _, ok := c["a"]; ok {
				t.Fatalf("key a committed after its batch was abandoned: %v", log.all())
			}
		}
		if len(log.all()) != 0 {
			t.Fatalf("commits %v, want none: z's batch follows a's, which was abandoned when the drain ended", log.all())
		}
	})
}

func TestPipelineStopsOnFenceDuringDrain(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		lane := smallLane
		lane.BatchEntries = 5
		attempts := 0
		log := &commitLog{err: func(n int) error {
			attempts++
			if n >= 2 {
				return fmt.Errorf("commit: %w", domain.ErrFenced)
			}
			return nil
		}}
		// Each batch waits at the sink, so each is committed on its own.
		sink := &recordingSink{gate: make(chan struct{})}
		p := newPipeline(t, sink, clk, lane)
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			err = p.Run(t.Context(), t.Context(), log, noResume, []ports.Source{&listSource{entries: entries("k", 0, 30)}})
		}()
		for range 2 {
			sink.gate <- struct{}{}
			waitIdle()
		}
		go func() {
			for {
				select {
				case sink.gate <- struct{}{}:
				case <-done:
					return
				}
			}
		}()
		settle(t, clk, time.Hour, closed(done))
		if !errors.Is(err, domain.ErrFenced) || len(log.all()) != 1 || attempts != 2 {
			t.Fatalf("got %v after %d commits (%d attempts); want ErrFenced at the second, not retried", err, len(log.all()), attempts)
		}
		if n := len(sink.sizes()); n > 3 {
			t.Fatalf("%d batches pushed after the fence, want at most the one in the air", n-2)
		}
	})
}

func TestPipelineSourceFailureAndFatalSink(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		p := newPipeline(t, &recordingSink{fail: func(int, []ports.Entry) error { return errors.New("401 forever") }}, clk, smallLane)
		var err error
		call(t, clk, func() {
			err = p.Run(t.Context(), t.Context(), &commitLog{}, noResume, []ports.Source{&listSource{entries: entries("k", 0, 50)}})
		})
		if err == nil || ports.IsTransient(err) || !strings.Contains(err.Error(), "401 forever") {
			t.Fatalf("a non-transient sink error: got %v, want it returned", err)
		}
	})
}

// BenchmarkPipeline measures entries per second through both lanes with a
// no-op sink and committer.
func BenchmarkPipeline(b *testing.B) {
	sink := &nopSink{}
	p, err := domain.NewPipeline(sink, porttest.NewFakeClock(t0), domain.PipelineConfig{})
	if err != nil {
		b.Fatal(err)
	}
	e := ports.Entry{Time: t0, Line: `{"EventType":"LoginEvent","UserId":"005xx0000012345","SourceIp":"203.0.113.7","Status":"Success"}`,
		Labels: map[string]string{"source": "pubsub", "event_type": "LoginEvent"}, Checkpoint: ports.Checkpoint{Key: "pubsub:/event/LoginEventStream", Value: "AAAAAAAB"}}
	src := &repeatSource{e: e, n: b.N}
	b.ReportAllocs()
	b.ResetTimer()
	if err := p.Run(context.Background(), context.Background(), nopCommits{}, noResume, []ports.Source{src}); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "entries/s")
}

type nopSink struct{}

func (*nopSink) Push(context.Context, []ports.Entry) error { return nil }

type nopCommits struct{}

func (nopCommits) CommitMany(context.Context, map[string]string) error { return nil }

type repeatSource struct {
	e ports.Entry
	n int
}

func (*repeatSource) Name() string     { return "repeat" }
func (*repeatSource) Lane() ports.Lane { return ports.LaneRealtime }
func (s *repeatSource) Run(_ context.Context, _ func(string) (string, bool), emit func(ports.Entry) error) error {
	for range s.n {
		if err := emit(s.e); err != nil {
			return err
		}
	}
	return nil
}

// Graceful drain: after the stop, queued entries are pushed and committed
// while the fence holds; once it closes mid-drain, nothing more is
// committed and the error surfaces.
func TestPipelineDrainStopsCommittingWhenTheFenceCloses(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		lane := smallLane
		lane.BatchEntries = 5
		var mu sync.Mutex
		fenced := false
		log := &commitLog{err: func(int) error {
			mu.Lock()
			defer mu.Unlock()
			if fenced {
				return fmt.Errorf("commit: %w", domain.ErrFenced)
			}
			return nil
		}}
		sink := &recordingSink{gate: make(chan struct{})}
		p := newPipeline(t, sink, clk, lane)
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- p.Run(ctx, t.Context(), log, noResume, []ports.Source{&listSource{entries: entries("k", 0, 20), wait: true}})
		}()
		waitIdle()
		stop() // graceful stop with 20 entries queued or in flight
		sink.gate <- struct{}{}
		waitIdle() // first batch pushed and committed during the drain
		mu.Lock()
		fenced = true // the fence closes mid-drain
		mu.Unlock()
		close(sink.gate)
		settle(t, clk, time.Hour, func() bool { return len(done) == 1 })
		if err := <-done; !errors.Is(err, domain.ErrFenced) {
			t.Fatalf("Run: %v, want ErrFenced", err)
		}
		if c := log.all(); len(c) != 1 || c[0]["k"] != "000004" {
			t.Fatalf("commits %v, want exactly the first batch's, made while the fence held", c)
		}
	})
}

// endlessSource emits entries for key until ctx ends, like a live source.
type endlessSource struct {
	key string
	clk ports.Clock
}

func (*endlessSource) Name() string     { return "endless" }
func (*endlessSource) Lane() ports.Lane { return ports.LaneBulk }
func (s *endlessSource) Run(ctx context.Context, _ func(string) (string, bool), emit func(ports.Entry) error) error {
	for i := 0; ; i++ {
		if err := emit(entries(s.key, i, 1)[0]); err != nil {
			return err
		}
		select {
		case <-s.clk.After(10 * time.Millisecond):
		case <-ctx.Done():
			return nil
		}
	}
}

// A checkpoint conflict while the leader's sources keep producing must end
// Run with the conflict (so the daemon reloads and resumes) instead of
// draining the lane forever: the consumer that hit the conflict stops the
// sources itself rather than waiting for a lane that only closes once they
// stop.
func TestPipelineConflictStopsLiveSourcesAndReturns(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		lane := smallLane
		lane.BatchEntries = 5
		log := &commitLog{err: func(n int) error {
			if n == 2 {
				return &domain.ConflictError{Object: "mem://state", Op: "commit", Err: ports.ErrPreconditionFailed}
			}
			return nil
		}}
		sink := &recordingSink{}
		p := newPipeline(t, sink, clk, lane)
		done := make(chan error, 1)
		go func() {
			done <- p.Run(t.Context(), t.Context(), log, noResume, []ports.Source{&endlessSource{key: "k", clk: clk}})
		}()
		settle(t, clk, time.Minute, func() bool { return len(done) == 1 })
		if err := <-done; !errors.Is(err, domain.ErrConflict) {
			t.Fatalf("Run: %v, want the conflict", err)
		}
		if c := log.all(); len(c) != 1 {
			t.Fatalf("commits %v, want only the one before the conflict", c)
		}
	})
}

// The liveness guard: entries waiting while nothing is pushed or committed
// for the stall timeout end Run with ErrStalled and commit nothing; an idle
// pipeline, or a slow one that keeps making progress, is not stalled.
func TestPipelineStallGuard(t *testing.T) {
	run := func(t *testing.T, clk *porttest.FakeClock, sink ports.Sink, src ports.Source, limit time.Duration) (*commitLog, error) {
		t.Helper()
		p, err := domain.NewPipeline(sink, clk, domain.PipelineConfig{Realtime: smallLane, Bulk: smallLane, StallTimeout: time.Minute,
			Jitter: func() float64 { return 0.5 }})
		if err != nil {
			t.Fatal(err)
		}
		log := &commitLog{}
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- p.Run(ctx, ctx, log, noResume, []ports.Source{src}) }()
		settle(t, clk, limit, func() bool { return len(done) == 1 || clk.Now().Sub(t0) >= limit-time.Second })
		stop()
		settle(t, clk, time.Hour, func() bool { return len(done) == 1 })
		return log, <-done
	}
	t.Run("a sink refusing every push", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			sink := &recordingSink{fail: func(int, []ports.Entry) error { return ports.Transient("push", errors.New("503")) }}
			log, err := run(t, clk, sink, &endlessSource{key: "k", clk: clk}, 10*time.Minute)
			var stalled *domain.StalledError
			if !errors.As(err, &stalled) || !errors.Is(err, domain.ErrStalled) || stalled.Pending == 0 {
				t.Fatalf("Run: %v, want a StalledError", err)
			}
			if clk.Now().Sub(t0) > 2*time.Minute {
				t.Fatalf("stall noticed after %s, want about the stall timeout (1m)", clk.Now().Sub(t0))
			}
			if c := log.all(); len(c) != 0 {
				t.Fatalf("commits %v while nothing was pushed", c)
			}
		})
	})
	t.Run("an idle pipeline", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			_, err := run(t, clk, &recordingSink{}, &listSource{wait: true}, 10*time.Minute)
			if err != nil {
				t.Fatalf("Run: %v, want nil", err)
			}
		})
	})
	t.Run("a slow sink that keeps accepting", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			sink := &recordingSink{fail: func(call int, _ []ports.Entry) error {
				if call%3 != 0 {
					return ports.Transient("push", errors.New("429"))
				}
				return nil
			}}
			log, err := run(t, clk, sink, &endlessSource{key: "k", clk: clk}, 10*time.Minute)
			if err != nil || len(log.all()) == 0 {
				t.Fatalf("Run: %v with %d commits, want no stall and commits", err, len(log.all()))
			}
		})
	})
}

// A conflict in one lane returns Run promptly even while the other lane's
// push is stuck retrying a refusing sink: that push is abandoned
// uncommitted, and the reload replays it.
func TestPipelineConflictAbandonsTheOtherLanesPush(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		lane := smallLane
		lane.BatchEntries = 5
		log := &commitLog{err: func(int) error {
			return &domain.ConflictError{Object: "mem://state", Op: "commit", Err: ports.ErrPreconditionFailed}
		}}
		sink := &recordingSink{fail: func(_ int, b []ports.Entry) error {
			if b[0].Checkpoint.Key == "stuck" {
				return ports.Transient("push", errors.New("503"))
			}
			return nil
		}}
		p := newPipeline(t, sink, clk, lane)
		stuck := &listSource{lane: ports.LaneRealtime, entries: entries("stuck", 0, 5), wait: true}
		live := &endlessSource{key: "k", clk: clk}
		done := make(chan error, 1)
		go func() { done <- p.Run(t.Context(), t.Context(), log, noResume, []ports.Source{stuck, live}) }()
		settle(t, clk, time.Minute, func() bool { return len(done) == 1 })
		if err := <-done; !errors.Is(err, domain.ErrConflict) {
			t.Fatalf("Run: %v, want the conflict", err)
		}
	})
}

// A lane too large to allocate is refused at construction, so `check`,
// which builds the pipeline, refuses it instead of `run` panicking.
func TestNewPipelineRefusesAnUnallocatableLane(t *testing.T) {
	lane := smallLane
	lane.QueueEntries = 1 << 62
	_, err := domain.NewPipeline(&nopSink{}, porttest.NewFakeClock(t0), domain.PipelineConfig{Realtime: lane})
	if !errors.Is(err, domain.ErrInvalidConfig) {
		t.Fatalf("got %v, want ErrInvalidConfig", err)
	}
}
