package loki_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/loki"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// acceptAll answers every push 204 without a network.
type acceptAll struct{}

func (acceptAll) RoundTrip(r *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, r.Body)
	_ = r.Body.Close()
	return &http.Response{StatusCode: http.StatusNoContent, Body: http.NoBody, Header: http.Header{}, Request: r}, nil
}

// benchBatch is 1,000 entries as the EventLogFile source makes them: each
// with its own labels and metadata maps (two event types), a JSON line.
func benchBatch() []ports.Entry {
	at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	batch := make([]ports.Entry, 1000)
	for i := range batch {
		t := []string{"API", "Login"}[i%2]
		batch[i] = ports.Entry{Time: at.Add(time.Duration(i) * time.Millisecond),
			Labels:   map[string]string{"source": "eventlogfile", "event_type": t},
			Metadata: map[string]string{"level": "info"},
			Line: fmt.Sprintf(`{"CPU_TIME":"17","EVENT_TYPE":%q,"QUERY":"SELECT Id FROM Account WHERE Id = '%d'","REQUEST_ID":"4exLFFQZ%06d","TIMESTAMP_DERIVED":"2026-11-28T10:00:00.123Z","URI":"/services/data/v60.0/query","USER_ID":"005000000000001"}`,
				t, i, i),
			Checkpoint: ports.Checkpoint{Key: "eventlogfile:" + t, Value: "cp"}}
	}
	return batch
}

// BenchmarkPushBatch pushes one batch of 1,000 entries through the sink as
// the daemon does (static labels, an org's view adding its own), encoded as
// protobuf + snappy, to a transport that accepts it at once. One op is one
// batch; allocs/entry and B/entry divide by its entries. Each entry has
// maps of its own: the worst case.
func BenchmarkPushBatch(b *testing.B) { pushBatch(b, benchBatch()) }

// BenchmarkPushBatchSharedMaps is BenchmarkPushBatch on a batch as a source
// makes it: the entries of one event type share one labels map and one
// metadata map per level.
func BenchmarkPushBatchSharedMaps(b *testing.B) {
	batch := benchBatch()[:0]
	labels := map[string]string{"source": "eventlogfile", "event_type": "API"}
	metadata := map[string]string{"level": "info"}
	for _, e := range benchBatch() {
		e.Labels, e.Metadata = labels, metadata
		batch = append(batch, e)
	}
	pushBatch(b, batch)
}

// BenchmarkPushBatchInterleavedMaps is BenchmarkPushBatchSharedMaps on a
// batch of the realtime lane fed by four Pub/Sub topics: each topic's
// entries share one labels map, and the topics' windows interleave in runs
// of 25.
func BenchmarkPushBatchInterleavedMaps(b *testing.B) {
	batch := benchBatch()[:0]
	var labels [4]map[string]string
	for i := range labels {
		labels[i] = map[string]string{"source": "pubsub", "event_type": fmt.Sprintf("Login%dEventStream", i)}
	}
	metadata := map[string]string{"level": "info"}
	for i, e := range benchBatch() {
		e.Labels, e.Metadata = labels[i/25%len(labels)], metadata
		batch = append(batch, e)
	}
	pushBatch(b, batch)
}

func pushBatch(b *testing.B, batch []ports.Entry) {
	s, err := loki.New(loki.Config{URL: "http://loki.invalid/loki/api/v1/push", Labels: map[string]string{"job": "sf2loki"},
		HTTPClient: &http.Client{Transport: acceptAll{}}})
	if err != nil {
		b.Fatal(err)
	}
	view, err := s.WithLabels(map[string]string{"org": "prod", "environment": "production"})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		if err := view.Push(ctx, batch); err != nil {
			b.Fatal(err)
		}
		n++
	}
	runtime.ReadMemStats(&after)
	entries := float64(n * len(batch))
	b.ReportMetric(float64(after.Mallocs-before.Mallocs)/entries, "allocs/entry")
	b.ReportMetric(float64(after.TotalAlloc-before.TotalAlloc)/entries, "B/entry")
	b.ReportMetric(b.Elapsed().Seconds()/entries*1e9, "ns/entry")
	if !strings.Contains(s.String(), "protobuf") {
		b.Fatal(s.String())
	}
}
