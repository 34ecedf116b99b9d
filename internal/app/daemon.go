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
	"strings"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/file"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
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

// NewLogger returns a slog logger writing level and format to w.
func NewLogger(w io.Writer, level, format string) *slog.Logger {
	var lv slog.Level
	_ = lv.UnmarshalText([]byte(level))
	opts := &slog.HandlerOptions{Level: lv}
	if format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// Daemon runs leadership, the leader's work and the health endpoint.
type Daemon struct {
	cfg       *config.Config
	coord     Coordinator
	committer *domain.CheckpointCommitter
	state     StateStore
	workload  Workload
	telemetry *Telemetry
	log       *slog.Logger
	clock     ports.Clock

	mu       sync.Mutex
	resigned map[string]time.Time // when a resignation of each kind was last logged at ERROR
	work     chan struct{}        // closed when the current leader work has returned
	failure  error                // a non-HA error that stops the daemon
	stop     context.CancelCauseFunc
}

func newDaemon(cfg *config.Config, coord Coordinator, committer *domain.CheckpointCommitter, state StateStore,
	workload Workload, t *Telemetry, log *slog.Logger, clk ports.Clock) *Daemon {
	d := &Daemon{cfg: cfg, coord: coord, committer: committer, state: state, workload: workload, telemetry: t, log: log, clock: clk,
		resigned: map[string]time.Time{}}
	t.SetFenceProbe(d.leading)
	t.SetBlockedProbe(func() string { return coord.Status().Blocked })
	return d
}

// leading reports whether this replica leads with a valid fence right now.
func (d *Daemon) leading() bool {
	return d.coord.CheckFence() == nil && d.coord.Status().Role == domain.RoleLeader
}

// Coordinator returns the daemon's coordinator (tests inspect it).
func (d *Daemon) Coordinator() Coordinator { return d.coord }

// Committer returns the daemon's checkpoint committer.
func (d *Daemon) Committer() *domain.CheckpointCommitter { return d.committer }

// Telemetry returns the daemon's telemetry.
func (d *Daemon) Telemetry() *Telemetry { return d.telemetry }

// Run serves health on service.health_addr and runs leadership until ctx
// ends (graceful stop: drain, final commits, release) or a non-HA error
// stops it.
func (d *Daemon) Run(ctx context.Context) error {
	if d.cfg.Coordinate.Type == config.CoordinateNoop && d.cfg.State.Store == config.StoreFile {
		lock, err := file.LockInstance(d.cfg.State.File.Path, 0)
		if err != nil {
			return err
		}
		defer func() { _ = lock.Release() }()
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
	d.log.Info("sf2loki starting", "coordinate", d.cfg.Coordinate.Type, "state", d.state.String(),
		"health_addr", ln.Addr().String(), "version", CurrentBuild().Version)
	rctx, stop := context.WithCancelCause(ctx)
	d.stop = stop
	defer stop(nil)
	err = d.coord.Run(rctx, domain.Callbacks{OnAcquire: d.onAcquire, OnLose: d.onLose})
	d.mu.Lock()
	failure := d.failure
	d.mu.Unlock()
	if failure != nil {
		return failure
	}
	return err
}

func (d *Daemon) onAcquire(ctx context.Context, l domain.Leadership) {
	d.telemetry.SetLeader(true, l.Epoch)
	d.log.Info("leading", "epoch", l.Epoch)
	done := make(chan struct{})
	d.mu.Lock()
	d.work = done
	d.mu.Unlock()
	go func() {
		defer close(done)
		d.lead(ctx, l.Epoch)
	}()
}

// lead claims the checkpoint document and runs the work until leadership
// ends. On a conflict (another writer changed the document) it drops the
// cached document, reloads and resumes from the stored positions at once.
// A corrupt document, or a stalled pipeline, resigns: the lease is
// released so that another replica can try, and this one says why.
func (d *Daemon) lead(ctx context.Context, epoch uint64) {
	for ctx.Err() == nil {
		d.committer.Reset()
		if epoch > 0 {
			if err := d.claim(ctx, epoch); err != nil {
				return
			}
		}
		drain, cancelDrain := d.drainContext(ctx)
		err := d.workload.Run(ctx, Lead{Epoch: epoch, Committer: d.committer, Drain: drain})
		cancelDrain()
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, domain.ErrConflict) || errors.Is(err, domain.ErrFenced):
			d.log.Warn("the checkpoint document changed under the leader; reloading it and resuming from the stored positions", "epoch", epoch, "error", err)
			if d.coord.CheckFence() != nil {
				<-ctx.Done()
				return
			}
		case errors.Is(err, domain.ErrStalled):
			d.telemetry.MarkStalled()
			d.resign(ctx, "stalled", err.Error(), d.holdOff())
			return
		case errors.Is(err, domain.ErrCorrupt):
			d.resign(ctx, "corrupt", err.Error(), d.retryAfterCorrupt())
			return
		case err != nil:
			d.fail(fmt.Errorf("leader work failed: %w", err))
			return
		default:
			<-ctx.Done()
			return
		}
	}
}

// resign gives leadership up for reason and waits for the term to end. It
// logs at ERROR once per kind of reason in ten minutes (a single instance
// that finds the same corrupt document at every term says so once), at
// WARN otherwise.
func (d *Daemon) resign(ctx context.Context, kind, reason string, holdOff time.Duration) {
	d.mu.Lock()
	now := d.clock.Now()
	loud := d.resigned[kind].IsZero() || now.Sub(d.resigned[kind]) >= 10*time.Minute
	if loud {
		d.resigned[kind] = now
	}
	d.mu.Unlock()
	level := slog.LevelWarn
	if loud {
		level = slog.LevelError
	}
	d.log.Log(ctx, level, "the leader cannot make progress; resigning so that another replica can try", "reason", reason, "hold_off", holdOff)
	d.coord.Resign(reason, holdOff)
	<-ctx.Done()
}

// holdOff is how long a replica that resigned waits before contending
// again: one ttl, so a standby polling every renew_interval wins first.
func (d *Daemon) holdOff() time.Duration {
	if ttl := leaseConfig(d.cfg).TTL; ttl > 0 {
		return ttl
	}
	return 30 * time.Second
}

// retryAfterCorrupt is how long a replica that found the checkpoint
// document corrupt waits before looking again: one renew interval (a lease
// keeper's standby also refuses to contend while the document is corrupt).
func (d *Daemon) retryAfterCorrupt() time.Duration {
	if r := leaseConfig(d.cfg).RenewInterval; r > 0 {
		return r
	}
	return 10 * time.Second
}

// claim stamps the checkpoint document with epoch, retrying until it lands
// or leadership ends.
func (d *Daemon) claim(ctx context.Context, epoch uint64) error {
	for {
		err := d.committer.Claim(ctx, epoch)
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return ctx.Err()
		case errors.Is(err, domain.ErrFenced):
			d.log.Warn("cannot claim the checkpoint document; waiting for leadership to end", "epoch", epoch, "error", err)
			<-ctx.Done()
			return err
		case errors.Is(err, domain.ErrCorrupt):
			d.resign(ctx, "corrupt", err.Error(), d.retryAfterCorrupt())
			return err
		case errors.Is(err, ports.ErrPermissionDenied), errors.Is(err, ports.ErrBucketNotFound):
			d.fail(fmt.Errorf("claim the checkpoint document: %w", err))
			return err
		}
		d.log.Warn("claim of the checkpoint document failed; retrying", "epoch", epoch, "error", err)
		select {
		case <-d.clock.After(time.Second):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// drainContext stays live until shutdown_grace after ctx ends.
func (d *Daemon) drainContext(ctx context.Context) (context.Context, context.CancelFunc) {
	drain, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-ctx.Done():
		case <-drain.Done():
			return
		}
		select {
		case <-d.clock.After(d.cfg.Service.ShutdownGrace):
			cancel()
		case <-drain.Done():
		}
	}()
	return drain, cancel
}

func (d *Daemon) onLose(l domain.Loss) {
	d.mu.Lock()
	done := d.work
	d.mu.Unlock()
	if done != nil {
		select {
		case <-done:
		case <-d.clock.After(d.cfg.Service.ShutdownGrace + time.Second):
			d.log.Warn("leader work did not stop within service.shutdown_grace", "epoch", l.Epoch)
		}
	}
	d.committer.Reset()
	d.telemetry.SetLeader(false, 0)
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

// Handler serves /healthz, /readyz, /metrics and /statusz.
func (d *Daemon) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	// /readyz is 200 on the leader only (load balancers that must reach the
	// leader). /readyz?standby=ok is also 200 on a standby that observed the
	// lease within ttl, so it can take over: the Kubernetes readiness probe,
	// under which rollouts and disruption budgets keep working.
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		st := d.coord.Status()
		standbyOK := r.URL.Query().Get("standby") == "ok"
		rejecting, sfAuth := d.telemetry.SinkRejecting(), d.telemetry.SalesforceAuthFailing()
		switch {
		case d.leading() && sfAuth != "":
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "leader: salesforce auth failing (%s)\n", sfAuth)
		case d.leading() && rejecting != "":
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "leader: sink rejecting all entries (%s); holding the data uncommitted\n", rejecting)
		case d.leading():
			_, _ = io.WriteString(w, "leader\n")
		case st.Blocked != "":
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = fmt.Fprintf(w, "standby: blocked (%s): %s\n", st.Blocked, st.BlockedDetail)
		case !st.Decided:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "starting\n")
		case standbyOK && st.Role == domain.RoleStandby && !st.LastObserved.IsZero() && d.clock.Now().Sub(st.LastObserved) < st.TTL:
			_, _ = io.WriteString(w, "standby\n")
		case standbyOK:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "standby: the lease has not been read successfully within ttl\n")
		default:
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = io.WriteString(w, "standby\n")
		}
	})
	mux.Handle("/metrics", d.telemetry.MetricsHandler())
	mux.HandleFunc("/statusz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		_ = enc.Encode(d.Status())
	})
	return mux
}

// StatusReport is the /statusz document.
type StatusReport struct {
	Role string `json:"role"`
	// Holder is this replica's holder id; LeaseHolder the lease's, as last
	// read or written ("" when released or absent).
	Holder            string           `json:"holder"`
	Instance          string           `json:"instance,omitempty"`
	Epoch             uint64           `json:"epoch"`
	LeaseHolder       string           `json:"lease_holder"`
	LeaseEpoch        uint64           `json:"lease_epoch"`
	LeaseUnchangedFor string           `json:"lease_unchanged_for,omitempty"`
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
}

// Status returns the /statusz document.
func (d *Daemon) Status() StatusReport {
	st := d.coord.Status()
	r := StatusReport{Role: st.Role.String(), Holder: st.Holder, Instance: st.Instance, Epoch: st.Epoch,
		LeaseHolder: st.LeaseHolder, LeaseEpoch: st.LeaseEpoch, Blocked: st.Blocked, BlockedDetail: st.BlockedDetail,
		SinkRejecting: d.telemetry.SinkRejecting(), PipelineStalled: d.telemetry.Stalled(), SalesforceAuth: d.telemetry.SalesforceAuthFailing(),
		Coordinate: d.cfg.Coordinate.Type, Lease: st.Lease, State: d.state.String(),
		CheckpointVersion: string(d.committer.Version()), Counters: d.telemetry.Counters()}
	if st.LeaseUnchangedFor > 0 {
		r.LeaseUnchangedFor = st.LeaseUnchangedFor.Round(time.Millisecond).String()
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
	}
	return r
}
