package app

import (
	"context"
	"log/slog"
	"os"
	"sync"

	"github.com/sf2loki/sf2loki/internal/adapters/loki"
	"github.com/sf2loki/sf2loki/internal/adapters/memory"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/telemetry"
)

// A dry run (sink.stdout.enabled, run --dry-run) prints the entries the
// Loki sink would push and touches nothing another replica uses:
//   - the sink is the Loki sink in print mode (its label merging, metadata
//     promotion and line cap; no request);
//   - coordinate.type counts as noop: no lease is read, taken or released,
//     and there is no membership document;
//   - each shard's checkpoint document is a fresh one in memory
//     (memory.Store): the configured state store is never opened, and no
//     instance lock is taken on a state file;
//   - the pipeline's commits are discarded before they reach the committer;
//   - the health endpoint listens on a free loopback port, never on
//     service.health_addr (which the deployment may hold on this host).

// dryRunConfig is cfg as a dry run runs it: a single instance per shard
// with its health endpoint on a free loopback port. Other configurations
// are returned as they are.
func dryRunConfig(cfg *config.Config) *config.Config {
	if !cfg.Sink.Stdout.Enabled {
		return cfg
	}
	c := *cfg
	c.Coordinate.Type = config.CoordinateNoop
	c.Service.HealthAddr = "127.0.0.1:0"
	return &c
}

// announceDryRun says at start what a dry run does and does not do.
func announceDryRun(cfg *config.Config, log *slog.Logger) {
	if cfg.Sink.Stdout.Enabled {
		log.Info("dry run: printing entries to stdout, committing nothing",
			"checkpoints", "kept in memory from an empty document and never written; the configured state store is not opened",
			"leadership", "none taken: coordinate.type counts as noop, no lease is read or written",
			"health_addr", "a free loopback port")
	}
}

// sinkFor is the sink every shard pushes through: the Loki sink, or in
// a dry run the same sink printing to o.Stdout (os.Stdout when nil).
func sinkFor(cfg *config.Config, o Overrides, log *slog.Logger, t *telemetry.Recorder) SharedSink {
	if !cfg.Sink.Stdout.Enabled {
		return OnceSink(cfg, log, t)
	}
	out := o.Stdout
	if out == nil {
		out = os.Stdout
	}
	c := cfg.Sink.Loki
	return sync.OnceValues(func() (*loki.Sink, error) {
		return loki.New(loki.Config{Print: out, Encoding: c.Encoding, Labels: c.Labels, StructuredMetadataFields: c.StructuredMetadataFields,
			MaxLineBytes: c.MaxLineBytes, Logger: log})
	})
}

// dryRunState is a shard's checkpoint document in a dry run: in memory,
// empty at start.
func dryRunState(cfg *config.Config, t *telemetry.Recorder) StateStore {
	name := "dry-run"
	if cfg.ShardName != "" {
		name += "/" + cfg.ShardName
	}
	return StateStore{t.Instrument("memory", memory.New(name))}
}

// discardCommits is where a dry run's pipeline commits: nowhere.
type discardCommits struct{}

func (discardCommits) CommitMany(context.Context, map[string]string) error { return nil }

// commits is where the pipeline writes the positions the sink accepted:
// the leader's committer, or nowhere in a dry run.
func (w *pipelineWorkload) commits(lead Lead) domain.CheckpointWriter {
	if w.dryRun {
		return discardCommits{}
	}
	return lead.Committer
}

// DryRunOptions are the load options of run's flags.
func DryRunOptions(dryRun bool) []config.Option {
	if dryRun {
		return []config.Option{config.DryRun}
	}
	return nil
}
