//go:build wireinject

package app

import "github.com/google/wire"

// The provider sets of the injectors in wire.go. They live under the
// wireinject tag, in a file without injectors (whose declarations wire does
// not copy into wire_gen.go), so that the daemon does not link the wire
// package.
var commonSet = wire.NewSet(
	wire.FieldsOf(new(Shared), "Clock", "Logger", "Telemetry", "Sink", "Gate", "Older"), provideStateStore, provideCommitter, provideWorkload, newShard)

var keeperSet = wire.NewSet(
	provideKeeper, keeperCoordinator, keeperFence)
