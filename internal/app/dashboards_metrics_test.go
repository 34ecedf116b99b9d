package app

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/dashboards"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// dashboardPendingMetrics are series the Grafana dashboards chart whose
// instruments are being added (none now): one missing from /metrics is
// logged, not failed; one that appears is logged as ready to leave the list.
var dashboardPendingMetrics = []string{}

var dashboardSeries = regexp.MustCompile(`\bsf2loki_[a-z0-9_]+\b`)

// seriesNames returns the series names of a Prometheus text exposition.
func seriesNames(text string) map[string]bool {
	names := map[string]bool{}
	for line := range strings.SplitSeq(text, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			names[line[:i]] = true
		}
	}
	return names
}

// TestDashboardMetricsExist runs a leader that ingests the synthetic source
// into a Loki that accepts everything, records the events the daemon counts
// only when they happen, scrapes /metrics, and fails naming every series a
// Prometheus panel of deploy/grafana queries that the daemon does not
// export.
func TestDashboardMetricsExist(t *testing.T) {
	used := map[string][]string{}
	for _, d := range dashboards.All() {
		if d.Datasource != "prometheus" {
			continue
		}
		for _, r := range d.Rows {
			for _, p := range r.Panels {
				for _, q := range p.Queries {
					for _, m := range dashboardSeries.FindAllString(q.Expr, -1) {
						if !slices.Contains(used[m], p.Title) {
							used[m] = append(used[m], p.Title)
						}
					}
				}
			}
		}
	}
	if len(used) < 20 {
		t.Fatalf("the dashboards query only %d sf2loki_ series: %v", len(used), used)
	}

	loki := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer loki.Close()
	cfg := testConfig(config.CoordinateS3Lease)
	cfg.Sources.Synthetic.Rate = 200
	cfg.Sink.Loki.URL = loki.URL + "/loki/api/v1/push"
	cfg.Sink.Loki.Batch.MaxWait = 20 * time.Millisecond
	cfg.Sink.Loki.Egress.DailyByteBudget = 1 << 40
	d, cleanup, err := Build(t.Context(), cfg, Overrides{LeaseStore: porttest.NewMemoryCAS("lease"), StateStore: porttest.NewMemoryCAS("state"), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	h := d.Handler()
	scrape := func() map[string]bool { _, body := get(t, h, "/metrics"); return seriesNames(body) }
	eventually(t, "a leader with accepted pushes and a checkpoint commit", func() bool {
		m := scrape()
		return m["sf2loki_loki_push_duration_seconds_bucket"] && m["sf2loki_checkpoint_commits_total"] && d.Telemetry().ShardsLed() == 1
	})
	tel := d.Telemetry()
	tel.SalesforceThrottled("query")
	tel.SalesforceAuthFailed("refused")
	tel.PubSubReconnect("/event/LoginEventStream", "unavailable")
	tel.Observe(domain.Event{Kind: domain.EventRenewFailed, At: time.Now()})
	tel.sinkStats.Load().Drop("bad_request", 1)
	tel.SetSalesforceLimits("", map[string]salesforce.Limit{"DailyApiRequests": {Max: 100000, Remaining: 99000}})

	// The pending series may take a moment once they exist.
	var have map[string]bool
	deadline := time.Now().Add(5 * time.Second)
	for {
		have = scrape()
		ready := true
		for _, c := range dashboardPendingMetrics {
			ready = ready && have[c]
		}
		if ready || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}

	for _, c := range dashboardPendingMetrics {
		if _, ok := used[c]; !ok {
			t.Errorf("dashboardPendingMetrics lists %s, which no panel queries", c)
		}
	}
	var missing []string
	for _, name := range slices.Sorted(maps.Keys(used)) {
		switch {
		case have[name] && slices.Contains(dashboardPendingMetrics, name):
			t.Logf("%s is exported now: take it off dashboardPendingMetrics", name)
		case have[name]:
		case slices.Contains(dashboardPendingMetrics, name):
			t.Logf("%s (panels %s) is not exported yet; it is on dashboardPendingMetrics", name, strings.Join(used[name], ", "))
		default:
			missing = append(missing, name+" (panels "+strings.Join(used[name], ", ")+")")
		}
	}
	if len(missing) > 0 {
		var names []string
		for n := range have {
			if strings.HasPrefix(n, "sf2loki_") {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		t.Fatalf("the dashboards query series /metrics does not export:\n  %s\nexported: %s", strings.Join(missing, "\n  "), strings.Join(names, " "))
	}
}
