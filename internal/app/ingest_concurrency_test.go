package app

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// typesSource emits one event type per goroutine through the one
// emit it was given, as the EventLogFile source does (a goroutine per
// event type, up to sources.eventlogfile.concurrency = 4 at once) and the
// Pub/Sub source (a goroutine per topic).
type typesSource struct{ types, each int }

func (typesSource) Name() string     { return "eventlogfile" }
func (typesSource) Lane() ports.Lane { return ports.LaneBulk }
func (s typesSource) Run(_ context.Context, _ func(string) (string, bool), emit func(ports.Entry) error) error {
	var wg sync.WaitGroup
	for g := range s.types {
		wg.Go(func() {
			labels := map[string]string{"source": "eventlogfile", "event_type": fmt.Sprintf("Type%d", g)}
			for i := range s.each {
				if err := emit(ports.Entry{Time: time.Unix(int64(i), 0), Line: "x", Labels: labels}); err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	return nil
}

// sf2loki_entries_ingested counts each event type's entries exactly when
// the source emits its types from several goroutines, as the real
// EventLogFile and Pub/Sub sources do (an unsynchronized cache of the last
// series in the per-source function raced and miscounted).
func TestEntriesIngestedCounterWithConcurrentEmits(t *testing.T) {
	const types, each = 4, 100000
	tel, h := newTestTelemetry(t)
	produced := tel.IngestCounter("", nil)
	lane := domain.LaneConfig{QueueEntries: 1000, BatchEntries: 500, BatchBytes: 1 << 20, BatchWait: time.Millisecond}
	p, err := domain.NewPipeline(acceptAll{}, clock.New(), domain.PipelineConfig{Realtime: lane, Bulk: lane, Produced: produced})
	if err != nil {
		t.Fatal(err)
	}
	const runs = 5 // a leader runs the pipeline again at each term
	for range runs {
		if err := p.Run(t.Context(), t.Context(), discardCommits{}, func(string) (string, bool) { return "", false },
			[]ports.Source{typesSource{types: types, each: each}}); err != nil {
			t.Fatal(err)
		}
	}
	_, body := get(t, h, "/metrics")
	for g := range types {
		et := fmt.Sprintf("Type%d", g)
		if v, _ := sample(body, "sf2loki_entries_ingested_total", "source", "eventlogfile", "event_type", et); v != runs*each {
			t.Errorf("%s: %v entries counted, want %d:\n%s", et, v, runs*each, grepLines(body, "ingested"))
		}
	}
}
