package telemetry

import (
	"context"
	"maps"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sf2loki/sf2loki/internal/buildinfo"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// secondBuckets are the boundaries of the histograms of a request's or a
// write's duration, in seconds.
var secondBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}

// lagBuckets are the boundaries of sf2loki_ingest_lag_seconds.
var lagBuckets = []float64{1, 5, 15, 60, 300, 900, 1800, 3600, 7200, 14400, 28800, 86400}

// flowMetrics follow the entries: produced per source, held per lane,
// accepted by Loki (the lag) and committed (the checkpoints' age).
type flowMetrics struct {
	start time.Time // when the telemetry was built: the process start
	lag   metric.Float64Histogram

	mu             sync.Mutex
	lanes          []shardLanes
	ages           []*CheckpointAges
	ingestCounters []*ingestCounter
}

// shardLanes is how a shard's pipeline says what its lanes hold (nil: no
// pipeline, 0).
type shardLanes struct {
	shard string
	held  func(ports.Lane) (entries, bytes int64)
}

// snapshot is a copy of list, taken holding mu (a callback's view of what
// the shards registered).
func snapshot[T any](mu *sync.Mutex, list *[]T) []T {
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(*list)
}

// flowAttrs are a series' labels with the shard's (none in the single-org
// form).
func flowAttrs(shard string, kv ...attribute.KeyValue) attribute.Set {
	if shard != "" {
		kv = append(kv, attribute.String("shard", shard))
	}
	return attribute.NewSet(kv...)
}

func (t *Recorder) flowInstruments(m metric.Meter) error {
	f := &t.flow
	var err error
	if _, err = m.Int64ObservableCounter("sf2loki_entries_ingested",
		metric.WithDescription("Entries the sources produced (queued for the sink), by source and event type; the configured event types from the start. Labelled shard=<org> when orgs are configured."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, c := range snapshot(&f.mu, &f.ingestCounters) {
				c.observe(o)
			}
			return nil
		})); err != nil {
		return err
	}
	if f.lag, err = m.Float64Histogram("sf2loki_ingest_lag", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(lagBuckets...),
		metric.WithDescription("The time Loki accepted an entry minus the entry's event time, by source. Labelled shard=<org> when orgs are configured.")); err != nil {
		return err
	}
	laneGauge := func(name, unit, desc string, v func(entries, bytes int64) int64) error {
		_, err := m.Int64ObservableGauge(name, metric.WithDescription(desc), metric.WithUnit(unit),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
				for _, s := range snapshot(&f.mu, &f.lanes) {
					for _, l := range []ports.Lane{ports.LaneRealtime, ports.LaneBulk} {
						var n, b int64
						if s.held != nil {
							n, b = s.held(l)
						}
						o.Observe(v(n, b), metric.WithAttributeSet(flowAttrs(s.shard, attribute.String("lane", l.String()))))
					}
				}
				return nil
			}))
		return err
	}
	if err := laneGauge("sf2loki_lane_entries", "", "Entries a lane (realtime, bulk) holds now: queued, batched or pushed and not yet released. Labelled shard=<org> when orgs are configured.",
		func(n, _ int64) int64 { return n }); err != nil {
		return err
	}
	if err := laneGauge("sf2loki_lane_bytes", "By", "Bytes a lane (realtime, bulk) holds now, as sink.loki.batch.queue_bytes counts them, batches in the air included. Labelled shard=<org> when orgs are configured.",
		func(_, b int64) int64 { return b }); err != nil {
		return err
	}
	if _, err := m.Float64ObservableGauge("sf2loki_checkpoint_age", metric.WithUnit("s"),
		metric.WithDescription("Seconds since a checkpoint key of the source (the key's prefix: eventlogfile, pubsub, eventlog_objects, apexlog, synthetic) last moved in a successful commit; until the first, since the process started. Labelled shard=<org> when orgs are configured."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			for _, a := range snapshot(&f.mu, &f.ages) {
				a.observe(o)
			}
			return nil
		})); err != nil {
		return err
	}
	version, commit, goVersion := buildinfo.Version(), buildinfo.Commit(), runtime.Version()
	_, err = m.Int64ObservableGauge("sf2loki_build_info", metric.WithDescription("1, labelled with the binary's version, commit and Go version."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(1, metric.WithAttributes(attribute.String("version", version), attribute.String("commit", commit),
				attribute.String("goversion", goVersion)))
			return nil
		}))
	return err
}

// AddLanes exports a shard's lanes (held nil: a shard without a pipeline,
// 0) from the start.
func (t *Recorder) AddLanes(shard string, held func(ports.Lane) (int64, int64)) {
	t.flow.mu.Lock()
	defer t.flow.mu.Unlock()
	t.flow.lanes = append(t.flow.lanes, shardLanes{shard: shard, held: held})
}

// IngestCounter exports the entries of shard's sources, seed's event
// types (by source) at 0 from the start, and returns what counts one
// produced entry of a source.
func (t *Recorder) IngestCounter(shard string, seed map[string][]string) func(source string) func(ports.Entry) {
	return t.newIngestCounter(shard, seed).produced
}

// ingestCounter counts the entries of one shard's sources by source and
// event type: an atomic count per pair, exported by the observable
// sf2loki_entries_ingested counter, so that counting an entry costs an
// atomic add, not a synchronous instrument's attribute lookup.
type ingestCounter struct {
	shard  string
	mu     sync.Mutex
	counts map[[2]string]*ingestCount
}

// ingestCount is one series of sf2loki_entries_ingested.
type ingestCount struct {
	n     atomic.Int64
	attrs attribute.Set
}

// newIngestCounter returns the shard's counter, its configured sources'
// event types exported (at 0) from the start.
func (t *Recorder) newIngestCounter(shard string, seed map[string][]string) *ingestCounter {
	c := &ingestCounter{shard: shard, counts: map[[2]string]*ingestCount{}}
	for _, source := range slices.Sorted(maps.Keys(seed)) {
		for _, et := range seed[source] {
			c.count(source, et)
		}
	}
	t.flow.mu.Lock()
	defer t.flow.mu.Unlock()
	t.flow.ingestCounters = append(t.flow.ingestCounters, c)
	return c
}

// count is the series of source and eventType, made at its first use.
func (c *ingestCounter) count(source, eventType string) *ingestCount {
	key := [2]string{source, eventType}
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.counts[key]
	if !ok {
		n = &ingestCount{attrs: flowAttrs(c.shard, attribute.String("source", source), attribute.String("event_type", eventType))}
		c.counts[key] = n
	}
	return n
}

// observe reports every series.
func (c *ingestCounter) observe(o metric.Int64Observer) {
	c.mu.Lock()
	all := slices.Collect(maps.Values(c.counts))
	c.mu.Unlock()
	for _, n := range all {
		o.Observe(n.n.Load(), metric.WithAttributeSet(n.attrs))
	}
}

// produced is the pipeline's Produced hook: source's function finds the
// series of an entry's event type in a map of its own, safe for the
// several goroutines a source may emit from (one per event type, topic or
// object).
func (c *ingestCounter) produced(source string) func(ports.Entry) {
	var byType sync.Map // event type → *ingestCount
	return func(e ports.Entry) {
		et := e.Labels["event_type"]
		n, ok := byType.Load(et)
		if !ok {
			n, _ = byType.LoadOrStore(et, c.count(source, et))
		}
		n.(*ingestCount).n.Add(1)
	}
}

// lagSink records, for each entry the sink accepted, the time since its
// event time in sf2loki_ingest_lag_seconds.
type lagSink struct {
	ports.Sink
	lag   metric.Float64Histogram
	clk   ports.Clock
	shard string
	mu    sync.RWMutex
	opts  map[string][]metric.RecordOption
}

// LagSink is sink recording, for each entry it accepted, the time since
// the entry's event time (sf2loki_ingest_lag_seconds, shard-labelled).
func (t *Recorder) LagSink(shard string, sink ports.Sink, clk ports.Clock) ports.Sink {
	return &lagSink{Sink: sink, lag: t.flow.lag, clk: clk, shard: shard, opts: map[string][]metric.RecordOption{}}
}

func (s *lagSink) options(source string) []metric.RecordOption {
	s.mu.RLock()
	opts, ok := s.opts[source]
	s.mu.RUnlock()
	if ok {
		return opts
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if opts, ok = s.opts[source]; !ok {
		opts = []metric.RecordOption{metric.WithAttributeSet(flowAttrs(s.shard, attribute.String("source", source)))}
		s.opts[source] = opts
	}
	return opts
}

// Push implements ports.Sink.
func (s *lagSink) Push(ctx context.Context, batch []ports.Entry) error {
	if err := s.Sink.Push(ctx, batch); err != nil {
		return err
	}
	now := s.clk.Now()
	for i := range batch {
		e := &batch[i]
		if e.CheckpointOnly {
			continue
		}
		source := e.Labels["source"]
		if source == "" {
			source, _, _ = strings.Cut(e.Checkpoint.Key, ":")
		}
		s.lag.Record(ctx, now.Sub(e.Time).Seconds(), s.options(source)...)
	}
	return nil
}

// CheckpointAges is when each source's checkpoint keys last moved in a
// successful commit, for one shard.
type CheckpointAges struct {
	shard  string
	clk    ports.Clock
	mu     sync.Mutex
	moved  map[string]time.Time // by source
	values map[string]string    // the last committed value per key
}

// AddCheckpointAges exports the age of the checkpoints of a shard's
// sources, from now until their first commit.
func (t *Recorder) AddCheckpointAges(shard string, sources []string, clk ports.Clock) *CheckpointAges {
	a := &CheckpointAges{shard: shard, clk: clk, moved: map[string]time.Time{}, values: map[string]string{}}
	now := clk.Now()
	for _, s := range sources {
		a.moved[s] = now
	}
	t.flow.mu.Lock()
	defer t.flow.mu.Unlock()
	t.flow.ages = append(t.flow.ages, a)
	return a
}

// committed records the keys of a successful commit that moved.
func (a *CheckpointAges) committed(kv map[string]string) {
	now := a.clk.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for k, v := range kv {
		source, _, _ := strings.Cut(k, ":")
		if _, ok := a.moved[source]; !ok {
			continue // not a source's (the egress budget's day)
		}
		if old, ok := a.values[k]; ok && old == v {
			continue
		}
		a.values[k] = v
		a.moved[source] = now
	}
}

// Writer is w telling a of every checkpoint it committed.
func (a *CheckpointAges) Writer(w domain.CheckpointWriter) domain.CheckpointWriter {
	return agedCommits{w: w, ages: a}
}

func (a *CheckpointAges) observe(o metric.Float64Observer) {
	now := a.clk.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range slices.Sorted(maps.Keys(a.moved)) {
		o.Observe(max(now.Sub(a.moved[s]).Seconds(), 0), metric.WithAttributeSet(flowAttrs(a.shard, attribute.String("source", s))))
	}
}

// agedCommits is a CheckpointWriter that tells ages of what it committed.
type agedCommits struct {
	w    domain.CheckpointWriter
	ages *CheckpointAges
}

func (c agedCommits) CommitMany(ctx context.Context, kv map[string]string) error {
	if err := c.w.CommitMany(ctx, kv); err != nil {
		return err
	}
	c.ages.committed(kv)
	return nil
}
