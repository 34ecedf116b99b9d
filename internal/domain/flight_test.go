package domain_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// countSource emits, for each key, entries numbered from just after its
// resumed position up to n, the keys interleaved, then waits for ctx.
type countSource struct {
	keys []string
	n    int
	at   func(i int) time.Time

	mu      sync.Mutex
	emitted map[string]int // the last value emitted per key
}

func (s *countSource) last(k string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return fmt.Sprintf("%06d", s.emitted[k])
}

func (*countSource) Name() string     { return "count" }
func (*countSource) Lane() ports.Lane { return ports.LaneBulk }
func (s *countSource) Run(ctx context.Context, resume func(string) (string, bool), emit func(ports.Entry) error) error {
	next := map[string]int{}
	for _, k := range s.keys {
		next[k] = 1
		if v, ok := resume(k); ok {
			var n int
			_, _ = fmt.Sscanf(v, "%d", &n)
			next[k] = n + 1
		}
	}
	for i := 1; i <= s.n; i++ {
		for _, k := range s.keys {
			if i < next[k] {
				continue
			}
			at := t0.Add(time.Duration(i) * time.Millisecond)
			if s.at != nil {
				at = s.at(i)
			}
			if err := emit(ports.Entry{Time: at, Line: fmt.Sprintf("%s %d", k, i), Labels: map[string]string{"source": "count"},
				Checkpoint: ports.Checkpoint{Key: k, Value: fmt.Sprintf("%06d", i)}}); err != nil {
				return err
			}
			s.mu.Lock()
			if s.emitted == nil {
				s.emitted = map[string]int{}
			}
			s.emitted[k] = i
			s.mu.Unlock()
		}
	}
	<-ctx.Done()
	return nil
}

// ledger is a sink and a checkpoint writer that check the commit rule: a
// key's value is committed only once every line of the key up to it was
// accepted. Pushes take latency() on the clock and fail when refuse says so.
type ledger struct {
	t        *testing.T
	clk      ports.Clock
	mu       sync.Mutex
	accepted map[string]map[int]bool
	commits  []map[string]string
	inAir    int
	maxInAir int
	latency  func() time.Duration
	refuse   func(batch []ports.Entry) error
}

func newLedger(t *testing.T, clk ports.Clock) *ledger {
	return &ledger{t: t, clk: clk, accepted: map[string]map[int]bool{}}
}

func (l *ledger) Push(ctx context.Context, batch []ports.Entry) error {
	l.mu.Lock()
	l.inAir++
	l.maxInAir = max(l.maxInAir, l.inAir)
	var d time.Duration
	if l.latency != nil {
		d = l.latency()
	}
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		l.inAir--
		l.mu.Unlock()
	}()
	select {
	case <-l.clk.After(d):
	case <-ctx.Done():
		return ports.Transient("push", ctx.Err())
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.refuse != nil {
		if err := l.refuse(batch); err != nil {
			return err
		}
	}
	for _, e := range batch {
		var n int
		_, _ = fmt.Sscanf(e.Checkpoint.Value, "%d", &n)
		if l.accepted[e.Checkpoint.Key] == nil {
			l.accepted[e.Checkpoint.Key] = map[int]bool{}
		}
		l.accepted[e.Checkpoint.Key][n] = true
	}
	return nil
}

func (l *ledger) CommitMany(_ context.Context, kv map[string]string) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, v := range kv {
		var n int
		_, _ = fmt.Sscanf(v, "%d", &n)
		for i := 1; i <= n; i++ {
			if !l.accepted[k][i] {
				l.t.Errorf("%s committed at %d before its line %d was accepted", k, n, i)
				break
			}
		}
		for _, c := range l.commits {
			if prev, ok := c[k]; ok && prev > v {
				l.t.Errorf("%s moved back from %s to %s", k, prev, v)
			}
		}
	}
	l.commits = append(l.commits, maps.Clone(kv))
	return nil
}

// last is the last committed value per key.
func (l *ledger) last() map[string]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]string{}
	for _, c := range l.commits {
		maps.Copy(out, c)
	}
	return out
}

func flightPipeline(t *testing.T, sink ports.Sink, clk ports.Clock, lane domain.LaneConfig, inFlight int, window, interval time.Duration) *domain.Pipeline {
	t.Helper()
	p, err := domain.NewPipeline(sink, clk, domain.PipelineConfig{Realtime: lane, Bulk: lane, RetryMin: time.Second, RetryMax: 4 * time.Second,
		Jitter: func() float64 { return 0.5 }, MaxInFlight: inFlight, ReorderWindow: window, CommitInterval: interval})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// With a commit interval, a fast source's batches are committed together:
// at most one write per interval, the last one at the end of the drain
// holding the last value. A crash (no drain) leaves the position at the
// last commit; the next run resumes from it and re-sends what followed:
// nothing is skipped.
func TestPipelineCommitIntervalCoalescesAndACrashReplays(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		lane := smallLane
		sink := newLedger(t, clk)
		sink.latency = func() time.Duration { return 150 * time.Millisecond }
		src := &countSource{keys: []string{"a", "b"}, n: 500}
		p := flightPipeline(t, sink, clk, lane, 4, time.Hour, 5*time.Second)
		ctx, stop := context.WithCancel(t.Context())
		var err error
		call(t, clk, func() {
			go func() { <-clk.After(12 * time.Second); stop() }()
			err = p.Run(ctx, t.Context(), sink, noResume, []ports.Source{src})
		})
		if err != nil {
			t.Fatal(err)
		}
		// 100 batches of 150 ms, 4 at once, take about 4 s: a commit at the
		// first release, one 5 s later, perhaps one at the end.
		if n := len(sink.commits); n < 2 || n > 3 {
			t.Fatalf("%d commits in 12 s with a 5 s interval (100 batches pushed), want 2 or 3: %v", n, sink.commits)
		}
		if last := sink.last(); last["a"] != "000500" || last["b"] != "000500" {
			t.Fatalf("last commit %v, want both keys at 500 after the drain", last)
		}

		// A crash: the drain is over at once.
		crashed := newLedger(t, clk)
		crashed.latency = sink.latency
		p = flightPipeline(t, crashed, clk, lane, 4, time.Hour, 5*time.Second)
		ctx, stop = context.WithCancel(t.Context())
		dead, kill := context.WithCancel(t.Context())
		call(t, clk, func() {
			go func() { <-clk.After(7 * time.Second); stop(); kill() }()
			_ = p.Run(ctx, dead, crashed, noResume, []ports.Source{&countSource{keys: []string{"a"}, n: 3000}})
		})
		pos := crashed.last()["a"]
		pushed := len(crashed.accepted["a"])
		if pos == "" || pos >= fmt.Sprintf("%06d", pushed) {
			t.Fatalf("after a crash the position is %q with %d lines accepted: want a commit behind the last push", pos, pushed)
		}
		again := newLedger(t, clk)
		again.accepted = crashed.accepted // the lines sent before the crash are in the sink
		p = flightPipeline(t, again, clk, lane, 4, time.Hour, 5*time.Second)
		ctx, stop = context.WithCancel(t.Context())
		call(t, clk, func() {
			go func() { <-clk.After(20 * time.Second); stop() }()
			_ = p.Run(ctx, t.Context(), again, func(k string) (string, bool) { return pos, k == "a" }, []ports.Source{&countSource{keys: []string{"a"}, n: 3000}})
		})
		if again.last()["a"] != "003000" {
			t.Fatalf("the run after the crash ended at %v, want 3000 (every line accepted: the ledger checks the commits)", again.last())
		}
	})
}

// Several pushes in flight and one in the middle refused for a while: no
// key moves past it until it is accepted, the pushes after it go on (up to
// the in-flight bound), and then everything is committed.
func TestPipelineInFlightKeepsPerKeyOrderPastARefusedBatch(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		lane := smallLane
		sink := newLedger(t, clk)
		sink.latency = func() time.Duration { return 100 * time.Millisecond }
		until := t0.Add(30 * time.Second)
		sink.refuse = func(batch []ports.Entry) error {
			if batch[0].Line == "a 21" && clk.Now().Before(until) { // the third batch
				return ports.Transient("push", errors.New("503"))
			}
			return nil
		}
		src := &countSource{keys: []string{"a"}, n: 100}
		p := flightPipeline(t, sink, clk, lane, 4, time.Hour, 0)
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan struct{})
		var err error
		go func() {
			defer close(done)
			err = p.Run(ctx, t.Context(), sink, noResume, []ports.Source{src})
		}()
		settle(t, clk, 25*time.Second, func() bool { return !clk.Now().Before(t0.Add(20 * time.Second)) })
		if last := sink.last()["a"]; last != "000020" {
			t.Fatalf("while the batch from 21 is refused, a is at %q; want 20", last)
		}
		if n := len(sink.accepted["a"]); n != 20+30 {
			t.Fatalf("%d lines accepted while the third batch is refused, want the 2 before it and the 3 after it (4 in flight)", n)
		}
		if sink.maxInAir != 4 {
			t.Fatalf("at most %d pushes in the air, want 4", sink.maxInAir)
		}
		stop()
		settle(t, clk, time.Hour, closed(done))
		if err != nil || sink.last()["a"] != "000100" {
			t.Fatalf("after the refusal: %v, a at %v", err, sink.last())
		}
	})
}

// A batch whose entries are newer than an earlier batch in the air by more
// than the reorder window waits for it to land (Loki would refuse the
// older one as too far behind); within the window it goes at once.
func TestPipelineReorderWindow(t *testing.T) {
	for _, tc := range []struct {
		window time.Duration
		want   int
	}{{time.Hour, 4}, {time.Minute, 1}} {
		t.Run(tc.window.String(), func(t *testing.T) {
			bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
				sink := newLedger(t, clk)
				sink.latency = func() time.Duration { return time.Second }
				// Ten lines of a batch span 10 s; the batches, 100 s.
				src := &countSource{keys: []string{"a"}, n: 100, at: func(i int) time.Time { return t0.Add(time.Duration(i) * 10 * time.Second) }}
				p := flightPipeline(t, sink, clk, smallLane, 4, tc.window, 0)
				ctx, stop := context.WithCancel(t.Context())
				call(t, clk, func() {
					go func() { <-clk.After(time.Minute); stop() }()
					_ = p.Run(ctx, t.Context(), sink, noResume, []ports.Source{src})
				})
				if sink.maxInAir != tc.want {
					t.Fatalf("at most %d pushes in the air with a %s window, want %d", sink.maxInAir, tc.window, tc.want)
				}
				if sink.last()["a"] != "000100" {
					t.Fatalf("a at %v", sink.last())
				}
			})
		})
	}
}

// seeded is a random IntN of seed and stream, safe for concurrent use.
func seeded(seed, stream uint64) func(int) int {
	rng := rand.New(rand.NewPCG(seed, stream))
	var mu sync.Mutex
	return func(n int) int {
		mu.Lock()
		defer mu.Unlock()
		return rng.IntN(n)
	}
}

// runWithEnd runs run(ctx, drain) in the bubble and ends it after a
// random while as end says: 0 stops the sources and lets the drain finish,
// 1 ends the drain a random while after the sources, 2 crashes (both at
// once). It returns run's error.
func runWithEnd(t *testing.T, clk *porttest.FakeClock, intn func(int) int, end int, run func(ctx, drain context.Context) error) error {
	ctx, stop := context.WithCancel(t.Context())
	drain, endDrain := context.WithCancel(t.Context())
	defer endDrain()
	var err error
	finished := make(chan struct{})
	call(t, clk, func() {
		go func() {
			select {
			case <-clk.After(time.Duration(1+intn(20)) * time.Second):
			case <-finished:
				return
			}
			if end == 2 {
				endDrain()
			}
			stop()
			if end == 1 {
				select {
				case <-clk.After(time.Duration(intn(3000)) * time.Millisecond):
					endDrain()
				case <-finished:
				}
			}
		}()
		err = run(ctx, drain)
		close(finished)
	})
	return err
}

// A property test over random lanes, latencies, refusals, in-flight bounds,
// reorder windows, commit intervals and ends (a full drain, a short one, a
// crash): the ledger checks every commit (no key committed past a line the
// sink did not accept; never backwards); a full drain commits every key's
// last value; commits come at most once per interval.
func TestPipelineFlightProperty(t *testing.T) {
	seeds := 2000
	if testing.Short() {
		seeds = 200
	}
	for seed := range seeds {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			intn := seeded(uint64(seed), 7)
			lane := domain.LaneConfig{QueueEntries: 1 + intn(50), BatchEntries: 1 + intn(12), BatchBytes: 1 << 20, BatchWait: time.Duration(1+intn(1000)) * time.Millisecond}
			inFlight := 1 + intn(6)
			window := []time.Duration{0, time.Second, time.Hour}[intn(3)]
			interval := []time.Duration{0, time.Second, 5 * time.Second}[intn(3)]
			sink := newLedger(t, clk)
			sink.latency = func() time.Duration { return time.Duration(intn(400)) * time.Millisecond }
			refusing := intn(4) == 0
			sink.refuse = func([]ports.Entry) error {
				if refusing && intn(5) == 0 {
					return ports.Transient("push", errors.New("503"))
				}
				return nil
			}
			keys := []string{"a", "b", "c"}[:1+intn(3)]
			n := 20 + intn(200)
			src := &countSource{keys: keys, n: n, at: func(i int) time.Time { return t0.Add(time.Duration(i*intn(3000)) * time.Millisecond) }}
			p := flightPipeline(t, sink, clk, lane, inFlight, window, interval)
			end := intn(3) // 0: a full drain, 1: a short drain, 2: a crash
			err := runWithEnd(t, clk, intn, end, func(ctx, drain context.Context) error {
				return p.Run(ctx, drain, sink, noResume, []ports.Source{src})
			})
			desc := fmt.Sprintf("seed %d: lane %+v, %d in flight, window %s, interval %s, refusing %v, end %d", seed, lane, inFlight, window, interval, refusing, end)
			if err != nil {
				t.Fatalf("%s: %v", desc, err)
			}
			if sink.maxInAir > inFlight {
				t.Fatalf("%s: %d pushes in the air", desc, sink.maxInAir)
			}
			if end == 0 {
				last := sink.last()
				for _, k := range keys {
					if want := src.last(k); last[k] != want {
						t.Fatalf("%s: %s committed at %q after a full drain, want %s", desc, k, last[k], want)
					}
				}
			}
			if interval > 0 {
				if limit := int(clk.Now().Sub(t0)/interval) + 2; len(sink.commits) > limit {
					t.Fatalf("%s: %d commits in %s", desc, len(sink.commits), clk.Now().Sub(t0))
				}
			}
			if t.Failed() {
				t.Fatal(desc)
			}
		})
	}
}

// A checkpoint store that fails every commit while the sink accepts:
// pushes go on, and the stall guard fires for the committer.
func TestPipelineStallGuardWatchesTheCommitter(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		sink := newLedger(t, clk)
		commits := &commitLog{err: func(int) error { return errors.New("503 slow down") }}
		p, err := domain.NewPipeline(sink, clk, domain.PipelineConfig{Realtime: smallLane, Bulk: smallLane, RetryMin: time.Second,
			RetryMax: 4 * time.Second, Jitter: func() float64 { return 0.5 }, StallTimeout: time.Minute, MaxInFlight: 2})
		if err != nil {
			t.Fatal(err)
		}
		call(t, clk, func() {
			err = p.Run(t.Context(), t.Context(), commits, noResume, []ports.Source{&countSource{keys: []string{"a"}, n: 50}})
		})
		var stalled *domain.StalledError
		if !errors.As(err, &stalled) || stalled.Lane != "checkpoint" || !strings.Contains(err.Error(), "check the state store") {
			t.Fatalf("got %v, want the committer's stall", err)
		}
		if len(sink.accepted["a"]) != 50 {
			t.Fatalf("%d of 50 lines pushed while the commits failed", len(sink.accepted["a"]))
		}
	})
}
