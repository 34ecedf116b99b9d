package app

import (
	"regexp"
	"slices"
	"testing"

	"github.com/sf2loki/sf2loki/internal/dashboards"
)

var dashboardSeries = regexp.MustCompile(`\bsf2loki_[a-z0-9_]+\b`)

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

	requireExported(t, "the dashboards query", "panels", used, busyLeaderSeries(t)())
}
