package domain_test

import (
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// Produced sees each entry a source queued, with the source's name, and
// not the checkpoint-only ones; Held counts what a lane holds, batches in
// the air included, and 0 once the run is over.
func TestPipelineProducedAndHeld(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		sink := &recordingSink{gate: make(chan struct{})}
		var (
			mu   sync.Mutex
			seen = map[string]int{}
		)
		cfg := domain.PipelineConfig{Realtime: smallLane, Bulk: smallLane, RetryMin: time.Second, RetryMax: 4 * time.Second,
			Jitter: func() float64 { return 0.5 },
			Produced: func(source string) func(ports.Entry) {
				return func(e ports.Entry) {
					mu.Lock()
					defer mu.Unlock()
					seen[source+"/"+e.Labels["source"]]++
				}
			}}
		p, err := domain.NewPipeline(sink, clk, cfg)
		if err != nil {
			t.Fatal(err)
		}
		all := append(entries("k", 0, 25), ports.Entry{CheckpointOnly: true, Checkpoint: ports.Checkpoint{Key: "k", Value: "999999"}})
		src := &listSource{lane: ports.LaneBulk, entries: all}
		if n, b := p.Held(ports.LaneBulk); n != 0 || b != 0 {
			t.Fatalf("before Run the bulk lane holds %d entries, %d bytes", n, b)
		}
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = p.Run(t.Context(), t.Context(), &commitLog{}, noResume, []ports.Source{src})
		}()
		waitIdle()
		// The first batch waits at the sink; everything else is queued.
		n, b := p.Held(ports.LaneBulk)
		if n != 26 || b <= 0 {
			t.Fatalf("with the sink stalled the bulk lane holds %d entries, %d bytes; want 26 and some bytes", n, b)
		}
		if rn, rb := p.Held(ports.LaneRealtime); rn != 0 || rb != 0 {
			t.Fatalf("the idle realtime lane holds %d entries, %d bytes", rn, rb)
		}
		close(sink.gate)
		settle(t, clk, time.Hour, closed(done))
		if n, b := p.Held(ports.LaneBulk); n != 0 || b != 0 {
			t.Fatalf("after Run the bulk lane holds %d entries, %d bytes", n, b)
		}
		mu.Lock()
		defer mu.Unlock()
		if len(seen) != 1 || seen["list/test"] != 25 {
			t.Fatalf("Produced saw %v, want list/test: 25 (the checkpoint-only entry aside)", seen)
		}
	})
}
