package domain_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// tokenSource emits only checkpoint-only entries (a Pub/Sub topic whose
// events are all undecodable or filtered out, an ELF backlog of files
// without rows), one every period, until ctx ends.
type tokenSource struct {
	clk    ports.Clock
	period time.Duration
}

func (*tokenSource) Name() string     { return "tokens" }
func (*tokenSource) Lane() ports.Lane { return ports.LaneRealtime }
func (s *tokenSource) Run(ctx context.Context, _ func(string) (string, bool), emit func(ports.Entry) error) error {
	for i := 1; ; i++ {
		if err := emit(ports.Entry{CheckpointOnly: true, Checkpoint: ports.Checkpoint{Key: "topic", Value: fmt.Sprintf("%06d", i)}}); err != nil {
			return nil
		}
		select {
		case <-s.clk.After(s.period):
		case <-ctx.Done():
			return nil
		}
	}
}

// A lane carrying only checkpoint-only entries makes progress: every batch
// is released and committed at once. (The first pipelined flights counted
// only a push as a lane's progress, so a steady flow of tokens, pending at
// every watcher tick and never pushed, was reported as a stall and the
// leader resigned while the pipeline worked.)
func TestPipelineCheckpointOnlyTrafficIsNotAStall(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		p, err := domain.NewPipeline(&recordingSink{}, clk, domain.PipelineConfig{Realtime: smallLane, Bulk: smallLane,
			Jitter: func() float64 { return 0.5 }, StallTimeout: time.Minute, MaxInFlight: 4})
		if err != nil {
			t.Fatal(err)
		}
		log := &commitLog{}
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- p.Run(ctx, ctx, log, noResume, []ports.Source{&tokenSource{clk: clk, period: 70 * time.Millisecond}})
		}()
		settle(t, clk, 10*time.Minute, func() bool { return len(done) == 1 || clk.Now().Sub(t0) >= 5*time.Minute })
		stop()
		settle(t, clk, time.Hour, func() bool { return len(done) == 1 })
		if err := <-done; err != nil {
			t.Fatalf("Run: %v after %s with %d commits; want no stall: every token batch was committed", err, clk.Now().Sub(t0), len(log.all()))
		}
	})
}

// A batch's oldest line decides how far a later batch may overtake it,
// whatever Time its lines carry (a zero one in the middle once reset the
// running minimum, so a batch 50 minutes newer than its first line
// overtook it under a 30 minute window, and Loki would have refused the
// first line as too far behind).
func TestPipelineReorderWindowWithAZeroTimeInABatch(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		sink := newLedger(t, clk)
		sink.latency = func() time.Duration { return time.Second }
		lane := smallLane
		lane.BatchEntries = 3
		e := func(i int, at time.Time) ports.Entry {
			return ports.Entry{Time: at, Line: fmt.Sprintf("a %d", i), Checkpoint: ports.Checkpoint{Key: "a", Value: fmt.Sprintf("%06d", i)}}
		}
		es := []ports.Entry{
			e(1, t0), e(2, time.Time{}), e(3, t0.Add(40*time.Minute)), // oldest line t0
			e(4, t0.Add(45*time.Minute)), e(5, t0.Add(48*time.Minute)), e(6, t0.Add(50*time.Minute)), // 50m newer than t0
		}
		p := flightPipeline(t, sink, clk, lane, 4, 30*time.Minute, 0)
		call(t, clk, func() {
			_ = p.Run(t.Context(), t.Context(), sink, noResume, []ports.Source{&listSource{entries: es}})
		})
		if sink.maxInAir != 1 {
			t.Fatalf("%d pushes in the air: the second batch (newest t0+50m) overtook the first (oldest t0) under a 30m window", sink.maxInAir)
		}
	})
}

// tokenCountSource is countSource with checkpoint-only entries: after a
// key's line i it sometimes emits a token carrying i again (the ledger then
// requires lines 1..i accepted before the token's commit).
type tokenCountSource struct {
	keys  []string
	n     int
	token func() bool
	step  time.Duration
	mu    sync.Mutex
	last  map[string]int
}

func (*tokenCountSource) Name() string     { return "tokencount" }
func (*tokenCountSource) Lane() ports.Lane { return ports.LaneBulk }
func (s *tokenCountSource) Run(ctx context.Context, _ func(string) (string, bool), emit func(ports.Entry) error) error {
	for i := 1; i <= s.n; i++ {
		for _, k := range s.keys {
			v := fmt.Sprintf("%06d", i)
			if err := emit(ports.Entry{Time: t0.Add(time.Duration(i) * s.step), Line: fmt.Sprintf("%s %d", k, i),
				Checkpoint: ports.Checkpoint{Key: k, Value: v}}); err != nil {
				return err
			}
			s.mu.Lock()
			if s.last == nil {
				s.last = map[string]int{}
			}
			s.last[k] = i
			s.mu.Unlock()
			if s.token() {
				if err := emit(ports.Entry{CheckpointOnly: true, Checkpoint: ports.Checkpoint{Key: k, Value: v}}); err != nil {
					return err
				}
			}
		}
	}
	<-ctx.Done()
	return nil
}

// advSink accepts some pushes even after their context ended (the request
// reached Loki before the cancel).
type advSink struct {
	*ledger
	ignoreCtx func() bool
}

func (s *advSink) Push(ctx context.Context, b []ports.Entry) error {
	if s.ignoreCtx() {
		ctx = context.Background()
	}
	return s.ledger.Push(ctx, b)
}

// advCommits fails commits transiently at random, and fatally (fenced)
// from some point on.
type advCommits struct {
	*ledger
	fail func() error
}

func (c *advCommits) CommitMany(ctx context.Context, kv map[string]string) error {
	if err := c.fail(); err != nil {
		return err
	}
	return c.ledger.CommitMany(ctx, kv)
}

// An adversarial property test: fatal push errors with pushes in flight,
// pushes accepted after the abandon, tokens after lines, transient and
// fatal commit errors, the stall guard, short drains and crashes. Every
// commit is checked by the ledger, and Run must return.
func TestPipelineFlightAdversarialProperty(t *testing.T) {
	seeds := 3000
	if testing.Short() {
		seeds = 300
	}
	for seed := range seeds {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			intn := seeded(uint64(seed), 11)
			lane := domain.LaneConfig{QueueEntries: 1 + intn(40), QueueBytes: int64([]int{0, 300, 5000}[intn(3)]), BatchEntries: 1 + intn(8),
				BatchBytes: 1 << 20, BatchWait: time.Duration(1+intn(1000)) * time.Millisecond}
			inFlight := 1 + intn(6)
			window := []time.Duration{0, time.Millisecond * 5, time.Hour}[intn(3)]
			interval := []time.Duration{0, time.Second, 5 * time.Second}[intn(3)]
			stall := []time.Duration{0, 30 * time.Second}[intn(2)]
			sink := newLedger(t, clk)
			sink.latency = func() time.Duration { return time.Duration(intn(400)) * time.Millisecond }
			mode := intn(4) // 0: transient refusals, 1: a fatal refusal, 2: fatal commit, 3: clean
			fatalAt := 1 + intn(30)
			var pushes int
			var newest time.Time // the newest line Loki holds (one stream)
			sink.refuse = func(b []ports.Entry) error {
				pushes++ // under sink.mu
				switch {
				case mode == 0 && intn(4) == 0:
					return ports.Transient("push", errors.New("503"))
				case mode == 1 && pushes == fatalAt:
					return errors.New("400 fatal")
				}
				for _, e := range b {
					if newest.Sub(e.Time) > window {
						t.Errorf("line %q at %s accepted after a line at %s: Loki refuses it as too far behind (window %s)", e.Line, e.Time.Sub(t0), newest.Sub(t0), window)
					}
				}
				for _, e := range b {
					if e.Time.After(newest) {
						newest = e.Time
					}
				}
				return nil
			}
			var cmu sync.Mutex
			commitCalls := 0
			commits := &advCommits{ledger: sink, fail: func() error {
				cmu.Lock()
				defer cmu.Unlock()
				commitCalls++
				if mode == 2 && commitCalls >= 3 {
					return fmt.Errorf("commit: %w", domain.ErrFenced)
				}
				if intn(5) == 0 {
					return errors.New("503 slow down")
				}
				return nil
			}}
			keys := []string{"a", "b", "c"}[:1+intn(3)]
			src := &tokenCountSource{keys: keys, n: 20 + intn(150), token: func() bool { return intn(6) == 0 },
				step: []time.Duration{time.Millisecond, time.Second, time.Minute}[intn(3)]}
			p, err := domain.NewPipeline(&advSink{ledger: sink, ignoreCtx: func() bool { return intn(2) == 0 }}, clk, domain.PipelineConfig{
				Realtime: lane, Bulk: lane, RetryMin: time.Second, RetryMax: 4 * time.Second, Jitter: func() float64 { return 0.5 },
				MaxInFlight: inFlight, ReorderWindow: window, CommitInterval: interval, StallTimeout: stall})
			if err != nil {
				t.Fatal(err)
			}
			end := intn(3)
			runErr := runWithEnd(t, clk, intn, end, func(ctx, drain context.Context) error {
				return p.Run(ctx, drain, commits, noResume, []ports.Source{src})
			})
			desc := fmt.Sprintf("seed %d: lane %+v, %d in flight, window %s, interval %s, stall %s, mode %d, end %d: %v",
				seed, lane, inFlight, window, interval, stall, mode, end, runErr)
			if mode == 3 && end == 0 && runErr == nil {
				last := sink.last()
				for _, k := range keys {
					src.mu.Lock()
					want := fmt.Sprintf("%06d", src.last[k])
					src.mu.Unlock()
					if last[k] != want {
						t.Fatalf("%s: %s committed at %q after a full drain, want %s", desc, k, last[k], want)
					}
				}
			}
			if mode == 3 && runErr != nil {
				t.Fatalf("%s: unexpected error", desc)
			}
			if t.Failed() {
				t.Fatal(desc)
			}
		})
	}
}
