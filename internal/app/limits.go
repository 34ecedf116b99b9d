package app

import (
	"context"
	"errors"
	"log/slog"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// orgLimitsPoller is the leader's salesforce.limits poller: every
// poll_interval it reads the org's limits and hands them to the gauges,
// which show them while this replica leads the shard. nil when it is off,
// when no Salesforce source runs (auth is nil), or without telemetry.
func orgLimitsPoller(cfg *config.Config, auth *salesforce.Auth, clk ports.Clock, log *slog.Logger, t *Telemetry) func(context.Context) {
	lc := cfg.Salesforce.Limits
	if !lc.Enabled || auth == nil || t == nil {
		return nil
	}
	shard, version := cfg.ShardName, cfg.Salesforce.APIVersion
	return func(ctx context.Context) {
		defer t.SetSalesforceLimits(shard, nil) // a standby shows none
		failing := false
		for {
			limits, err := salesforce.Limits(ctx, auth, version)
			switch {
			case ctx.Err() != nil:
				return
			case errors.Is(err, salesforce.ErrThrottled):
				log.Debug("salesforce limits not read: the org's API limit; the next poll tries again", "error", err)
			case err != nil:
				t.SalesforceLimitsFailed()
				if !failing {
					log.Warn("cannot read the org's limits (salesforce.limits needs View Setup and Configuration); retrying every poll_interval",
						"error", err, "poll_interval", lc.PollInterval)
				}
				failing = true
			default:
				if failing {
					log.Info("the org's limits are read again")
				}
				failing = false
				t.SetSalesforceLimits(shard, limits)
			}
			select {
			case <-ctx.Done():
				return
			case <-clk.After(lc.PollInterval):
			}
		}
	}
}

// runBeside starts what runs beside the pipeline while the leader works
// (the limits poller) and returns what stops it and waits for it.
func (w *pipelineWorkload) runBeside(ctx context.Context) (stop func()) {
	if w.limits == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		w.limits(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}
