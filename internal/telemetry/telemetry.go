package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	promexporter "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/metric"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.26.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/sf2loki/sf2loki/internal/adapters/loki"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// Recorder turns the core's events into metrics (served as Prometheus text
// on /metrics), trace spans (exported over OTLP/HTTP when configured) and
// log lines. It implements domain.Observer.
type Recorder struct {
	log      *slog.Logger
	registry *prometheus.Registry
	meter    metric.Meter
	tracer   trace.Tracer

	shardMu      sync.Mutex
	shards       []*Shard // in the order registered
	transitions  metric.Int64Counter
	acquisitions metric.Int64Counter
	resignations metric.Int64Counter
	renewFails   metric.Int64Counter
	commits      metric.Int64Counter
	pushesFenced metric.Int64Counter
	commitTime   metric.Float64Histogram
	requests     metric.Int64Counter
	sfThrottled  metric.Int64Counter
	sfRefreshes  metric.Int64Counter
	sfMintFails  metric.Int64Counter
	sfAuthMu     sync.Mutex
	sfAuth       []orgProbe // why each org's token endpoint refuses ("" while it does not)
	unreadable   metric.Int64Counter
	pubsub       metric.Int64Counter
	reconnects   metric.Int64Counter
	counterMu    sync.Mutex
	counterTotal map[string]int64 // for /statusz
	sinkStats    atomic.Pointer[loki.Stats]
	stalledAt    atomic.Int64 // unix nanoseconds of the last stall; 0 when none
	shape        shapeMetrics // the transforms' and sampling's counters
	sf           sfMetrics    // the org limits and the ApexLog counters
	flow         flowMetrics  // the entries from the sources to Loki and the checkpoints
}

// egressGauges exports each governed shard's daily budget from the start
// (0 before anything was shipped), on every replica: the day's use as this
// replica last knew it, paused only where it leads.
func (t *Recorder) egressGauges(m metric.Meter) error {
	governed := func(o metric.Int64Observer, v func(*Shard, domain.EgressStatus) int64) {
		for _, s := range t.allShards() {
			if g := s.egress.Load(); g != nil {
				o.Observe(v(s, g.Status()), s.attrs())
			}
		}
	}
	var errs []error
	for _, g := range []struct {
		name, unit, desc string
		v                func(*Shard, domain.EgressStatus) int64
	}{
		{"sf2loki_egress_budget_used_bytes", "By", "Line bytes (before compression) shipped this UTC day against sink.loki.egress.daily_byte_budget, per shard.",
			func(_ *Shard, st domain.EgressStatus) int64 { return st.Used }},
		{"sf2loki_egress_budget_bytes", "By", "The daily byte budget each shard's leader holds (0: none).",
			func(_ *Shard, st domain.EgressStatus) int64 { return st.Budget }},
		{"sf2loki_egress_paused", "", "1 while the shard's leader holds its pushes until 00:00 UTC because the day's budget is spent (budget_action: pause).",
			func(s *Shard, st domain.EgressStatus) int64 {
				if st.Paused && s.leading() {
					return 1
				}
				return 0
			}},
	} {
		_, err := m.Int64ObservableGauge(g.name, metric.WithDescription(g.desc), metric.WithUnit(g.unit),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error { governed(o, g.v); return nil }))
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// orgProbe is one org's token-endpoint state.
type orgProbe struct {
	org   string
	probe func() string
}

// Shard is one shard's leadership gauges: sf2loki_leader,
// sf2loki_lease_epoch and sf2loki_coordination_blocked carry its org as the
// shard label (none in the single-org form).
type Shard struct {
	name    string
	leader  atomic.Int64
	epoch   atomic.Int64
	fenceOK atomic.Pointer[func() bool]
	blocked atomic.Pointer[func() string]
	egress  atomic.Pointer[domain.Egress] // nil: no egress governor
}

// SetEgress registers the shard's egress governor for its gauges.
func (s *Shard) SetEgress(g *domain.Egress) { s.egress.Store(g) }

// Shard registers a shard's gauges: fenceOK makes its leader gauges read 0
// whenever it reports false (the gauge follows the self-fencing deadline at
// the moment it is read, not the later moment the leader's work stopped);
// blocked says why it does not contend ("" when it does).
func (t *Recorder) Shard(name string, fenceOK func() bool, blocked func() string) *Shard {
	st := &Shard{name: name}
	st.fenceOK.Store(&fenceOK)
	st.blocked.Store(&blocked)
	t.zeroShard(name)
	t.shardMu.Lock()
	defer t.shardMu.Unlock()
	t.shards = append(t.shards, st)
	return st
}

// The label values of the shard's counters, every one exported at 0 from
// the start: an alert's increase() counts the first event only from a
// sample before it.
var (
	transitionKinds = []domain.EventKind{domain.EventAcquired, domain.EventRenewed, domain.EventRenewedAfterFailure,
		domain.EventLost, domain.EventFenced, domain.EventReleased, domain.EventLostRace, domain.EventRecoveredLostAck}
	commitOutcomes     = []string{"ok", "conflict", "fenced", "recovered", "error"}
	throttledCalls     = []string{"query", "logfile", "rest"}
	authRefreshReasons = []string{"initial", "expiry", "invalid_session"}
	authFailureReasons = []string{"refused", "unavailable"}
	storeOps           = []string{"get", "put", "delete"}
	storeOutcomes      = []string{"ok", "not_found", "precondition_failed", "transient", "error"}
	resignReasons      = []string{"stalled", "corrupt"}
)

// zeroShard exports the shard's lease and checkpoint counters at 0.
func (t *Recorder) zeroShard(shard string) {
	ctx := context.Background()
	for _, k := range transitionKinds {
		add(ctx, t.transitions, 0, shard, attribute.String("transition", string(k)))
	}
	for _, f := range domain.AcquiredFroms {
		add(ctx, t.acquisitions, 0, shard, attribute.String("from", string(f)))
	}
	for _, o := range commitOutcomes {
		add(ctx, t.commits, 0, shard, attribute.String("outcome", o))
	}
	for _, r := range resignReasons {
		add(ctx, t.resignations, 0, shard, attribute.String("reason", r))
	}
	add(ctx, t.renewFails, 0, shard)
	add(ctx, t.pushesFenced, 0, shard)
}

// ZeroSalesforce exports an org's Salesforce counters at 0.
func (t *Recorder) ZeroSalesforce(org string) {
	ctx := context.Background()
	for _, c := range throttledCalls {
		add(ctx, t.sfThrottled, 0, org, attribute.String("api", c))
	}
	for _, r := range authRefreshReasons {
		add(ctx, t.sfRefreshes, 0, org, attribute.String("reason", r))
	}
	for _, r := range authFailureReasons {
		add(ctx, t.sfMintFails, 0, org, attribute.String("reason", r))
	}
}

// add adds n to c with the shard label (none for "", the single-org form:
// to Prometheus an empty label is an absent one, so one rule's
// "by (shard)" serves both forms).
func add(ctx context.Context, c metric.Int64Counter, n int64, shard string, kv ...attribute.KeyValue) {
	if c != nil {
		c.Add(ctx, n, metric.WithAttributeSet(flowAttrs(shard, kv...)))
	}
}

func (t *Recorder) allShards() []*Shard {
	t.shardMu.Lock()
	defer t.shardMu.Unlock()
	return slices.Clone(t.shards)
}

// attrs is the shard label, none in the single-org form.
func (s *Shard) attrs(kv ...attribute.KeyValue) metric.MeasurementOption {
	if s.name != "" {
		kv = append(kv, attribute.String("shard", s.name))
	}
	return metric.WithAttributes(kv...)
}

// leading reports whether the gauges show a leader.
func (s *Shard) leading() bool {
	if s.leader.Load() != 1 {
		return false
	}
	ok := s.fenceOK.Load()
	return ok == nil || (*ok)()
}

// SetLeader records the role for the sf2loki_leader gauge.
func (s *Shard) SetLeader(leading bool, epoch uint64) {
	if leading {
		s.leader.Store(1)
		s.epoch.Store(int64(epoch))
		return
	}
	s.leader.Store(0)
	s.epoch.Store(0)
}

// Options lets tests capture spans.
type Options struct {
	// SpanExporter, if set, receives spans (tests use an in-memory one).
	SpanExporter sdktrace.SpanExporter
	// NoPush leaves the service.telemetry push out: a command that must
	// make no request (check) builds the telemetry without it.
	NoPush bool
}

// New builds the meter and tracer providers. The returned cleanup
// flushes and stops them.
func New(ctx context.Context, s Settings, log *slog.Logger, opts Options) (*Recorder, func(), error) {
	reg := prometheus.NewRegistry()
	exp, err := promexporter.New(promexporter.WithRegisterer(reg), promexporter.WithoutScopeInfo(), promexporter.WithoutTargetInfo())
	if err != nil {
		return nil, nil, fmt.Errorf("metrics exporter: %w", err)
	}
	// The Go runtime's and the process's metrics (go_*, process_*) beside
	// the exporter's, on the same registry.
	if err := reg.Register(collectors.NewGoCollector()); err != nil {
		return nil, nil, fmt.Errorf("metrics: %w", err)
	}
	if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
		return nil, nil, fmt.Errorf("metrics: %w", err)
	}
	var push *metricsPush
	if !opts.NoPush {
		if push, err = newMetricsPush(s, log); err != nil {
			return nil, nil, err
		}
	}
	mpOpts := []sdkmetric.Option{sdkmetric.WithReader(exp)}
	if push != nil { // service.telemetry: the same metrics pushed over OTLP/HTTP
		mpOpts = append(mpOpts, sdkmetric.WithReader(push.reader), sdkmetric.WithResource(push.resource))
	}
	mp := sdkmetric.NewMeterProvider(mpOpts...)
	res := resource.NewSchemaless(semconv.ServiceName(s.ServiceName))
	tpOpts := []sdktrace.TracerProviderOption{sdktrace.WithResource(res)}
	if opts.SpanExporter != nil {
		tpOpts = append(tpOpts, sdktrace.WithSyncer(opts.SpanExporter))
	}
	if s.TracesEndpoint != "" {
		otlp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(tracesURL(s.TracesEndpoint)),
			otlptracehttp.WithHeaders(withUserAgent(s.TracesHeaders)))
		if err != nil {
			return nil, nil, fmt.Errorf("telemetry.otlp_endpoint %q: %w", s.TracesEndpoint, err)
		}
		tpOpts = append(tpOpts, sdktrace.WithBatcher(otlp))
	}
	tp := sdktrace.NewTracerProvider(tpOpts...)
	t := &Recorder{log: log, registry: reg, tracer: tp.Tracer("sf2loki"), counterTotal: map[string]int64{}}
	t.flow.start = time.Now()
	meter := mp.Meter("sf2loki")
	t.meter = meter
	if err := t.instruments(meter); err != nil {
		return nil, nil, err
	}
	t.registerHealthGauges()
	cleanup := func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = tp.Shutdown(sctx)
		// A bound of its own: the meter provider's shutdown pushes the last
		// interval of service.telemetry, however long the traces took.
		mctx, mcancel := context.WithTimeout(context.Background(), PushFlushTimeout)
		defer mcancel()
		_ = mp.Shutdown(mctx)
	}
	return t, cleanup, nil
}

// tracesURL appends the OTLP traces path to a base endpoint (as
// OTEL_EXPORTER_OTLP_ENDPOINT is read); a URL with a path is used as it is.
func tracesURL(endpoint string) string {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Path != "" && u.Path != "/") {
		return endpoint
	}
	u.Path = "/v1/traces"
	return u.String()
}

func (t *Recorder) instruments(m metric.Meter) error {
	var errs []error
	gauge := func(name, desc string, v func(*Shard) int64) {
		_, err := m.Int64ObservableGauge(name, metric.WithDescription(desc),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
				for _, s := range t.allShards() {
					if !s.leading() {
						o.Observe(0, s.attrs())
						continue
					}
					o.Observe(v(s), s.attrs())
				}
				return nil
			}))
		errs = append(errs, err)
	}
	gauge("sf2loki_leader", "1 while this replica leads the shard (org) with a valid fence, 0 otherwise: the sum over replicas is 1 per shard in steady state. Labelled shard=<org> when orgs are configured.",
		func(s *Shard) int64 { return s.leader.Load() })
	gauge("sf2loki_lease_epoch", "The epoch of the current leadership (0 on a standby), per shard.", func(s *Shard) int64 { return s.epoch.Load() })
	_, err := m.Int64ObservableGauge("sf2loki_shards_led", metric.WithDescription("How many shards (orgs) this replica leads with a valid fence."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(int64(t.ShardsLed()))
			return nil
		}))
	errs = append(errs, err)
	errs = append(errs, t.egressGauges(m))
	errs = append(errs, t.shapeInstruments(m))
	errs = append(errs, t.salesforceInstruments(m))
	errs = append(errs, t.flowInstruments(m))
	counter := func(dst *metric.Int64Counter, name, desc string) {
		var err error
		*dst, err = m.Int64Counter(name, metric.WithDescription(desc))
		errs = append(errs, err)
	}
	const perShard = " Every label value from the start (0). Labelled shard=<org> when orgs are configured."
	counter(&t.transitions, "sf2loki_lease_transitions", "Lease transitions by kind (acquired, renewed, renewed_after_failure, lost, fenced, released, lost_race, recovered_lost_ack)."+perShard)
	counter(&t.acquisitions, "sf2loki_lease_acquisitions", "Leases this replica acquired, by the state the lease was in: absent (a first start), released (a graceful stop or a hand-off), own (it named this process), stale (its holder stopped renewing: an unplanned take-over)."+perShard)
	counter(&t.resignations, "sf2loki_lease_resignations", "Leaders that gave leadership up because they could not make progress, by reason: stalled (the liveness guard fired: nothing reached Loki for service.stall_timeout), corrupt (the checkpoint document cannot be read); another replica takes over. Hand-offs for balance and graceful stops are not counted."+perShard)
	counter(&t.renewFails, "sf2loki_lease_renew_failures", "Renewal rounds that failed without losing the lease."+perShard)
	counter(&t.commits, "sf2loki_checkpoint_commits", "Checkpoint writes by outcome: ok, conflict, fenced, recovered, error."+perShard)
	counter(&t.pushesFenced, "sf2loki_pushes_fenced", "Pushes to Loki the lease fence stopped (before they were sent, or while they were being sent): each batch is abandoned uncommitted, and the next leader re-ingests it."+perShard)
	t.commitTime, err = m.Float64Histogram("sf2loki_checkpoint_commit_duration", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(secondBuckets...),
		metric.WithDescription("Time to write a checkpoint, retries included."))
	errs = append(errs, err)
	counter(&t.requests, "sf2loki_objectstore_requests", "Requests to the lease and checkpoint stores by backend, operation and outcome.")
	counter(&t.sfThrottled, "sf2loki_salesforce_throttled", "REQUEST_LIMIT_EXCEEDED answers (the org's API limit) by the call that met it (query, logfile, rest); every REST call of the org then pauses until the next poll."+perShard)
	counter(&t.sfRefreshes, "sf2loki_salesforce_auth_refreshes", "Salesforce tokens minted, by reason: initial, expiry (the cached token's time was up), invalid_session (a request answered 401)."+perShard)
	counter(&t.sfMintFails, "sf2loki_salesforce_auth_failures", "Salesforce token mints that failed, by reason: refused (the credentials were refused), unavailable (no answer)."+perShard)
	counter(&t.unreadable, "sf2loki_checkpoint_unreadable", "Stored checkpoints a source could not read, by source; each restarts from its lookback window.")
	counter(&t.pubsub, "sf2loki_pubsub_events", "Pub/Sub events and streams by topic (and shard=<org> when orgs are configured) and what happened: undecodable (skipped), replay_fallback (a refused replay id restarted the topic from EARLIEST), stalled (no response within stall_timeout), streaming_off (Event Manager's streaming switch is off), streaming_silent (the storage object holds events the stream never delivered), bitmap_undecodable (a change event shipped with its field bitmaps as sent: they do not decode against its schema), gap (a gap change event: GAP_CREATE, GAP_UPDATE, GAP_DELETE, GAP_UNDELETE, GAP_OVERFLOW).")
	counter(&t.reconnects, "sf2loki_pubsub_reconnects", "Pub/Sub subscriptions reopened, by topic (and shard=<org> when orgs are configured) and reason.")
	return errors.Join(errs...)
}

// SalesforceThrottled counts a REQUEST_LIMIT_EXCEEDED answer to org ("":
// the single-org form).
func (t *Recorder) SalesforceThrottled(org, api string) {
	add(context.Background(), t.sfThrottled, 1, org, attribute.String("api", api))
}

// SalesforceAuthRefreshed counts a token minted for org, by reason.
func (t *Recorder) SalesforceAuthRefreshed(org, reason string) {
	add(context.Background(), t.sfRefreshes, 1, org, attribute.String("reason", reason))
}

// SalesforceAuthFailed counts a failed mint for org, by reason.
func (t *Recorder) SalesforceAuthFailed(org, reason string) {
	add(context.Background(), t.sfMintFails, 1, org, attribute.String("reason", reason))
}

// AddSalesforceAuthProbe adds how an org's token source says why its
// credentials are refused ("" when they are not); org is "" in the
// single-org form.
func (t *Recorder) AddSalesforceAuthProbe(org string, probe func() string) {
	t.sfAuthMu.Lock()
	defer t.sfAuthMu.Unlock()
	t.sfAuth = append(t.sfAuth, orgProbe{org: org, probe: probe})
}

// SalesforceAuthFailingFor returns why org's credentials are refused, or "".
func (t *Recorder) SalesforceAuthFailingFor(org string) string {
	t.sfAuthMu.Lock()
	probes := slices.Clone(t.sfAuth)
	t.sfAuthMu.Unlock()
	for _, p := range probes {
		if p.org == org {
			if why := p.probe(); why != "" {
				return why
			}
		}
	}
	return ""
}

// SalesforceAuthFailing returns why an org's credentials are refused (the
// first such org, named), or "".
func (t *Recorder) SalesforceAuthFailing() string {
	t.sfAuthMu.Lock()
	probes := slices.Clone(t.sfAuth)
	t.sfAuthMu.Unlock()
	for _, p := range probes {
		if why := p.probe(); why != "" {
			if p.org != "" {
				return "org " + p.org + ": " + why
			}
			return why
		}
	}
	return ""
}

// PubSubEvent counts a Pub/Sub event or stream of org ("": the single-org
// form) by what happened to it.
func (t *Recorder) PubSubEvent(org, topic, what string) {
	add(context.Background(), t.pubsub, 1, org, attribute.String("topic", topic), attribute.String("what", what))
}

// PubSubReconnect counts a reopened Pub/Sub subscription of org.
func (t *Recorder) PubSubReconnect(org, topic, reason string) {
	add(context.Background(), t.reconnects, 1, org, attribute.String("topic", topic), attribute.String("reason", reason))
}

// Resigned counts a leader of shard that gave leadership up because it
// could not make progress (reason stalled or corrupt).
func (t *Recorder) Resigned(shard, reason string) {
	add(context.Background(), t.resignations, 1, shard, attribute.String("reason", reason))
}

// CheckpointUnreadable counts a stored checkpoint a source could not read.
func (t *Recorder) CheckpointUnreadable(source string) {
	t.unreadable.Add(context.Background(), 1, metric.WithAttributes(attribute.String("source", source)))
}

// RegisterSink exports the Loki sink's counters and returns the hook that
// records push durations.
func (t *Recorder) RegisterSink(stats *loki.Stats) func(time.Duration) {
	t.sinkStats.Store(stats)
	for _, c := range []struct {
		name, desc string
		v          *atomic.Int64
	}{
		{"sf2loki_loki_entries_pushed", "Entries Loki accepted.", &stats.EntriesPushed},
		{"sf2loki_loki_bytes_pushed", "Bytes of accepted push bodies (compressed).", &stats.BytesPushed},
		{"sf2loki_loki_lines_truncated", "Lines cut to sink.loki.max_line_bytes.", &stats.LinesTruncated},
	} {
		_, _ = t.meter.Int64ObservableCounter(c.name, metric.WithDescription(c.desc),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
				o.Observe(c.v.Load())
				return nil
			}))
	}
	_, _ = t.meter.Int64ObservableCounter("sf2loki_loki_entries_dropped", metric.WithDescription("Entries never shipped whose checkpoints moved on, by reason: bad_request and oversized_413 (Loki refused the entry pushed alone), budget (egress budget_action drop)."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			dropped := stats.Dropped()
			for _, reason := range loki.DropReasons {
				o.Observe(dropped[reason], metric.WithAttributes(attribute.String("reason", reason)))
			}
			for reason, n := range dropped {
				if !slices.Contains(loki.DropReasons, reason) {
					o.Observe(n, metric.WithAttributes(attribute.String("reason", reason)))
				}
			}
			return nil
		}))
	_, _ = t.meter.Float64ObservableGauge("sf2loki_loki_last_success_timestamp", metric.WithUnit("s"),
		metric.WithDescription("Unix time of the last accepted push; the process's start time until the first."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			if ns := stats.LastSuccess.Load(); ns > 0 {
				o.Observe(float64(ns) / 1e9)
			} else {
				o.Observe(float64(t.flow.start.UnixNano()) / 1e9)
			}
			return nil
		}))
	h, _ := t.meter.Float64Histogram("sf2loki_loki_push_duration", metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(secondBuckets...),
		metric.WithDescription("Time to push one batch, retries included."))
	return func(d time.Duration) { h.Record(context.Background(), d.Seconds()) }
}

// SinkStats returns the counters of the sink RegisterSink exported (nil
// before it).
func (t *Recorder) SinkStats() *loki.Stats { return t.sinkStats.Load() }

// ShardsLed is how many shards this replica leads.
func (t *Recorder) ShardsLed() int {
	n := 0
	for _, s := range t.allShards() {
		if s.leading() {
			n++
		}
	}
	return n
}

// ForgetSinkFailure starts the count of failing pushes afresh: a replica
// that begins to lead after leading nothing has pushed nothing yet, and a
// failure from an earlier term says nothing about Loki now.
func (t *Recorder) ForgetSinkFailure() {
	if s := t.sinkStats.Load(); s != nil {
		s.FailingSince.Store(0)
	}
}

// SinkFailingFor returns how long every push to Loki has failed, 0 while
// they are accepted.
func (t *Recorder) SinkFailingFor() time.Duration {
	if s := t.sinkStats.Load(); s != nil {
		if ns := s.FailingSince.Load(); ns > 0 {
			return time.Since(time.Unix(0, ns))
		}
	}
	return 0
}

// SinkRejecting returns why the sink refuses every entry, or "".
func (t *Recorder) SinkRejecting() string {
	if s := t.sinkStats.Load(); s != nil {
		return s.Rejecting()
	}
	return ""
}

// MarkStalled records that the pipeline's liveness guard fired. The mark
// clears by itself once a push succeeds after it.
func (t *Recorder) MarkStalled() { t.stalledAt.Store(time.Now().UnixNano()) }

// Stalled reports whether the pipeline stalled and no push has succeeded
// since.
func (t *Recorder) Stalled() bool {
	at := t.stalledAt.Load()
	if at == 0 {
		return false
	}
	if s := t.sinkStats.Load(); s != nil && s.LastSuccess.Load() > at {
		t.stalledAt.CompareAndSwap(at, 0)
		return false
	}
	return true
}

// blockedReasons are every value of sf2loki_coordination_blocked's reason
// label, exported from the start (0 or 1) so alerts see them.
var blockedReasons = []string{domain.BlockedCheckpointCorrupt, domain.BlockedCheckpointUnreadable, domain.BlockedEpochExhausted,
	domain.BlockedLeaseUnreadable, domain.BlockedResigned}

// registerHealthGauges exports the states /readyz reports.
func (t *Recorder) registerHealthGauges() {
	bit := func(b bool) int64 {
		if b {
			return 1
		}
		return 0
	}
	_, _ = t.meter.Int64ObservableGauge("sf2loki_coordination_blocked",
		metric.WithDescription("1 for the reason this replica does not contend for the lease (checkpoint_corrupt, checkpoint_unreadable, epoch_exhausted, lease_unreadable, resigned); 0 for the others."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			for _, s := range t.allShards() {
				current := ""
				if p := s.blocked.Load(); p != nil {
					current = (*p)()
				}
				for _, r := range blockedReasons {
					o.Observe(bit(r == current), s.attrs(attribute.String("reason", r)))
				}
			}
			return nil
		}))
	_, _ = t.meter.Float64ObservableGauge("sf2loki_start_time", metric.WithUnit("s"),
		metric.WithDescription("Unix time the process started: a counter already above 0 on a process started within an alert's window counted its events within that window."),
		metric.WithFloat64Callback(func(_ context.Context, o metric.Float64Observer) error {
			o.Observe(float64(t.flow.start.UnixNano()) / 1e9)
			return nil
		}))
	_, _ = t.meter.Int64ObservableGauge("sf2loki_pipeline_stalled",
		metric.WithDescription("1 after the pipeline's liveness guard fired (service.stall_timeout) until a push succeeds again."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(bit(t.Stalled()))
			return nil
		}))
	_, _ = t.meter.Int64ObservableGauge("sf2loki_salesforce_auth_failing",
		metric.WithDescription("1 while the Salesforce token endpoint refuses the credentials (a revoked app, a wrong key): no Salesforce source can run."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(bit(t.SalesforceAuthFailing() != ""))
			return nil
		}))
	_, _ = t.meter.Int64ObservableGauge("sf2loki_loki_rejecting",
		metric.WithDescription("1 while Loki refuses every entry (a wrong URL, auth, or no structured metadata): the data is held uncommitted."),
		metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
			o.Observe(bit(t.SinkRejecting() != ""))
			return nil
		}))
}

// MetricsHandler serves the Prometheus text exposition.
func (t *Recorder) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(t.registry, promhttp.HandlerOpts{})
}

// Counters returns event counts for /statusz.
func (t *Recorder) Counters() map[string]int64 {
	t.counterMu.Lock()
	defer t.counterMu.Unlock()
	out := make(map[string]int64, len(t.counterTotal))
	for k, v := range t.counterTotal {
		out[k] = v
	}
	return out
}

var leaseSpans = map[domain.EventKind]bool{
	domain.EventAcquired: true, domain.EventRenewedAfterFailure: true, domain.EventLost: true,
	domain.EventFenced: true, domain.EventReleased: true, domain.EventRecoveredLostAck: true,
}

// Observe implements domain.Observer (the single-org form: no shard label).
func (t *Recorder) Observe(e domain.Event) { t.observe(e, "", t.log) }

// ForShard returns the Observer of an org's lease keeper and committer: the
// same metrics, labelled shard=<org>, spans, and log lines that name the
// org ("" is t).
func (t *Recorder) ForShard(org string) domain.Observer {
	if org == "" {
		return t
	}
	log := t.log.With("org", org)
	return domain.ObserverFunc(func(e domain.Event) { t.observe(e, org, log) })
}

func (t *Recorder) observe(e domain.Event, shard string, log *slog.Logger) {
	ctx := context.Background()
	t.counterMu.Lock()
	t.counterTotal[string(e.Kind)]++
	t.counterMu.Unlock()
	attrs := []attribute.KeyValue{
		attribute.String("holder", e.Holder), attribute.String("instance", e.Instance),
		attribute.Int64("epoch", int64(e.Epoch)), attribute.String("backend", e.Backend),
		attribute.String("reason", e.Reason),
	}
	switch e.Kind {
	case domain.EventAcquired, domain.EventRenewed, domain.EventRenewedAfterFailure, domain.EventLost,
		domain.EventFenced, domain.EventReleased, domain.EventLostRace:
		add(ctx, t.transitions, 1, shard, attribute.String("transition", string(e.Kind)))
		if e.Kind == domain.EventAcquired && e.From != "" {
			add(ctx, t.acquisitions, 1, shard, attribute.String("from", string(e.From)))
		}
	case domain.EventRenewFailed:
		add(ctx, t.renewFails, 1, shard)
	case domain.EventCommitted, domain.EventClaimed:
		t.commit(ctx, shard, "ok", e)
	case domain.EventConflict:
		t.commit(ctx, shard, "conflict", e)
	case domain.EventCommitFenced:
		t.commit(ctx, shard, "fenced", e)
	case domain.EventCommitFailed:
		t.commit(ctx, shard, "error", e)
	case domain.EventPushFenced:
		add(ctx, t.pushesFenced, 1, shard)
	}
	if e.Kind == domain.EventRecoveredLostAck {
		if e.Holder == "" { // from the committer
			add(ctx, t.commits, 1, shard, attribute.String("outcome", "recovered"))
		} else {
			add(ctx, t.transitions, 1, shard, attribute.String("transition", string(e.Kind)))
		}
	}
	if leaseSpans[e.Kind] {
		_, span := t.tracer.Start(ctx, "lease."+string(e.Kind), trace.WithTimestamp(e.At), trace.WithAttributes(attrs...))
		if e.Err != nil {
			span.RecordError(e.Err)
			span.SetStatus(codes.Error, e.Err.Error())
		}
		span.End(trace.WithTimestamp(e.At.Add(e.Duration)))
	}
	logEvent(log, e)
}

func (t *Recorder) commit(ctx context.Context, shard, outcome string, e domain.Event) {
	add(ctx, t.commits, 1, shard, attribute.String("outcome", outcome))
	t.commitTime.Record(ctx, e.Duration.Seconds())
}

// logEvent writes an event's line: one per lease transition, worded for
// the person on call (docs/operations.md, "Logs").
func logEvent(log *slog.Logger, e domain.Event) {
	level := slog.LevelInfo
	switch e.Kind {
	case domain.EventRenewed, domain.EventCommitted:
		level = slog.LevelDebug
	case domain.EventLost:
		level = slog.LevelWarn
		if e.Graceful { // the released line that follows says it
			level = slog.LevelDebug
		}
	case domain.EventRenewFailed, domain.EventFenced, domain.EventRecoveredLostAck,
		domain.EventConflict, domain.EventCommitFenced, domain.EventCommitFailed, domain.EventPushFenced:
		level = slog.LevelWarn
	}
	msg := "sf2loki " + string(e.Kind)
	if e.Kind == domain.EventCommitFailed && errors.Is(e.Err, context.Canceled) {
		// The stop cancelled the write: planned, and nothing is lost (the
		// next leader resumes from the last commit).
		level, msg = slog.LevelInfo, "a checkpoint write was cancelled by the stop; the next leader resumes from the last commit"
	}
	switch e.Kind {
	case domain.EventObserved:
		msg = fmt.Sprintf("standby: the lease is held by %s (epoch %d)", e.LeaseHolder, e.Epoch)
	case domain.EventAcquired:
		msg = fmt.Sprintf("leading: acquired the lease (epoch %d)", e.Epoch)
	case domain.EventLost:
		msg = fmt.Sprintf("standby: lost the lease (epoch %d)", e.Epoch)
	case domain.EventFenced:
		msg = fmt.Sprintf("standby: stopped leading, no renewal landed before the self-fencing deadline (epoch %d)", e.Epoch)
	case domain.EventReleased:
		msg = fmt.Sprintf("released the lease (epoch %d): a standby can take over at once", e.Epoch)
	case domain.EventLostRace:
		msg = fmt.Sprintf("standby: another replica won the lease first (epoch %d)", e.Epoch)
	case domain.EventClaimed:
		msg = fmt.Sprintf("leading: the checkpoint document is stamped with epoch %d", e.Epoch)
	case domain.EventPushFenced:
		msg = "a push to Loki was stopped: this replica's lease fence closed"
	}
	args := []any{"event", string(e.Kind), "epoch", e.Epoch, "backend", e.Backend, "reason", e.Reason}
	if e.LeaseHolder != "" {
		args = append(args, "lease_holder", e.LeaseHolder)
	}
	if e.Holder != "" {
		args = append(args, "holder", e.Holder, "instance", e.Instance)
	}
	if e.Attempts > 0 {
		args = append(args, "attempts", e.Attempts)
	}
	if e.Err != nil {
		args = append(args, "error", e.Err.Error())
	}
	log.Log(context.Background(), level, msg, args...)
}

// instrumented counts every request to a store.
type instrumented struct {
	ports.ObjectCAS
	backend string
	t       *Recorder
}

// Instrument wraps a lease or checkpoint store so that every request to it
// counts in sf2loki_objectstore_requests (every label value from 0).
func (t *Recorder) Instrument(backend string, s ports.ObjectCAS) ports.ObjectCAS {
	for _, op := range storeOps {
		for _, o := range storeOutcomes {
			t.requests.Add(context.Background(), 0, metric.WithAttributes(attribute.String("backend", backend),
				attribute.String("op", op), attribute.String("outcome", o)))
		}
	}
	in := &instrumented{ObjectCAS: s, backend: backend, t: t}
	if w, ok := s.(ports.Watcher); ok {
		return &instrumentedWatcher{instrumented: in, w: w}
	}
	return in
}

// instrumentedWatcher keeps a store's watch visible through Instrument. A
// watch is one long-lived request per (re)connection inside the adapter;
// its reports are not requests and are not counted.
type instrumentedWatcher struct {
	*instrumented
	w ports.Watcher
}

// Watch implements ports.Watcher.
func (i *instrumentedWatcher) Watch(ctx context.Context) <-chan ports.Change { return i.w.Watch(ctx) }

func (i *instrumented) count(op string, err error) {
	outcome := "ok"
	switch {
	case err == nil:
	case errors.Is(err, ports.ErrNotFound):
		outcome = "not_found"
	case errors.Is(err, ports.ErrPreconditionFailed):
		outcome = "precondition_failed"
	case ports.IsTransient(err):
		outcome = "transient"
	default:
		outcome = "error"
	}
	i.t.requests.Add(context.Background(), 1, metric.WithAttributes(attribute.String("backend", i.backend),
		attribute.String("op", op), attribute.String("outcome", outcome)))
}

func (i *instrumented) Get(ctx context.Context) (ports.Object, error) {
	o, err := i.ObjectCAS.Get(ctx)
	i.count("get", err)
	return o, err
}

func (i *instrumented) Put(ctx context.Context, d []byte, p ports.Precondition) (ports.Version, error) {
	v, err := i.ObjectCAS.Put(ctx, d, p)
	i.count("put", err)
	return v, err
}

func (i *instrumented) Delete(ctx context.Context, p ports.Precondition) error {
	err := i.ObjectCAS.Delete(ctx, p)
	i.count("delete", err)
	return err
}
