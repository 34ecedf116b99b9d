package domain

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// fanSource emits from several goroutines at once through the one
// emit the pipeline gave it, as the Pub/Sub source (a goroutine per
// topic), the SOQL source (per object) and the EventLogFile source (per
// event type, concurrency 4 by default) do. Each goroutine has its own
// labels map (as pubsub's position.entryMaps and elf's newELFEntries do)
// and alternates metadata maps by level.
type fanSource struct {
	lane       ports.Lane
	goroutines int
	each       int
	// started, if set, is called once the source runs (to catch the lanes).
	started func()
}

func (s *fanSource) Name() string     { return "fan" }
func (s *fanSource) Lane() ports.Lane { return s.lane }
func (s *fanSource) Run(_ context.Context, _ func(string) (string, bool), emit func(ports.Entry) error) error {
	if s.started != nil {
		s.started()
	}
	var wg sync.WaitGroup
	for g := range s.goroutines {
		wg.Go(func() {
			et := fmt.Sprintf("Type%d", g)
			labels := map[string]string{"source": "fan", "event_type": et + strings.Repeat("x", 40*g)}
			meta := []map[string]string{{"level": "info"}, {"level": "error" + strings.Repeat("e", 30*g)}}
			for i := range s.each {
				e := ports.Entry{Time: time.Unix(int64(i), 0), Line: "l", Labels: labels, Metadata: meta[i%2],
					Checkpoint: ports.Checkpoint{Key: et, Value: fmt.Sprint(i)}}
				if err := emit(e); err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return nil
}

type countingNopSink struct{ n atomic.Int64 }

func (s *countingNopSink) Push(_ context.Context, b []ports.Entry) error {
	s.n.Add(int64(len(b)))
	return nil
}

type nopCommits struct{}

func (nopCommits) CommitMany(context.Context, map[string]string) error { return nil }

// A source emits from several goroutines at once (Pub/Sub per topic, SOQL
// per object, EventLogFile per event type), each with its own maps: the
// bytes an entry is charged when queued are exactly the bytes released
// when it lands, so the lane's budget returns to 0. A cost memory shared
// unsafely between the goroutines made it drift (and raced).
func TestPipelineConcurrentEmitKeepsTheByteBudget(t *testing.T) {
	const goroutines, each = 4, 20000
	for round := range 3 {
		synctest.Test(t, func(t *testing.T) {
			clk := porttest.NewFakeClock(time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC))
			sink := &countingNopSink{}
			lc := LaneConfig{QueueEntries: 1000, QueueBytes: 0, BatchEntries: 500, BatchBytes: 1 << 20, BatchWait: time.Millisecond}
			p, err := NewPipeline(sink, clk, PipelineConfig{Realtime: lc, Bulk: lc})
			if err != nil {
				t.Fatal(err)
			}
			var lanes *[2]*lane
			src := &fanSource{lane: ports.LaneBulk, goroutines: goroutines, each: each, started: func() { lanes = p.lanes.Load() }}
			done := make(chan error, 1)
			go func() {
				done <- p.Run(t.Context(), t.Context(), nopCommits{}, func(string) (string, bool) { return "", false }, []ports.Source{src})
			}()
			for {
				synctest.Wait()
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
				default:
					clk.Advance(time.Millisecond)
					continue
				}
				break
			}
			if got := sink.n.Load(); got != goroutines*each {
				t.Fatalf("round %d: the sink got %d entries, want %d", round, got, goroutines*each)
			}
			l := lanes[ports.LaneBulk]
			l.bytes.mu.Lock()
			used := l.bytes.used
			l.bytes.mu.Unlock()
			if used != 0 || l.live.pending.Load() != 0 {
				t.Fatalf("round %d: after every entry landed the bulk lane's budget holds %d bytes (pending %d), want 0", round, used, l.live.pending.Load())
			}
		})
	}
}

// Producers whose contexts end at random while the consumer takes random
// amounts: every entry whose push succeeded is taken once, in its
// producer's order; no failed push is taken; the queue never holds more
// than max entries, nor its buffer more than max slots.
func TestQueueRandomCancelAndTake(t *testing.T) {
	for _, max := range []int{1, 3, 8, 100, 300} {
		t.Run(fmt.Sprint(max), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newQueue(max)
				const producers, each = 6, 400
				var (
					wg     sync.WaitGroup
					okMu   sync.Mutex
					pushed = make([][]int, producers)
				)
				for p := range producers {
					wg.Go(func() {
						r := rand.New(rand.NewPCG(uint64(p), 7))
						for i := range each {
							ctx, cancel := context.WithCancel(t.Context())
							if r.IntN(4) == 0 {
								n := r.IntN(3)
								go func() {
									for range n {
										runtime.Gosched()
									}
									cancel()
								}()
							}
							err := q.push(ctx, ports.Entry{Line: fmt.Sprint(p), Checkpoint: ports.Checkpoint{Value: fmt.Sprint(i)}}, 1)
							cancel()
							if err == nil {
								okMu.Lock()
								pushed[p] = append(pushed[p], i)
								okMu.Unlock()
							}
						}
					})
				}
				go func() { wg.Wait(); q.close() }()
				r := rand.New(rand.NewPCG(1, 2))
				got := make([][]int, producers)
				for q.wait() {
					for {
						batch, _, done := q.take(nil, 0, 1+r.IntN(5), 1<<30)
						for _, e := range batch {
							var p, i int
							if _, err := fmt.Sscan(e.Line, &p); err != nil {
								t.Fatal(err)
							}
							if _, err := fmt.Sscan(e.Checkpoint.Value, &i); err != nil {
								t.Fatal(err)
							}
							got[p] = append(got[p], i)
						}
						q.mu.Lock()
						if n := len(q.buf) - q.head; n > max {
							t.Fatalf("holds %d > %d", n, max)
						}
						if c := cap(q.buf); c > max {
							t.Fatalf("the buffer has %d slots > %d", c, max)
						}
						q.mu.Unlock()
						if done || len(batch) == 0 || r.IntN(3) == 0 {
							break
						}
					}
					for range r.IntN(2) {
						runtime.Gosched()
					}
				}
				for p := range producers {
					if fmt.Sprint(got[p]) != fmt.Sprint(pushed[p]) {
						t.Fatalf("producer %d: took %v\npushed %v", p, got[p], pushed[p])
					}
				}
			})
		})
	}
}
