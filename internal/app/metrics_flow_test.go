package app

import (
	"context"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/loki"
	"github.com/sf2loki/sf2loki/internal/buildinfo"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/telemetry"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// sample returns the value of the first series of name whose labels
// include every k="v" of labels (pairs).
func sample(body, name string, labels ...string) (float64, bool) {
	for line := range strings.SplitSeq(body, "\n") {
		if !strings.HasPrefix(line, name+"{") && !strings.HasPrefix(line, name+" ") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		series := line[:i]
		ok := true
		for j := 0; j+1 < len(labels); j += 2 {
			ok = ok && strings.Contains(series, labels[j]+`="`+labels[j+1]+`"`)
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		return v, err == nil
	}
	return 0, false
}

// quantile computes the q-quantile of a histogram from its _bucket series
// (whose labels include labels) as Prometheus' histogram_quantile does.
func quantile(t *testing.T, body, name string, q float64, labels ...string) float64 {
	t.Helper()
	type bucket struct{ le, n float64 }
	var bs []bucket
	for line := range strings.SplitSeq(body, "\n") {
		if !strings.HasPrefix(line, name+"_bucket{") {
			continue
		}
		ok := true
		for j := 0; j+1 < len(labels); j += 2 {
			ok = ok && strings.Contains(line, labels[j]+`="`+labels[j+1]+`"`)
		}
		if !ok {
			continue
		}
		_, rest, _ := strings.Cut(line, `le="`)
		le, rest, _ := strings.Cut(rest, `"`)
		bound, _ := strconv.ParseFloat(le, 64)
		if le == "+Inf" {
			bound = math.Inf(1)
		}
		n, _ := strconv.ParseFloat(rest[strings.LastIndexByte(rest, ' ')+1:], 64)
		bs = append(bs, bucket{bound, n})
	}
	if len(bs) < 2 {
		t.Fatalf("%s has no buckets:\n%s", name, grepLines(body, name))
	}
	slices.SortFunc(bs, func(a, b bucket) int { return int(math.Copysign(1, a.le-b.le)) })
	rank := q * bs[len(bs)-1].n
	lo, below := 0.0, 0.0
	for _, b := range bs {
		if b.n >= rank {
			if math.IsInf(b.le, 1) {
				return lo
			}
			return lo + (b.le-lo)*(rank-below)/(b.n-below)
		}
		lo, below = b.le, b.n
	}
	return lo
}

func newTestTelemetry(t *testing.T) (*telemetry.Recorder, http.Handler) {
	t.Helper()
	tel, cleanup, err := telemetry.New(t.Context(), TelemetrySettings(testenv.Config(config.CoordinateNoop)), quiet(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cleanup)
	return tel, tel.MetricsHandler()
}

// The push and commit durations have second-scale buckets: a 20ms and a 2s
// latency land in different buckets, so a quantile follows the latency.
func TestDurationHistogramsHaveSecondBuckets(t *testing.T) {
	median := func(d time.Duration) (push, commit float64, body string) {
		tel, h := newTestTelemetry(t)
		record := tel.RegisterSink(&loki.Stats{})
		for range 10 {
			record(d)
			tel.Observe(domain.Event{Kind: domain.EventCommitted, At: time.Now(), Duration: d})
		}
		_, body = get(t, h, "/metrics")
		return quantile(t, body, "sf2loki_loki_push_duration_seconds", 0.5),
			quantile(t, body, "sf2loki_checkpoint_commit_duration_seconds", 0.5), body
	}
	fastPush, fastCommit, body := median(20 * time.Millisecond)
	for _, le := range []string{"0.005", "0.01", "0.025", "0.05", "0.1", "0.25", "0.5", "1", "2.5", "5", "10", "30", "60", "+Inf"} {
		for _, name := range []string{"sf2loki_loki_push_duration_seconds_bucket", "sf2loki_checkpoint_commit_duration_seconds_bucket"} {
			if _, ok := sample(body, name, "le", le); !ok {
				t.Errorf("/metrics lacks %s{le=%q}:\n%s", name, le, grepLines(body, name))
			}
		}
	}
	if v, _ := sample(body, "sf2loki_loki_push_duration_seconds_bucket", "le", "0.025"); v != 10 {
		t.Errorf("10 pushes of 20ms: le=0.025 counts %v:\n%s", v, grepLines(body, "push_duration"))
	}
	slowPush, slowCommit, _ := median(2 * time.Second)
	if fastPush <= 0.01 || fastPush > 0.025 || fastCommit <= 0.01 || fastCommit > 0.025 {
		t.Errorf("the median of 20ms pushes and commits reads %v and %v, want in (0.01, 0.025]", fastPush, fastCommit)
	}
	if slowPush <= 1 || slowPush > 2.5 || slowCommit <= 1 || slowCommit > 2.5 {
		t.Errorf("the median of 2s pushes and commits reads %v and %v, want in (1, 2.5]", slowPush, slowCommit)
	}
}

// /metrics carries the Go runtime's and the process's metrics, the build
// and, before any push, the process's start time as the last success.
func TestRuntimeBuildAndLastSuccessFromStart(t *testing.T) {
	before := time.Now()
	tel, h := newTestTelemetry(t)
	stats := &loki.Stats{}
	tel.RegisterSink(stats)
	_, body := get(t, h, "/metrics")
	for _, name := range []string{"go_goroutines", "go_memstats_alloc_bytes", "process_cpu_seconds_total", "process_resident_memory_bytes"} {
		if _, ok := sample(body, name); !ok {
			t.Errorf("/metrics lacks %s", name)
		}
	}
	b := struct{ Version, Commit, GoVersion string }{buildinfo.Version(), buildinfo.Commit(), runtime.Version()}
	if v, ok := sample(body, "sf2loki_build_info", "version", b.Version, "commit", b.Commit, "goversion", b.GoVersion); !ok || v != 1 {
		t.Errorf("sf2loki_build_info{version=%q,commit=%q,goversion=%q} reads %v (%v):\n%s", b.Version, b.Commit, b.GoVersion, v, ok,
			grepLines(body, "build_info"))
	}
	v, ok := sample(body, "sf2loki_loki_last_success_timestamp_seconds")
	if !ok || v < float64(before.Unix()) || v > float64(time.Now().Unix()+1) {
		t.Fatalf("before any push sf2loki_loki_last_success_timestamp_seconds reads %v (%v), want the start time %d", v, ok, before.Unix())
	}
	stats.LastSuccess.Store(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	_, body = get(t, h, "/metrics")
	if v, _ := sample(body, "sf2loki_loki_last_success_timestamp_seconds"); v != float64(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).Unix()) {
		t.Fatalf("after a push the gauge reads %v", v)
	}
}

// sf2loki_ingest_lag_seconds buckets the time between an entry's event
// time and Loki's acceptance, by source.
func TestIngestLagHistogram(t *testing.T) {
	tel, h := newTestTelemetry(t)
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	clk := porttest.NewFakeClock(now)
	sink := tel.LagSink("", acceptAll{}, clk)
	entry := func(age time.Duration) ports.Entry {
		return ports.Entry{Time: now.Add(-age), Line: "x", Labels: map[string]string{"source": "pubsub", "event_type": "LoginEventStream"},
			Checkpoint: ports.Checkpoint{Key: "pubsub:/event/LoginEventStream", Value: "1"}}
	}
	if err := sink.Push(t.Context(), []ports.Entry{entry(3 * time.Second), entry(3 * time.Second), {CheckpointOnly: true}}); err != nil {
		t.Fatal(err)
	}
	_, body := get(t, h, "/metrics")
	for _, le := range []string{"1", "5", "15", "60", "300", "900", "1800", "3600", "7200", "14400", "28800", "86400", "+Inf"} {
		if _, ok := sample(body, "sf2loki_ingest_lag_seconds_bucket", "source", "pubsub", "le", le); !ok {
			t.Errorf("/metrics lacks sf2loki_ingest_lag_seconds_bucket{source=pubsub,le=%q}", le)
		}
	}
	if n, _ := sample(body, "sf2loki_ingest_lag_seconds_count", "source", "pubsub"); n != 2 {
		t.Fatalf("2 entries accepted (and a checkpoint-only one), the count reads %v:\n%s", n, grepLines(body, "ingest_lag"))
	}
	if q := quantile(t, body, "sf2loki_ingest_lag_seconds", 0.5, "source", "pubsub"); q <= 1 || q > 5 {
		t.Fatalf("the median lag of entries 3s old reads %v, want in (1, 5]", q)
	}
	for range 8 {
		if err := sink.Push(t.Context(), []ports.Entry{entry(2 * time.Hour)}); err != nil {
			t.Fatal(err)
		}
	}
	_, body = get(t, h, "/metrics")
	if q := quantile(t, body, "sf2loki_ingest_lag_seconds", 0.5, "source", "pubsub"); q <= 3600 || q > 7200 {
		t.Fatalf("the median lag with most entries 2h old reads %v, want in (3600, 7200]", q)
	}
}

type acceptAll struct{}

func (acceptAll) Push(context.Context, []ports.Entry) error { return nil }

// The ingested counter exists at 0 for the configured event types, counts
// per source and event type (with the shard in the orgs form), and does not
// allocate per entry.
func TestEntriesIngestedCounter(t *testing.T) {
	tel, h := newTestTelemetry(t)
	cfg := testenv.Config(config.CoordinateNoop)
	cfg.Sources.Synthetic.Rate = 1
	cfg.Sources.EventLogFile.EventTypes = []string{"Login", "Report*"}
	produced := tel.IngestCounter("", ingestSeed(cfg))
	org := tel.IngestCounter("prod", map[string][]string{"pubsub": {"LoginEventStream"}})
	_, body := get(t, h, "/metrics")
	for _, want := range [][]string{{"source", "synthetic", "event_type", "LoginEvent"}, {"source", "synthetic", "event_type", "ApiEvent"},
		{"source", "eventlogfile", "event_type", "Login"}, {"source", "pubsub", "event_type", "LoginEventStream", "shard", "prod"}} {
		if v, ok := sample(body, "sf2loki_entries_ingested_total", want...); !ok || v != 0 {
			t.Errorf("from the start sf2loki_entries_ingested_total%v reads %v (%v):\n%s", want, v, ok, grepLines(body, "ingested"))
		}
	}
	e := ports.Entry{Line: "x", Labels: map[string]string{"source": "synthetic", "event_type": "LoginEvent"}}
	api := ports.Entry{Line: "x", Labels: map[string]string{"source": "synthetic", "event_type": "ApiEvent"}}
	synthetic := produced("synthetic")
	for _, e := range []ports.Entry{e, e, api, e, api, api, api} {
		synthetic(e)
	}
	org("pubsub")(ports.Entry{Labels: map[string]string{"event_type": "LoginEventStream"}})
	_, body = get(t, h, "/metrics")
	if v, _ := sample(body, "sf2loki_entries_ingested_total", "source", "synthetic", "event_type", "LoginEvent"); v != 3 {
		t.Errorf("3 entries counted as %v:\n%s", v, grepLines(body, "ingested"))
	}
	if v, _ := sample(body, "sf2loki_entries_ingested_total", "source", "synthetic", "event_type", "ApiEvent"); v != 4 {
		t.Errorf("4 entries counted as %v:\n%s", v, grepLines(body, "ingested"))
	}
	if v, _ := sample(body, "sf2loki_entries_ingested_total", "source", "pubsub", "shard", "prod"); v != 1 {
		t.Errorf("the org's entry counted as %v:\n%s", v, grepLines(body, "ingested"))
	}
	if n := testing.AllocsPerRun(1000, func() { synthetic(e) }); n != 0 {
		t.Errorf("counting an entry allocates %v times", n)
	}
}

// sf2loki_checkpoint_age_seconds counts from the start until a source's key
// moves in a successful commit, then from that commit.
func TestCheckpointAge(t *testing.T) {
	tel, h := newTestTelemetry(t)
	clk := porttest.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	ages := tel.AddCheckpointAges("", []string{"synthetic", "pubsub"}, clk)
	tel.AddCheckpointAges("prod", []string{"eventlogfile"}, clk)
	age := func(labels ...string) float64 {
		t.Helper()
		_, body := get(t, h, "/metrics")
		v, ok := sample(body, "sf2loki_checkpoint_age_seconds", labels...)
		if !ok {
			t.Fatalf("/metrics lacks sf2loki_checkpoint_age_seconds%v:\n%s", labels, grepLines(body, "checkpoint_age"))
		}
		return v
	}
	clk.Advance(90 * time.Second)
	if a := age("source", "synthetic"); a != 90 {
		t.Fatalf("90s after the start, no commit: age %v", a)
	}
	if a := age("source", "eventlogfile", "shard", "prod"); a != 90 {
		t.Fatalf("the org's source: age %v", a)
	}
	w := ages.Writer(&porttestWriter{})
	if err := w.CommitMany(t.Context(), map[string]string{"synthetic:LoginEvent": "1", domain.EgressKey: "{}"}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second)
	if a, p := age("source", "synthetic"), age("source", "pubsub"); a != 10 || p != 100 {
		t.Fatalf("10s after synthetic's commit: synthetic %v (want 10), pubsub %v (want 100)", a, p)
	}
	// The same position committed again did not move.
	_ = w.CommitMany(t.Context(), map[string]string{"synthetic:LoginEvent": "1"})
	clk.Advance(5 * time.Second)
	if a := age("source", "synthetic"); a != 15 {
		t.Fatalf("after a commit that moved nothing: age %v, want 15", a)
	}
	// A failed commit moves nothing either.
	failing := ages.Writer(&porttestWriter{err: ports.ErrPreconditionFailed})
	_ = failing.CommitMany(t.Context(), map[string]string{"synthetic:LoginEvent": "2"})
	if a := age("source", "synthetic"); a != 15 {
		t.Fatalf("after a failed commit: age %v, want 15", a)
	}
}

type porttestWriter struct{ err error }

func (w *porttestWriter) CommitMany(context.Context, map[string]string) error { return w.err }

// A daemon exports its lanes at 0 from the start and, leading, counts what
// its sources produce, what Loki accepted and the commits.
func TestFlowMetricsOfARunningDaemon(t *testing.T) {
	loki := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer loki.Close()
	cfg := testenv.Config(config.CoordinateS3Lease)
	cfg.Sources.Synthetic.Rate = 200
	cfg.Sink.Loki.URL = loki.URL + "/loki/api/v1/push"
	cfg.Sink.Loki.Batch.MaxWait = 20 * time.Millisecond
	d, cleanup, err := Build(t.Context(), cfg, Overrides{LeaseStore: porttest.NewMemoryCAS("lease"), StateStore: porttest.NewMemoryCAS("state"), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	h := d.Handler()
	_, body := get(t, h, "/metrics")
	for _, want := range []struct {
		name   string
		labels []string
	}{
		{"sf2loki_lane_entries", []string{"lane", "realtime"}}, {"sf2loki_lane_entries", []string{"lane", "bulk"}},
		{"sf2loki_lane_bytes", []string{"lane", "realtime"}}, {"sf2loki_lane_bytes", []string{"lane", "bulk"}},
		{"sf2loki_entries_ingested_total", []string{"source", "synthetic", "event_type", "LoginEvent"}},
	} {
		if v, ok := sample(body, want.name, want.labels...); !ok || v != 0 {
			t.Errorf("before leading %s%v reads %v (%v)", want.name, want.labels, v, ok)
		}
	}
	if _, ok := sample(body, "sf2loki_checkpoint_age_seconds", "source", "synthetic"); !ok {
		t.Errorf("before leading /metrics lacks sf2loki_checkpoint_age_seconds{source=synthetic}")
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()
	eventually(t, "entries ingested, accepted and committed", func() bool {
		_, body = get(t, h, "/metrics")
		n, _ := sample(body, "sf2loki_entries_ingested_total", "source", "synthetic", "event_type", "LoginEvent")
		lag, _ := sample(body, "sf2loki_ingest_lag_seconds_count", "source", "synthetic")
		return n > 0 && lag > 0 && d.Telemetry().ShardsLed() == 1
	})
}
