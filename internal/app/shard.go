package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/telemetry"
)

// Shard is one org's leadership and work: its lease (coordinator), its
// checkpoint document and the pipeline that ingests it. The single-org
// form is one shard named "".
type Shard struct {
	name      string
	cfg       *config.Config
	coord     Coordinator
	committer *domain.CheckpointCommitter
	state     StateStore
	workload  Workload
	telemetry *telemetry.Recorder
	gauges    *telemetry.Shard
	log       *slog.Logger
	clock     ports.Clock
	// fail stops the daemon with a non-HA error (set by the daemon).
	fail func(error)

	mu       sync.Mutex
	resigned map[string]time.Time // when a resignation of each kind was last logged at ERROR
	work     chan struct{}        // closed when the current leader work has returned
}

func newShard(cfg *config.Config, coord Coordinator, committer *domain.CheckpointCommitter, state StateStore,
	workload Workload, t *telemetry.Recorder, log *slog.Logger, clk ports.Clock) *Shard {
	if cfg.ShardName != "" {
		log = log.With("org", cfg.ShardName)
	}
	d := &Shard{name: cfg.ShardName, cfg: cfg, coord: coord, committer: committer, state: state, workload: workload, telemetry: t,
		log: log, clock: clk, resigned: map[string]time.Time{}, fail: func(error) {}}
	d.gauges = t.Shard(cfg.ShardName, d.leading, func() string { return coord.Status().Blocked })
	if pw, ok := workload.(*pipelineWorkload); ok && pw.egress != nil {
		d.gauges.SetEgress(pw.egress)
	}
	return d
}

// Name is the shard's org ("" in the single-org form).
func (d *Shard) Name() string { return d.name }

// leading reports whether this replica leads the shard with a valid fence
// right now.
func (d *Shard) leading() bool {
	return d.coord.CheckFence() == nil && d.coord.Status().Role == domain.RoleLeader
}

// Coordinator returns the shard's coordinator (tests inspect it).
func (d *Shard) Coordinator() Coordinator { return d.coord }

// Committer returns the shard's checkpoint committer.
func (d *Shard) Committer() *domain.CheckpointCommitter { return d.committer }

// Run runs the shard's leadership until ctx ends (graceful stop: drain,
// final commits, release).
func (d *Shard) Run(ctx context.Context) error {
	return d.coord.Run(ctx, domain.Callbacks{OnAcquire: d.onAcquire, OnLose: d.onLose})
}

func (d *Shard) onAcquire(ctx context.Context, l domain.Leadership) {
	d.gauges.SetLeader(true, l.Epoch)
	if d.telemetry.ShardsLed() == 1 { // this shard alone: no push of this replica is failing now
		d.telemetry.ForgetSinkFailure()
	}
	if d.cfg.Coordinate.Type == config.CoordinateNoop {
		d.log.Info("leading: a single instance, no lease")
	} // else the lease keeper's acquired line says it
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
func (d *Shard) lead(ctx context.Context, epoch uint64) {
	for ctx.Err() == nil {
		d.committer.Reset()
		if err := d.claim(ctx, epoch); err != nil {
			return
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
func (d *Shard) resign(ctx context.Context, kind, reason string, holdOff time.Duration) {
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
	d.telemetry.Resigned(d.name, kind)
	d.coord.Resign(reason, holdOff)
	<-ctx.Done()
}

// holdOff is how long a replica that resigned waits before contending
// again: one ttl, so a standby polling every renew_interval wins first.
func (d *Shard) holdOff() time.Duration {
	if ttl := LeaseConfig(d.cfg).TTL; ttl > 0 {
		return ttl
	}
	return 30 * time.Second
}

// retryAfterCorrupt is how long a replica that found the checkpoint
// document corrupt waits before looking again: one renew interval (a lease
// keeper's standby also refuses to contend while the document is corrupt).
func (d *Shard) retryAfterCorrupt() time.Duration {
	if r := LeaseConfig(d.cfg).RenewInterval; r > 0 {
		return r
	}
	return 10 * time.Second
}

// claim stamps the checkpoint document with epoch (and the org), retrying
// until it lands or leadership ends.
func (d *Shard) claim(ctx context.Context, epoch uint64) error {
	for {
		var err error
		if epoch > 0 {
			err = d.committer.Claim(ctx, epoch)
		} else {
			// A single instance claims no epoch; with orgs the document's
			// org is checked and stamped all the same.
			err = d.committer.Adopt(ctx)
		}
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
		case errors.Is(err, ports.ErrPermissionDenied), errors.Is(err, ports.ErrBucketNotFound), errors.Is(err, domain.ErrWrongOrg):
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
func (d *Shard) drainContext(ctx context.Context) (context.Context, context.CancelFunc) {
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

func (d *Shard) onLose(l domain.Loss) {
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
	d.gauges.SetLeader(false, 0)
}
