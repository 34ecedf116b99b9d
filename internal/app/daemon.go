package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/file"
	"github.com/sf2loki/sf2loki/internal/buildinfo"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/telemetry"
)

// Lead is what the leader's work gets.
type Lead struct {
	Epoch     uint64
	Committer *domain.CheckpointCommitter
	// Drain stays live after the work's ctx ends, until the drain deadline
	// (service.shutdown_grace): use it for the final commits.
	Drain context.Context
}

// Workload is the leader's work (the pipeline). Run works until ctx ends,
// then drains, commits what it pushed (with lead.Drain) and returns. A
// commit error wrapping domain.ErrConflict or domain.ErrFenced demotes the
// work in place; any other error stops the daemon.
type Workload interface {
	Run(ctx context.Context, lead Lead) error
}

// idle is the workload until the pipeline exists: it holds leadership and
// does nothing.
type idle struct{}

func (idle) Run(ctx context.Context, _ Lead) error {
	<-ctx.Done()
	return nil
}

// NewLogger returns a slog logger writing level and format to w. A
// duration is written as Go's text (5m0s, 1.2s), in groups too, not as
// the JSON handler's integer of nanoseconds.
func NewLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv, ReplaceAttr: durationText}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// durationText writes a duration as its text (slog calls it for every
// attribute, those in groups included).
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// Daemon runs every shard's leadership and work, the shard balance when
// several shards share leases, and the health endpoint.
type Daemon struct {
	// WarnIdle makes Run warn, after its first line, when no shard has a
	// source (sf2loki run sets it; tests of other behaviour do not).
	WarnIdle  bool
	cfg       *config.Config
	shards    []*Shard
	balancer  *domain.Balancer // nil with one shard or without leases
	telemetry *telemetry.Recorder
	log       *slog.Logger
	clock     ports.Clock

	mu      sync.Mutex
	failure error // a non-HA error that stops the daemon
	stop    context.CancelCauseFunc
}

func newDaemon(cfg *config.Config, shards []*Shard, balancer *domain.Balancer, t *telemetry.Recorder, log *slog.Logger, clk ports.Clock) *Daemon {
	d := &Daemon{cfg: cfg, shards: shards, balancer: balancer, telemetry: t, log: log, clock: clk}
	for _, s := range shards {
		s.fail = d.fail
	}
	return d
}

// Shards returns the shards (one, named "", in the single-org form).
func (d *Daemon) Shards() []*Shard { return d.shards }

// Coordinator returns the first shard's coordinator (tests inspect it).
func (d *Daemon) Coordinator() Coordinator { return d.shards[0].coord }

// Committer returns the first shard's checkpoint committer.
func (d *Daemon) Committer() *domain.CheckpointCommitter { return d.shards[0].committer }

// Telemetry returns the daemon's telemetry.
func (d *Daemon) Telemetry() *telemetry.Recorder { return d.telemetry }

// ShardDir makes the directory of an org's state file (<dir>/shards/<org>/)
// when the configured file's directory exists: that one the operator
// provides, the shards' the daemon makes.
func ShardDir(configured, path string) error {
	if path == configured {
		return nil
	}
	if _, err := os.Stat(filepath.Dir(configured)); err != nil {
		return nil // the instance lock says what to do
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return fmt.Errorf("make the directory of %s: %w", path, err)
	}
	return nil
}

// Run serves health on service.health_addr and runs every shard's
// leadership (and the balance) until ctx ends (graceful stop: drain, final
// commits, release) or a non-HA error stops it.
func (d *Daemon) Run(ctx context.Context) (err error) {
	if d.cfg.Coordinate.Type == config.CoordinateNoop && d.cfg.State.Store == config.StoreFile && !d.cfg.Sink.Stdout.Enabled {
		for _, s := range d.shards {
			if err := ShardDir(d.cfg.State.File.Path, s.cfg.State.File.Path); err != nil {
				return err
			}
			lock, err := file.LockInstance(s.cfg.State.File.Path, 0)
			if err != nil {
				return err
			}
			defer func() { _ = lock.Release() }()
		}
	}
	ln, err := net.Listen("tcp", d.cfg.Service.HealthAddr)
	if err != nil {
		return fmt.Errorf("service.health_addr %s: %w", d.cfg.Service.HealthAddr, err)
	}
	srv := &http.Server{Handler: d.Handler(), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	cfgs := make([]*config.Config, len(d.shards))
	for i, s := range d.shards {
		cfgs[i] = s.cfg
	}
	mem := planMemory(os.Getenv, os.DirFS("/"), laneMemoryNeed(cfgs), debug.SetMemoryLimit)
	if len(d.shards) == 1 && d.shards[0].name == "" {
		d.log.Info("sf2loki starting", append([]any{"coordinate", d.cfg.Coordinate.Type, "state", d.shards[0].state.String(),
			"health_addr", ln.Addr().String()}, append(mem.attrs(), "version", buildinfo.Version())...)...)
	} else {
		orgs := make([]string, len(d.shards))
		for i, s := range d.shards {
			orgs[i] = s.name
		}
		d.log.Info("sf2loki starting", append([]any{"coordinate", d.cfg.Coordinate.Type, "orgs", orgs, "balanced", d.balancer != nil,
			"health_addr", ln.Addr().String()}, append(mem.attrs(), "version", buildinfo.Version())...)...)
	}
	if w := mem.warning(); w != "" {
		d.log.Warn(w, "container_limit", mem.Container, "lanes_need", mem.Need)
	}
	if w := NoSourceWarning(d); w != "" && d.WarnIdle {
		d.log.Warn(w)
	}
	// The work stops when watchStop has said why (it cancels rctx with
	// ctx's cause), or when a shard fails the daemon (d.stop).
	rctx, stop := context.WithCancelCause(context.WithoutCancel(ctx))
	exited := d.watchStop(ctx, stop)
	defer func() { exited(err) }()
	d.stop = stop
	defer stop(nil)
	var wg sync.WaitGroup
	errs := make([]error, len(d.shards))
	for i, s := range d.shards {
		wg.Go(func() { errs[i] = s.Run(rctx) })
	}
	if d.balancer != nil {
		wg.Go(func() { d.balancer.Run(rctx) })
	}
	wg.Wait()
	d.mu.Lock()
	failure := d.failure
	d.mu.Unlock()
	if failure != nil {
		return failure
	}
	return errors.Join(errs...)
}

// fail records a non-HA error and stops the daemon.
func (d *Daemon) fail(err error) {
	d.log.Error("stopping", "error", err)
	d.mu.Lock()
	if d.failure == nil {
		d.failure = err
	}
	d.mu.Unlock()
	if d.stop != nil {
		d.stop(err)
	}
}

// Handler serves /healthz, /readyz, /metrics and /statusz, and with
// service.pprof the runtime profiles under /debug/pprof/.
func (d *Daemon) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	// /readyz is 200 on the leader only (load balancers that must reach the
	// leader). /readyz?standby=ok is also 200 on a standby that observed the
	// lease within ttl, so it can take over: the Kubernetes readiness probe,
	// under which rollouts and disruption budgets keep working.
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		code, body := d.ready(r.URL.Query().Get("standby") == "ok")
		if code != http.StatusOK {
			w.WriteHeader(code)
		}
		_, _ = io.WriteString(w, body)
	})
	mux.Handle("/metrics", d.telemetry.MetricsHandler())
	mux.HandleFunc("/statusz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(d.Status())
	})
	if d.cfg.Service.Pprof {
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return mux
}

// ready is /readyz: with one shard its answer; with several, 200 when this
// replica leads a shard and every shard it leads is healthy, or (standbyOK)
// when every shard is ready, with one line per shard.
func (d *Daemon) ready(standbyOK bool) (int, string) {
	if len(d.shards) == 1 && d.shards[0].name == "" {
		return d.shards[0].ready(standbyOK)
	}
	var b strings.Builder
	leads, sick, all := false, false, true
	for _, s := range d.shards {
		code, text := s.ready(standbyOK)
		fmt.Fprintf(&b, "%s: %s", s.name, text)
		if s.leading() {
			leads = true
			sick = sick || code != http.StatusOK
		}
		all = all && code == http.StatusOK
	}
	if (leads && !sick) || all {
		return http.StatusOK, b.String()
	}
	return http.StatusServiceUnavailable, b.String()
}

// sinkFailingTooLong says, once every push to Loki has failed for
// service.unready_after_sink_failing, why the leader is not ready; "" before.
func (d *Shard) sinkFailingTooLong() string {
	limit, failing := d.cfg.Service.UnreadyAfterSinkFailing, d.telemetry.SinkFailingFor()
	if limit <= 0 || failing < limit {
		return ""
	}
	return fmt.Sprintf("leader: every push to Loki has failed for %s (service.unready_after_sink_failing %s); the entries are held and retried, nothing is committed past them\n",
		failing.Round(time.Second), limit)
}

// ready is one shard's readiness: 200 on the leader only (load balancers
// that must reach the leader); with standbyOK also 200 on a standby that
// observed the lease within ttl, so it can take over (the Kubernetes
// readiness probe, under which rollouts and disruption budgets keep
// working).
func (d *Shard) ready(standbyOK bool) (int, string) {
	st := d.coord.Status()
	rejecting, sfAuth := d.telemetry.SinkRejecting(), d.telemetry.SalesforceAuthFailingFor(d.name)
	switch {
	case d.leading() && sfAuth != "":
		return http.StatusServiceUnavailable, fmt.Sprintf("leader: salesforce auth failing (%s)\n", sfAuth)
	case d.leading() && rejecting != "":
		return http.StatusServiceUnavailable, fmt.Sprintf("leader: sink rejecting all entries (%s); holding the data uncommitted\n", rejecting)
	case d.leading() && d.sinkFailingTooLong() != "":
		return http.StatusServiceUnavailable, d.sinkFailingTooLong()
	case d.leading():
		// A spent budget is the configured behaviour, not a fault: the
		// leader stays ready and says so.
		if until := d.budgetPaused(); until != "" {
			return http.StatusOK, fmt.Sprintf("leader: budget paused until %s (sink.loki.egress.daily_byte_budget spent; nothing is pushed or committed until then)\n", until)
		}
		return http.StatusOK, "leader\n"
	case st.Blocked != "":
		return http.StatusServiceUnavailable, fmt.Sprintf("standby: blocked (%s): %s\n", st.Blocked, st.BlockedDetail)
	case !st.Decided:
		return http.StatusServiceUnavailable, "starting\n"
	case standbyOK && st.Role == domain.RoleStandby && !st.LastObserved.IsZero() && d.clock.Now().Sub(st.LastObserved) < st.TTL:
		return http.StatusOK, "standby\n"
	case standbyOK:
		return http.StatusServiceUnavailable, "standby: the lease has not been read successfully within ttl\n"
	}
	return http.StatusServiceUnavailable, "standby\n"
}

// StatusReport is the /statusz document.
type StatusReport struct {
	Role string `json:"role"`
	// Holder is this replica's holder id; LeaseHolder the lease's, as last
	// read or written ("" when released or absent).
	Holder            string `json:"holder"`
	Instance          string `json:"instance,omitempty"`
	Epoch             uint64 `json:"epoch"`
	LeaseHolder       string `json:"lease_holder"`
	LeaseEpoch        uint64 `json:"lease_epoch"`
	LeaseUnchangedFor string `json:"lease_unchanged_for,omitempty"`
	// LeaseWatch is how a standby learns of the lease's changes where its
	// store can push them (Kubernetes, a local file): "watching", or why it
	// polls meanwhile. Empty on a leader and on S3 and GCS (always polled).
	LeaseWatch        string           `json:"lease_watch,omitempty"`
	Blocked           string           `json:"blocked,omitempty"`
	BlockedDetail     string           `json:"blocked_detail,omitempty"`
	SinkRejecting     string           `json:"sink_rejecting,omitempty"`
	SalesforceAuth    string           `json:"salesforce_auth_failing,omitempty"`
	PipelineStalled   bool             `json:"pipeline_stalled,omitempty"`
	Coordinate        string           `json:"coordinate"`
	Lease             string           `json:"lease"`
	State             string           `json:"state"`
	LastRenewal       *time.Time       `json:"last_renewal,omitempty"`
	FenceDeadline     *time.Time       `json:"fence_deadline,omitempty"`
	CheckpointVersion string           `json:"checkpoint_version,omitempty"`
	Counters          map[string]int64 `json:"counters"`
	// ELFIntervals is the interval (Hourly or Daily) each EventLogFile
	// event type is read in.
	ELFIntervals map[string]string `json:"eventlogfile_intervals,omitempty"`
	// Egress is the daily byte budget's state, when one is set.
	Egress *EgressReport `json:"egress,omitempty"`
	// Org names the shard in Shards.
	Org string `json:"org,omitempty"`
	// Shards, with orgs configured, is each shard's report; Members the
	// live replicas and Balance this replica's share.
	Shards  []StatusReport `json:"shards,omitempty"`
	Members []string       `json:"members,omitempty"`
	Balance *BalanceReport `json:"balance,omitempty"`
}

// BalanceReport is this replica's share of the shards.
type BalanceReport struct {
	Leading  int      `json:"leading"`
	Floor    int      `json:"fair_share_min"`
	Ceil     int      `json:"fair_share_max"`
	Claiming []string `json:"claiming,omitempty"`
	Release  string   `json:"releasing,omitempty"`
}

// Status returns the /statusz document: with one shard, its report; with
// several, the replica's and each shard's.
func (d *Daemon) Status() StatusReport {
	if len(d.shards) == 1 && d.shards[0].name == "" {
		return d.shards[0].status()
	}
	r := StatusReport{Role: "standby", SinkRejecting: d.telemetry.SinkRejecting(), PipelineStalled: d.telemetry.Stalled(),
		SalesforceAuth: d.telemetry.SalesforceAuthFailing(), Coordinate: d.cfg.Coordinate.Type, Counters: d.telemetry.Counters()}
	for _, s := range d.shards {
		sr := s.status()
		sr.Org, sr.Counters, sr.Coordinate = s.name, nil, ""
		sr.SinkRejecting, sr.PipelineStalled, sr.SalesforceAuth = "", false, ""
		r.Holder, r.Instance = sr.Holder, ""
		if sr.Role == "leader" {
			r.Role = "leader"
		}
		r.Shards = append(r.Shards, sr)
	}
	if d.balancer != nil {
		r.Members = d.balancer.Members()
		p := d.balancer.Plan()
		r.Balance = &BalanceReport{Leading: p.Led, Floor: p.Floor, Ceil: p.Ceil, Claiming: p.Claim, Release: p.Release}
	}
	return r
}

// status is the shard's report.
func (d *Shard) status() StatusReport {
	st := d.coord.Status()
	r := StatusReport{Role: st.Role.String(), Holder: st.Holder, Instance: st.Instance, Epoch: st.Epoch,
		LeaseHolder: st.LeaseHolder, LeaseEpoch: st.LeaseEpoch, Blocked: st.Blocked, BlockedDetail: st.BlockedDetail,
		SinkRejecting: d.telemetry.SinkRejecting(), PipelineStalled: d.telemetry.Stalled(), SalesforceAuth: d.telemetry.SalesforceAuthFailing(),
		Coordinate: d.cfg.Coordinate.Type, Lease: st.Lease, State: d.state.String(),
		CheckpointVersion: string(d.committer.Version()), Counters: d.telemetry.Counters()}
	if st.LeaseUnchangedFor > 0 {
		r.LeaseUnchangedFor = st.LeaseUnchangedFor.Round(time.Millisecond).String()
	}
	switch {
	case st.Watching:
		r.LeaseWatch = "watching"
	case st.WatchBroken != "":
		r.LeaseWatch = st.WatchBroken
	}
	if !st.Decided {
		r.Role = "starting"
	}
	if !st.LastRenewal.IsZero() {
		lr, fd := st.LastRenewal.UTC(), st.FenceDeadline.UTC()
		r.LastRenewal, r.FenceDeadline = &lr, &fd
	}
	r.Lease = strings.TrimSpace(r.Lease)
	if pw, ok := d.workload.(*pipelineWorkload); ok {
		for _, src := range pw.sources {
			if elf, ok := src.(interface{ Intervals() map[string]string }); ok {
				r.ELFIntervals = elf.Intervals()
			}
		}
		if pw.egress != nil {
			e := pw.egress.Status()
			r.Egress = &EgressReport{Day: e.Day, UsedBytes: e.Used, BudgetBytes: e.Budget, Paused: e.Paused && d.leading()}
			if r.Egress.Paused {
				r.Egress.Until = e.Until.UTC().Format(time.RFC3339)
			}
		}
	}
	return r
}

// EgressReport is a shard's egress budget in /statusz.
type EgressReport struct {
	Day         string `json:"day"`
	UsedBytes   int64  `json:"used_bytes"`
	BudgetBytes int64  `json:"budget_bytes,omitempty"`
	Paused      bool   `json:"paused,omitempty"`
	Until       string `json:"paused_until,omitempty"`
}

// budgetPaused says, on the leader, until when the day's spent budget holds
// the pushes ("" when it does not).
func (d *Shard) budgetPaused() string {
	pw, ok := d.workload.(*pipelineWorkload)
	if !ok || pw.egress == nil {
		return ""
	}
	if st := pw.egress.Status(); st.Paused {
		return st.Until.UTC().Format(time.RFC3339)
	}
	return ""
}

// NoSourceWarning says, when no shard of d has a source to ingest, that
// the leader will hold its lease and ship nothing ("" otherwise).
func NoSourceWarning(d *Daemon) string {
	for _, s := range d.shards {
		if _, idle := s.workload.(idle); !idle {
			return ""
		}
	}
	return "no source is enabled: the leader will hold the lease and ship nothing; enable one under sources " +
		"(sources.eventlogfile, sources.pubsub, …: sf2loki config example lists them)"
}
