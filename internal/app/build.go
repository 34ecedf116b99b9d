package app

import (
	"context"
	"fmt"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/telemetry"
)

// Build composes the daemon: the telemetry, logger, clock and Loki sink
// every shard shares; one graph per shard (an org: its lease, checkpoint
// document and pipeline), built by the wire injector of
// cfg.Coordinate.Type; and, when several shards share leases, the
// membership and the balance that spread them over the replicas. The
// cleanup closes what the graphs opened.
func Build(ctx context.Context, cfg *config.Config, o Overrides) (*Daemon, func(), error) {
	cfg = dryRunConfig(cfg)
	build, err := injector(cfg.Coordinate.Type)
	if err != nil {
		return nil, nil, err
	}
	log, clk := provideLogger(cfg, o), provideClock(o)
	ctx = WithLibraryLogger(ctx, log)
	announceDryRun(cfg, log)
	t, cleanup, err := telemetry.New(ctx, TelemetrySettings(cfg), log, o.Telemetry)
	if err != nil {
		return nil, nil, err
	}
	cleanups := []func(){cleanup}
	closeAll := func() {
		for i := len(cleanups) - 1; i >= 0; i-- {
			cleanups[i]()
		}
	}
	shardCfgs := cfg.Shards()
	older, oclean, err := olderLayouts(ctx, shardCfgs, o)
	if err != nil {
		closeAll()
		return nil, nil, err
	}
	cleanups = append(cleanups, oclean)
	sh := Shared{Clock: clk, Logger: log, Telemetry: t, Sink: sinkFor(cfg, o, log, t), Older: older}
	var balancer *domain.Balancer
	if len(shardCfgs) > 1 && cfg.Coordinate.Type != config.CoordinateNoop {
		b, bclean, err := newBalancer(ctx, cfg, o, clk, log, t)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		cleanups = append(cleanups, bclean)
		balancer = b
		sh.Gate = b.Gate
	}
	var shards []*Shard
	for _, sc := range shardCfgs {
		s, clean, err := build(ctx, sc, o, sh)
		if err != nil {
			closeAll()
			if sc.ShardName != "" {
				return nil, nil, fmt.Errorf("org %s: %w", sc.ShardName, err)
			}
			return nil, nil, err
		}
		cleanups = append(cleanups, clean)
		shards = append(shards, s)
		if balancer != nil {
			if k, ok := s.coord.(*domain.LeaseKeeper); ok {
				balancer.Add(domain.Shard{Name: sc.ShardName, Keeper: k})
			}
		}
	}
	return newDaemon(cfg, shards, balancer, t, log, clk), closeAll, nil
}

// injector is the wire injector of a coordinator type.
func injector(coordinate string) (func(context.Context, *config.Config, Overrides, Shared) (*Shard, func(), error), error) {
	switch coordinate {
	case config.CoordinateNoop:
		return buildNoop, nil
	case config.CoordinateFileLease:
		return buildFileLease, nil
	case config.CoordinateK8sLease:
		return buildK8sLease, nil
	case config.CoordinateS3Lease:
		return buildS3Lease, nil
	case config.CoordinateGCSLease:
		return buildGCSLease, nil
	}
	return nil, fmt.Errorf("coordinate.type %q is not one of noop, file_lease, k8s_lease, s3_lease, gcs_lease", coordinate)
}
