package doctor

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/sfrules"
)

// noTraceFlag is the traceflags check's warning.
const noTraceFlag = "no active TraceFlag: Salesforce writes no debug logs; set one in Setup → Debug Logs"

// checkApexLog runs the ApexLog source's checks when it is enabled:
// apexlog lists one log with the Tooling API (FAIL when it cannot),
// traceflags asks for a trace flag that has not expired (WARN when there is
// none: the org writes no debug log to ship). They SKIP when auth did not
// pass (a is nil).
func checkApexLog(ctx context.Context, cfg *config.Config, a *salesforce.Auth) []Check {
	if !cfg.Sources.ApexLog.Enabled {
		return nil
	}
	if a == nil {
		return []Check{{"apexlog", Skip, "the auth check did not pass"}, {"traceflags", Skip, "the auth check did not pass"}}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v := cfg.Salesforce.APIVersion
	if _, err := salesforce.ToolingQuery(ctx, a, v, "SELECT Id FROM ApexLog ORDER BY StartTime DESC LIMIT 1"); err != nil {
		return []Check{{"apexlog", Fail, fmt.Sprintf("listing ApexLog with the Tooling API: %s (%v)",
			app.SalesforceProblem(err, "the user needs API Enabled, and View All Data to read every user's debug logs"), err)},
			{"traceflags", Skip, "the apexlog check did not pass"}}
	}
	out := []Check{{"apexlog", Pass, "the Tooling API lists ApexLog"}}
	active, err := salesforce.ActiveTraceFlag(ctx, a, v, time.Now())
	switch {
	case err != nil:
		out = append(out, Check{"traceflags", Warn, fmt.Sprintf("cannot list TraceFlag with the Tooling API: %v", err)})
	case !active:
		out = append(out, Check{"traceflags", Warn, noTraceFlag})
	default:
		out = append(out, Check{"traceflags", Pass, "an active TraceFlag exists: Salesforce writes debug logs"})
	}
	return out
}

// checkLimits reads the org's limits once: WARN when under 20% of the
// daily API requests are left (every REST source pauses once they are
// spent), or when the limits cannot be read while salesforce.limits is
// enabled (its gauges would stay empty). It SKIPs when auth did not pass.
func checkLimits(ctx context.Context, cfg *config.Config, a *salesforce.Auth) []Check {
	enabled := cfg.Salesforce.Limits.Enabled
	switch {
	case cfg.Salesforce.AuthMode == "none":
		return nil
	case a == nil:
		return []Check{{"limits", Skip, "the auth check did not pass"}}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	limits, err := salesforce.Limits(ctx, a, cfg.Salesforce.APIVersion)
	switch {
	case err != nil && enabled:
		return []Check{{"limits", Warn, fmt.Sprintf("%s; until then the salesforce.limits gauges stay empty (%v)", app.LimitsProblem(err), err)}}
	case err != nil:
		return []Check{{"limits", Skip, fmt.Sprintf("salesforce.limits.enabled is false, and reading the org's limits failed: %v", err)}}
	}
	d, ok := limits[salesforce.DailyAPIRequests]
	switch {
	case !ok || d.Max <= 0:
		return []Check{{"limits", Pass, fmt.Sprintf("%d limits read; none is %s", len(limits), salesforce.DailyAPIRequests)}}
	case d.Remaining*5 < d.Max:
		return []Check{{"limits", Warn, fmt.Sprintf("%s: %d of %d left (%.1f%%, under 20%%): once they are spent Salesforce answers REQUEST_LIMIT_EXCEEDED "+
			"and every REST source pauses until the allocation recovers; lengthen poll intervals or find the integration spending them",
			salesforce.DailyAPIRequests, d.Remaining, d.Max, 100*float64(d.Remaining)/float64(d.Max))}}
	}
	return []Check{{"limits", Pass, fmt.Sprintf("%s: %d of %d left (%.1f%%)", salesforce.DailyAPIRequests, d.Remaining, d.Max, 100*float64(d.Remaining)/float64(d.Max))}}
}

// checkEventManager reads Event Manager's switches (RealTimeEventSettings,
// Metadata API readMetadata) for the subscribed Real-Time Event Monitoring
// streams: a row streaming:<topic> each, WARN when streaming is off (the
// subscription works and delivers nothing). Without the permission to read
// them, one SKIP row names the streams to check by hand. Topics that are
// not such streams (platform events, Change Data Capture) get no row.
func checkEventManager(ctx context.Context, cfg *config.Config, a *salesforce.Auth) []Check {
	if len(cfg.Sources.PubSub.Topics) == 0 || a == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	src, err := app.NewPubSubSource(cfg, a, clock.New(), nil, nil, nil)
	if err != nil {
		return nil // the pubsub check reports it
	}
	topics, _ := src.Topics(ctx) // a failed "*" listing is the pubsub check's row
	_ = src.Close()
	var streams []string
	pairs := map[string]sfrules.RTEMStream{}
	for _, t := range topics {
		if s, ok := sfrules.RTEMStreamOf(t); ok {
			streams = append(streams, s.Stream)
			pairs[t] = s
		}
	}
	if len(pairs) == 0 {
		return nil
	}
	on, err := salesforce.RealTimeEventSwitches(ctx, a, cfg.Salesforce.APIVersion)
	if err != nil {
		how := "sf2loki run warns when a stream stays behind its storage object"
		if errors.Is(err, salesforce.ErrNoMetadataAccess) {
			return []Check{{"streaming", Skip, fmt.Sprintf("cannot read Event Manager's switches: %v. Check by hand that Enable Streaming is on in Setup > Event Manager for %s; %s",
				err, strings.Join(streams, ", "), how)}}
		}
		return []Check{{"streaming", Warn, fmt.Sprintf("cannot read Event Manager's switches: %v. Check by hand that Enable Streaming is on in Setup > Event Manager for %s; %s",
			err, strings.Join(streams, ", "), how)}}
	}
	named := app.NamedTopics(cfg.Sources.PubSub.Topics)
	var out []Check
	for _, t := range slices.Sorted(maps.Keys(pairs)) {
		s := pairs[t]
		enabled, listed := on[s.Stream]
		switch {
		case !listed:
			out = append(out, Check{"streaming:" + t, Warn, app.NotListedText(s, named[t])})
		case !enabled:
			out = append(out, Check{"streaming:" + t, Warn, fmt.Sprintf("%s: streaming is off in Setup > Event Manager, so the subscription delivers nothing; %s", s.Stream, app.StreamingOffText(s, named[t]))})
		default:
			out = append(out, Check{"streaming:" + t, Pass, "streaming is on in Event Manager (" + s.Label + ")"})
		}
	}
	return out
}
