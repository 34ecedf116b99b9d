package app

import (
	"context"
	"errors"
	"log/slog"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/telemetry"
)

// OrgLimitsPoller is the leader's salesforce.limits poller: every
// poll_interval it reads the org's limits and hands them to the gauges,
// which show them while this replica leads the shard. nil when it is off,
// when no Salesforce source runs (auth is nil), or without telemetry.
func OrgLimitsPoller(cfg *config.Config, auth *salesforce.Auth, clk ports.Clock, log *slog.Logger, t *telemetry.Recorder) func(context.Context) {
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
					log.Warn(LimitsProblem(err)+"; retrying every poll_interval", "error", err, "poll_interval", lc.PollInterval)
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

// LimitsProblem says why the org's limits could not be read, naming the
// cause and what to do: an instance that cannot be reached (DNS, a refused
// connection, TLS, the proxy) is not a missing permission, and a refused
// token is neither.
func LimitsProblem(err error) string {
	var refused *salesforce.AuthError
	if cause, ok := ports.NetworkCause(err); ok {
		return "cannot reach Salesforce to read the org's limits: " + cause + ": " + salesforce.UnreachableFix
	}
	switch {
	case errors.As(err, &refused):
		return "cannot read the org's limits: Salesforce refuses the credentials (the token source logs why, once)"
	case errors.Is(err, ports.ErrCredentialsRefused):
		return "cannot read the org's limits: Salesforce does not accept the session"
	case errors.Is(err, ports.ErrPermissionDenied):
		return "cannot read the org's limits: the user needs View Setup and Configuration (salesforce.limits reads them)"
	}
	return "cannot read the org's limits"
}

// SalesforceProblem is the advice for a failed Salesforce call in a doctor
// row: the cause and where to look when the host could not be reached,
// else hint (the permission the call needs).
func SalesforceProblem(err error, hint string) string {
	if cause, ok := ports.NetworkCause(err); ok {
		return "cannot reach Salesforce: " + cause + ": " + salesforce.UnreachableFix
	}
	return hint
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
