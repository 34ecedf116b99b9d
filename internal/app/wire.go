//go:build wireinject

package app

import (
	"context"

	"github.com/google/wire"

	"github.com/sf2loki/sf2loki/internal/config"
)

func buildNoop(ctx context.Context, cfg *config.Config, o Overrides, sh Shared) (*Shard, func(), error) {
	panic(wire.Build(commonSet, provideSoleLeader, noFence))
}

func buildFileLease(ctx context.Context, cfg *config.Config, o Overrides, sh Shared) (*Shard, func(), error) {
	panic(wire.Build(commonSet, keeperSet, provideFileLeaseStore))
}

func buildK8sLease(ctx context.Context, cfg *config.Config, o Overrides, sh Shared) (*Shard, func(), error) {
	panic(wire.Build(commonSet, keeperSet, provideK8sLeaseStore))
}

func buildS3Lease(ctx context.Context, cfg *config.Config, o Overrides, sh Shared) (*Shard, func(), error) {
	panic(wire.Build(commonSet, keeperSet, provideS3LeaseStore))
}

func buildGCSLease(ctx context.Context, cfg *config.Config, o Overrides, sh Shared) (*Shard, func(), error) {
	panic(wire.Build(commonSet, keeperSet, provideGCSLeaseStore))
}
