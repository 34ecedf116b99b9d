package app

import (
	"log/slog"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/telemetry"
)

// newApexLogSource maps sources.apexlog onto the adapter, with its
// transforms and sampling; with t, its skipped bodies, failed downloads and
// unreadable checkpoints are counted.
func newApexLogSource(cfg *config.Config, auth *salesforce.Auth, clk ports.Clock, log *slog.Logger, t *telemetry.Recorder) (*salesforce.ApexLogSource, error) {
	a := cfg.Sources.ApexLog
	s, err := salesforce.NewApexLogSource(auth, cfg.Salesforce.APIVersion, salesforce.ApexLogSpec{PollInterval: a.PollInterval,
		Lookback: a.Lookback, Users: a.Users, MaxBodyBytes: int64(a.MaxBodyBytes)}, clk, log)
	if err != nil {
		return nil, err
	}
	if s.Shaper, err = SourceShaper(cfg, "apexlog", t); err != nil {
		return nil, err
	}
	if t != nil {
		s.GarbageCheckpoint = func() { t.CheckpointUnreadable("apexlog") }
		s.BodySkipped = t.ApexLogBodySkipped
		s.DownloadFailed = t.ApexLogDownloadFailed
	}
	return s, nil
}
