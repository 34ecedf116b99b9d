package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/loki"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/internal/adapters/synthetic"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/domain/shape"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/telemetry"
)

// pipelineWorkload runs the sources through the pipeline to the sink: the
// leader's work.
type pipelineWorkload struct {
	pipeline *domain.Pipeline
	sources  []ports.Source
	// prepare, if set, runs before the pipeline (an org's id for its
	// labels); it returns only once done or ctx ends.
	prepare func(ctx context.Context) error
	// egress governs the pushes (nil: no limits).
	egress *domain.Egress
	// limits polls the org's limits while the leader works (nil: off).
	limits func(ctx context.Context)
	// dryRun discards the commits (sink.stdout.enabled).
	dryRun bool
	// ages, if set, learns of each successful commit.
	ages *telemetry.CheckpointAges
}

// Run implements Workload: resume positions come from the claimed
// checkpoint document; commits go through the fenced committer.
func (w *pipelineWorkload) Run(ctx context.Context, lead Lead) error {
	defer w.runBeside(ctx)()
	if w.prepare != nil {
		if err := w.prepare(ctx); err != nil {
			return nil // ctx ended
		}
	}
	doc, err := lead.Committer.Load(ctx)
	if err != nil {
		return fmt.Errorf("load checkpoints: %w", err)
	}
	resume := func(key string) (string, bool) {
		v, ok := doc[key]
		return v, ok
	}
	commits := w.commits(lead)
	if w.ages != nil {
		commits = w.ages.Writer(commits)
	}
	return w.pipeline.Run(ctx, lead.Drain, commits, resume, w.sources)
}

// provideWorkload builds the pipeline when a source is enabled; otherwise
// the leader holds leadership and ingests nothing. The cleanup closes the
// sources' clients (the Pub/Sub connection).
func provideWorkload(cfg *config.Config, o Overrides, clk ports.Clock, log *slog.Logger, t *telemetry.Recorder, sink SharedSink, fence Fence) (Workload, func(), error) {
	if o.Workload != nil {
		if t != nil {
			t.AddLanes(cfg.ShardName, nil)
		}
		return o.Workload, func() {}, nil
	}
	w, err := newWorkload(cfg, clk, log, t, sink, fence)
	if err != nil {
		return nil, nil, err
	}
	cleanup := func() {}
	pw, ok := w.(*pipelineWorkload)
	if t != nil {
		if ok {
			t.AddLanes(cfg.ShardName, pw.pipeline.Held)
		} else {
			t.AddLanes(cfg.ShardName, nil)
		}
	}
	if ok {
		cleanup = func() {
			for _, s := range pw.sources {
				if c, ok := s.(io.Closer); ok {
					_ = c.Close()
				}
			}
		}
	}
	return w, cleanup, nil
}

// SharedSink builds, once, the Loki sink every shard pushes through.
type SharedSink func() (*loki.Sink, error)

// OnceSink is the SharedSink of cfg.
func OnceSink(cfg *config.Config, log *slog.Logger, t *telemetry.Recorder) SharedSink {
	return sync.OnceValues(func() (*loki.Sink, error) { return NewLokiSink(cfg.Sink.Loki, log, t) })
}

func newWorkload(cfg *config.Config, clk ports.Clock, log *slog.Logger, t *telemetry.Recorder, shared SharedSink, fence Fence) (Workload, error) {
	var sources []ports.Source
	if syn := cfg.Sources.Synthetic; syn.Rate > 0 {
		sh, err := SourceShaper(cfg, "synthetic", t)
		if err != nil {
			return nil, err
		}
		sc := synthetic.Config{Rate: float64(syn.Rate), EventTypes: syn.EventTypes, Logger: log, Shaper: sh}
		if t != nil {
			sc.GarbageCheckpoint = func() { t.CheckpointUnreadable("synthetic") }
		}
		s, err := synthetic.New(sc)
		if err != nil {
			return nil, err
		}
		sources = append(sources, s)
	}
	sfSources, auth, err := salesforceSources(cfg, clk, log, t)
	if err != nil {
		return nil, err
	}
	sources = append(sources, sfSources...)
	if len(sources) == 0 {
		return idle{}, nil
	}
	if shared == nil {
		shared = OnceSink(cfg, log, t)
	}
	base, err := shared()
	if err != nil {
		return nil, err
	}
	sink, prepare, err := OrgSink(cfg, base, auth, clk, log)
	if err != nil {
		return nil, err
	}
	var (
		produced func(string) func(ports.Entry)
		ages     *telemetry.CheckpointAges
		observer domain.Observer
	)
	if t != nil {
		observer = t.ForShard(cfg.ShardName)
		sink = t.LagSink(cfg.ShardName, sink, clk)
		produced = t.IngestCounter(cfg.ShardName, ingestSeed(cfg))
		names := make([]string, 0, len(sources))
		for _, s := range sources {
			names = append(names, s.Name())
		}
		ages = t.AddCheckpointAges(cfg.ShardName, names, clk)
	}
	realtime, bulk := laneConfigs(cfg)
	egress, err := domain.NewEgress(clk, egressConfig(cfg, base.Stats, log))
	if err != nil {
		return nil, err
	}
	p, err := domain.NewPipeline(sink, clk, domain.PipelineConfig{Realtime: realtime, Bulk: bulk, StallTimeout: cfg.EffectiveStallTimeout(),
		MaxInFlight: cfg.Sink.Loki.MaxInFlight, ReorderWindow: cfg.Sink.Loki.ReorderWindow, CommitInterval: cfg.EffectiveCommitInterval(),
		Egress: egress, Produced: produced, Fence: fence, Observer: observer, Logger: log})
	if err != nil {
		return nil, err
	}
	return &pipelineWorkload{pipeline: p, sources: sources, prepare: prepare, egress: egress, dryRun: cfg.Sink.Stdout.Enabled,
		limits: OrgLimitsPoller(cfg, auth, clk, log, t), ages: ages}, nil
}

// egressConfig is the shard's share of sink.loki.egress: all of it, or with
// scope deployment an equal share per org.
func egressConfig(cfg *config.Config, stats *loki.Stats, log *slog.Logger) domain.EgressConfig {
	e := cfg.Sink.Loki.Egress
	share := int64(1)
	if e.Scope == "deployment" && cfg.OrgCount > 1 {
		share = int64(cfg.OrgCount)
	}
	action := domain.BudgetPause
	if e.BudgetAction == "drop" {
		action = domain.BudgetDrop
	}
	return domain.EgressConfig{LinesPerSecond: float64(e.MaxLinesPerSecond) / float64(share), BytesPerSecond: float64(e.MaxBytesPerSecond) / float64(share),
		DailyBytes: ceilShare(e.DailyByteBudget, share), Action: action, Logger: log,
		OnDrop: func(entries int, _ int64) {
			if stats != nil {
				stats.Drop("budget", entries)
			}
		}}
}

// OrgSink is base with the shard's org labels: in the orgs form, each
// org's entries carry org, environment and sf_org_id. prepare, when not nil,
// learns the org's id before the first entry (salesforce.org_id unset).
func OrgSink(cfg *config.Config, base *loki.Sink, auth *salesforce.Auth, clk ports.Clock, log *slog.Logger) (sink ports.Sink, prepare func(context.Context) error, err error) {
	if cfg.ShardName == "" {
		return base, nil, nil
	}
	view, err := base.WithLabels(map[string]string{"org": cfg.ShardName, "environment": cfg.Salesforce.Environment})
	if err != nil {
		return nil, nil, err
	}
	switch {
	case cfg.Salesforce.OrgID != "":
		view.Set("sf_org_id", cfg.Salesforce.OrgID)
	case auth != nil:
		prepare = orgIDLabel(auth, view, clk, log)
	}
	return view, prepare, nil
}

// ceilShare is n split over share parts, rounded up: a budget smaller than
// the number of orgs stays a budget (0 would be none).
func ceilShare(n, share int64) int64 { return (n + share - 1) / share }

// orgIDLabel asks the org's id (once) and sets it as the view's sf_org_id
// label before the first entry, so that every copy of an entry carries the
// same labels; it retries every 10s while the org does not answer.
func orgIDLabel(auth *salesforce.Auth, view *loki.Labelled, clk ports.Clock, log *slog.Logger) func(context.Context) error {
	var done bool
	return func(ctx context.Context) error {
		for !done {
			id, err := auth.OrgID(ctx)
			if err == nil {
				view.Set("sf_org_id", id)
				done = true
				break
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			log.Warn("cannot learn the org's id for the sf_org_id label yet; retrying in 10s (or set salesforce.org_id)", "error", err)
			select {
			case <-clk.After(10 * time.Second):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	}
}

// ELFTypeSpecs indexes sources.eventlogfile.types by event type.
func ELFTypeSpecs(types []config.EventLogFileType) map[string]salesforce.ELFTypeSpec {
	out := make(map[string]salesforce.ELFTypeSpec, len(types))
	for _, t := range types {
		out[t.Name] = salesforce.ELFTypeSpec{Metadata: t.StructuredMetadataFields, Labels: t.Labels}
	}
	return out
}

// laneConfigs are the two lanes' bounds: sink.loki.batch for both, the
// realtime lane's bytes bounded by sources.pubsub.bridge_max_bytes when the
// Pub/Sub source sets it.
func laneConfigs(cfg *config.Config) (realtime, bulk domain.LaneConfig) {
	b := cfg.Sink.Loki.Batch
	bulk = domain.LaneConfig{QueueEntries: b.QueueEntries, QueueBytes: int64(b.QueueBytes), BatchEntries: b.MaxEntries,
		BatchBytes: int64(b.MaxBytes), BatchWait: b.MaxWait}
	realtime = bulk
	if ps := cfg.Sources.PubSub; len(ps.Topics) > 0 && ps.BridgeMaxBytes > 0 {
		realtime.QueueBytes = int64(ps.BridgeMaxBytes)
	}
	return realtime, bulk
}

// salesforceSources builds the Salesforce sources that are enabled, sharing
// one token source.
func salesforceSources(cfg *config.Config, clk ports.Clock, log *slog.Logger, t *telemetry.Recorder) ([]ports.Source, *salesforce.Auth, error) {
	objs, elf, ps := cfg.Sources.EventlogObjects.Objects, cfg.Sources.EventLogFile, cfg.Sources.PubSub
	if len(objs) == 0 && len(elf.EventTypes) == 0 && len(ps.Topics) == 0 && !cfg.Sources.ApexLog.Enabled {
		return nil, nil, nil
	}
	auth, err := NewSalesforceAuthObserved(cfg.ShardName, cfg.Salesforce, throttlePause(cfg), log, t)
	if err != nil {
		return nil, nil, err
	}
	var sources []ports.Source
	owners := overlapOwners(cfg.Sources, cfg.OrgSiblings)
	if len(elf.EventTypes) > 0 {
		sh, err := SourceShaper(cfg, "eventlogfile", t)
		if err != nil {
			return nil, nil, err
		}
		s, err := salesforce.NewELFSource(auth, cfg.Salesforce.APIVersion, salesforce.ELFSpec{Interval: elf.Interval, EventTypes: elf.EventTypes,
			PollInterval: elf.PollInterval, Lookback: elf.Lookback, SettleWindow: elf.SettleWindow, Concurrency: elf.Concurrency, Owners: owners,
			Shaper: sh, Exclude: elf.Exclude, Types: ELFTypeSpecs(elf.Types)}, clk, log)
		if err != nil {
			return nil, nil, err
		}
		if t != nil {
			s.GarbageCheckpoint = func() { t.CheckpointUnreadable("eventlogfile") }
		}
		sources = append(sources, s)
	}
	if len(objs) > 0 {
		specs := make([]salesforce.ObjectSpec, len(objs))
		for i, o := range objs {
			specs[i] = salesforce.ObjectSpec{Name: o.Name, TimestampField: o.TimestampField, PollInterval: o.PollInterval,
				Lookback: o.Lookback, Settle: o.Settle, MaxCatchupRecords: o.MaxCatchupRecords, BigObject: o.BigObject}
		}
		s, err := salesforce.NewSOQLSource(auth, cfg.Salesforce.APIVersion, specs, clk, log)
		if err != nil {
			return nil, nil, err
		}
		if s.Shaper, err = SourceShaper(cfg, "eventlog_objects", t); err != nil {
			return nil, nil, err
		}
		if t != nil {
			s.GarbageCheckpoint = func() { t.CheckpointUnreadable("eventlog_objects") }
		}
		sources = append(sources, s)
	}
	if len(ps.Topics) > 0 {
		sh, err := SourceShaper(cfg, "pubsub", t)
		if err != nil {
			return nil, nil, err
		}
		s, err := NewPubSubSource(cfg, auth, clk, log, owners, sh)
		if err != nil {
			return nil, nil, err
		}
		if t != nil {
			s.Hooks = pubsub.Hooks{
				Undecodable:       func(topic string) { t.PubSubEvent(cfg.ShardName, topic, "undecodable") },
				ReplayFallback:    func(topic string) { t.PubSubEvent(cfg.ShardName, topic, "replay_fallback") },
				Stalled:           func(topic string) { t.PubSubEvent(cfg.ShardName, topic, "stalled") },
				BitmapUndecodable: func(topic string) { t.PubSubEvent(cfg.ShardName, topic, "bitmap_undecodable") },
				Gap:               func(topic string) { t.PubSubEvent(cfg.ShardName, topic, "gap") },
				Reconnect:         func(topic, reason string) { t.PubSubReconnect(cfg.ShardName, topic, reason) },
				GarbageCheckpoint: func(string) { t.CheckpointUnreadable("pubsub") },
			}
		}
		sources = append(sources, watchStreams(s, cfg.ShardName, cfg.Sources.PubSub.Topics, auth, cfg.Salesforce.APIVersion, clk, log, t))
	}
	if cfg.Sources.ApexLog.Enabled {
		s, err := newApexLogSource(cfg, auth, clk, log, t)
		if err != nil {
			return nil, nil, err
		}
		sources = append(sources, s)
	}
	return sources, auth, nil
}

// throttlePause is how long the org's throttle gate stays closed after
// REQUEST_LIMIT_EXCEEDED: until the next poll of its most frequently
// polling REST source.
func throttlePause(cfg *config.Config) time.Duration {
	var pause time.Duration
	for _, o := range cfg.Sources.EventlogObjects.Objects {
		if pause == 0 || (o.PollInterval > 0 && o.PollInterval < pause) {
			pause = o.PollInterval
		}
	}
	if elf := cfg.Sources.EventLogFile; len(elf.EventTypes) > 0 && elf.PollInterval > 0 && (pause == 0 || elf.PollInterval < pause) {
		pause = elf.PollInterval
	}
	if a := cfg.Sources.ApexLog; a.Enabled && a.PollInterval > 0 && (pause == 0 || a.PollInterval < pause) {
		pause = a.PollInterval
	}
	return pause
}

// NewPubSubSource maps sources.pubsub onto the adapter; owners is the org's
// overlap registry (nil: no filtering), sh its transforms and sampling (nil:
// none).
func NewPubSubSource(cfg *config.Config, auth *salesforce.Auth, clk ports.Clock, log *slog.Logger, owners *domain.Owners, sh *shape.Shaper) (*pubsub.Source, error) {
	ps := cfg.Sources.PubSub
	return pubsub.New(auth, pubsub.Spec{Endpoint: ps.Endpoint, Plaintext: ps.Plaintext, Topics: ps.Topics, Include: ps.Include,
		Exclude: ps.Exclude, ReplayPreset: ps.ReplayPreset, NumRequested: ps.NumRequested, RediscoveryInterval: ps.RediscoveryInterval,
		StallTimeout: ps.StallTimeout, APIVersion: cfg.Salesforce.APIVersion, Owners: owners, Shaper: sh}, clk, log)
}

// NewLokiSink builds the sink; with t, its counters are exported.
func NewLokiSink(c config.LokiSink, log *slog.Logger, t *telemetry.Recorder) (*loki.Sink, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	token := strings.TrimSpace(c.AuthToken) // a blank token is not set
	if token == "" && c.AuthTokenFile != "" {
		b, err := os.ReadFile(c.AuthTokenFile)
		if err != nil {
			return nil, fmt.Errorf("sink.loki.auth_token_file: %w (the daemon's user must be able to read it)", err)
		}
		token = strings.TrimSpace(string(b))
		if token == "" {
			return nil, fmt.Errorf("sink.loki.auth_token_file %s is empty", c.AuthTokenFile)
		}
	}
	cfg := loki.Config{URL: c.URL, TenantID: c.TenantID, AuthToken: token, BasicAuthUser: c.BasicAuthUser,
		Encoding: c.Encoding, Uncompressed: c.Encoding == "json" && c.Compression == "none", Labels: c.Labels, StructuredMetadataFields: c.StructuredMetadataFields,
		MaxLineBytes: c.MaxLineBytes, Timeout: c.Timeout, Logger: log, Headers: c.Headers, TLS: loki.TLS(c.TLS)}
	if t == nil {
		return loki.New(cfg)
	}
	var record func(time.Duration)
	cfg.OnPush = func(d time.Duration) {
		if record != nil {
			record(d)
		}
	}
	sink, err := loki.New(cfg)
	if err != nil {
		return nil, err
	}
	record = t.RegisterSink(sink.Stats)
	return sink, nil
}

// ingestSeed are the event types cfg's sources are configured with (globs
// aside), by source.
func ingestSeed(cfg *config.Config) map[string][]string {
	out := map[string][]string{}
	if syn := cfg.Sources.Synthetic; syn.Rate > 0 {
		out["synthetic"] = syn.EventTypes
		if len(syn.EventTypes) == 0 {
			out["synthetic"] = []string{"LoginEvent", "ApiEvent"}
		}
	}
	for _, et := range cfg.Sources.EventLogFile.EventTypes {
		if !strings.ContainsAny(et, "*?[") {
			out["eventlogfile"] = append(out["eventlogfile"], et)
		}
	}
	for _, o := range cfg.Sources.EventlogObjects.Objects {
		out["eventlog_objects"] = append(out["eventlog_objects"], o.Name)
	}
	for _, topic := range cfg.Sources.PubSub.Topics {
		if !strings.ContainsAny(topic, "*?[") {
			out["pubsub"] = append(out["pubsub"], topic[strings.LastIndexByte(topic, '/')+1:])
		}
	}
	if cfg.Sources.ApexLog.Enabled {
		out["apexlog"] = []string{salesforce.ApexLogType}
	}
	return out
}
