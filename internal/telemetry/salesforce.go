package telemetry

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
)

// sfMetrics are the org-limit gauges and the ApexLog source's counters.
type sfMetrics struct {
	mu sync.Mutex
	// limits are the limits each shard's leader read last, by shard.
	limits       map[string]map[string]salesforce.Limit
	limitErrors  metric.Int64Counter
	apexSkipped  metric.Int64Counter
	apexDownload metric.Int64Counter
}

// salesforceInstruments registers the org-limit gauges (each shard's, while
// this replica leads it: the leader reads them) and the ApexLog counters.
func (t *Recorder) salesforceInstruments(m metric.Meter) error {
	var errs []error
	for _, g := range []struct {
		name, desc string
		v          func(salesforce.Limit) int64
	}{
		{"sf2loki_salesforce_limit_max", "The org's allocation of each limit (GET /limits: Max), as the shard's leader read it last (salesforce.limits).",
			func(l salesforce.Limit) int64 { return l.Max }},
		{"sf2loki_salesforce_limit_remaining", "What is left of each of the org's limits (GET /limits: Remaining), as the shard's leader read it last.",
			func(l salesforce.Limit) int64 { return l.Remaining }},
	} {
		_, err := m.Int64ObservableGauge(g.name, metric.WithDescription(g.desc),
			metric.WithInt64Callback(func(_ context.Context, o metric.Int64Observer) error {
				for _, s := range t.allShards() {
					if !s.leading() {
						continue
					}
					limits := t.SalesforceLimits(s.name)
					for _, name := range slices.Sorted(maps.Keys(limits)) {
						o.Observe(g.v(limits[name]), s.attrs(attribute.String("limit", name)))
					}
				}
				return nil
			}))
		errs = append(errs, err)
	}
	var err error
	t.sf.limitErrors, err = m.Int64Counter("sf2loki_salesforce_limits_poll_errors", metric.WithDescription("Reads of the org's limits that failed."))
	errs = append(errs, err)
	t.sf.apexSkipped, err = m.Int64Counter("sf2loki_apexlog_bodies_skipped",
		metric.WithDescription("Debug logs shipped as their metadata without their body, by reason: oversized (over max_body_bytes), not_found (deleted before the download)."))
	errs = append(errs, err)
	t.sf.apexDownload, err = m.Int64Counter("sf2loki_apexlog_download_errors",
		metric.WithDescription("Debug log body downloads that failed and stopped the poll at their log (the next poll tries it again)."))
	errs = append(errs, err)
	return errors.Join(errs...)
}

// SetSalesforceLimits records the limits a shard's leader read (nil: none,
// as on a standby).
func (t *Recorder) SetSalesforceLimits(shard string, limits map[string]salesforce.Limit) {
	t.sf.mu.Lock()
	defer t.sf.mu.Unlock()
	if t.sf.limits == nil {
		t.sf.limits = map[string]map[string]salesforce.Limit{}
	}
	if limits == nil {
		delete(t.sf.limits, shard)
		return
	}
	t.sf.limits[shard] = maps.Clone(limits)
}

// SalesforceLimits returns the limits shard's leader read last (nil: none).
func (t *Recorder) SalesforceLimits(shard string) map[string]salesforce.Limit {
	t.sf.mu.Lock()
	defer t.sf.mu.Unlock()
	return t.sf.limits[shard]
}

// SalesforceLimitsFailed counts a failed read of the org's limits.
func (t *Recorder) SalesforceLimitsFailed() { t.sf.limitErrors.Add(context.Background(), 1) }

// ApexLogBodySkipped counts a debug log shipped without its body.
func (t *Recorder) ApexLogBodySkipped(reason string) {
	t.sf.apexSkipped.Add(context.Background(), 1, metric.WithAttributes(attribute.String("reason", reason)))
}

// ApexLogDownloadFailed counts a failed body download.
func (t *Recorder) ApexLogDownloadFailed() { t.sf.apexDownload.Add(context.Background(), 1) }
