package app

import (
	"context"
	"fmt"

	"github.com/sf2loki/sf2loki/internal/config"
)

// Build composes the daemon for cfg.Coordinate.Type: one wire injector per
// coordinator; the state store is chosen inside from cfg.State.Store. The
// cleanup closes what the graph opened.
func Build(ctx context.Context, cfg *config.Config, o Overrides) (*Daemon, func(), error) {
	switch cfg.Coordinate.Type {
	case config.CoordinateNoop:
		return buildNoop(ctx, cfg, o)
	case config.CoordinateFileLease:
		return buildFileLease(ctx, cfg, o)
	case config.CoordinateK8sLease:
		return buildK8sLease(ctx, cfg, o)
	case config.CoordinateS3Lease:
		return buildS3Lease(ctx, cfg, o)
	case config.CoordinateGCSLease:
		return buildGCSLease(ctx, cfg, o)
	}
	return nil, nil, fmt.Errorf("coordinate.type %q is not one of noop, file_lease, k8s_lease, s3_lease, gcs_lease", cfg.Coordinate.Type)
}
