package app

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// rulesFile holds the Prometheus rules shipped for sf2loki.
const rulesFile = "deploy/prometheus/sf2loki-rules.yaml"

// metricName matches a series name of sf2loki's own in a PromQL expression
// (recording rules' names, sf2loki:…, are not series of the daemon).
var metricName = regexp.MustCompile(`\bsf2loki_[a-z_]+\b`)

// ruleMetrics returns every sf2loki_ series name the rule expressions use,
// with the rules that use it.
func ruleMetrics(t *testing.T) map[string][]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), rulesFile))
	if err != nil {
		t.Fatal(err)
	}
	var file struct {
		Groups []struct {
			Name  string `yaml:"name"`
			Rules []struct {
				Alert  string `yaml:"alert"`
				Record string `yaml:"record"`
				Expr   string `yaml:"expr"`
			} `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &file); err != nil {
		t.Fatalf("%s: %v", rulesFile, err)
	}
	used := map[string][]string{}
	for _, g := range file.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			for _, m := range metricName.FindAllString(r.Expr, -1) {
				if !slices.Contains(used[m], name) {
					used[m] = append(used[m], name)
				}
			}
		}
	}
	if len(used) < 10 {
		t.Fatalf("%s uses only %d sf2loki_ metrics: %v", rulesFile, len(used), used)
	}
	return used
}

// exposed returns the series names of a Prometheus text exposition
// (histograms as their _bucket, _sum and _count series).
func exposed(text string) map[string]bool {
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

// busyLeaderSeries runs a leader that ingests the synthetic source into a
// Loki that accepts everything until its pushes, their lag and a checkpoint
// commit are counted, records the events the daemon counts only when they
// happen (a throttled call, a failed token mint, a reconnect, a renewal
// failure, a dropped entry, the org's limits), and returns a scrape of its
// /metrics as series names. The leader stops when the test ends.
func busyLeaderSeries(t *testing.T) (scrape func() map[string]bool) {
	t.Helper()
	loki := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	t.Cleanup(loki.Close)
	cfg := testenv.Config(config.CoordinateS3Lease)
	cfg.Sources.Synthetic.Rate = 200
	cfg.Sink.Loki.URL = loki.URL + "/loki/api/v1/push"
	cfg.Sink.Loki.Batch.MaxWait = 20 * time.Millisecond
	cfg.Sink.Loki.Egress.DailyByteBudget = 1 << 40
	d, cleanup, err := Build(t.Context(), cfg, Overrides{LeaseStore: porttest.NewMemoryCAS("lease"), StateStore: porttest.NewMemoryCAS("state"), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
		cleanup()
	})
	h := d.Handler()
	scrape = func() map[string]bool { _, body := get(t, h, "/metrics"); return exposed(body) }
	eventually(t, "a leader with accepted pushes, their lag and a checkpoint commit", func() bool {
		m := scrape()
		return m["sf2loki_loki_push_duration_seconds_bucket"] && m["sf2loki_ingest_lag_seconds_bucket"] && m["sf2loki_checkpoint_commits_total"] &&
			d.Telemetry().ShardsLed() == 1
	})
	tel := d.Telemetry()
	tel.SalesforceThrottled("", "query")
	tel.SalesforceAuthFailed("", "refused")
	tel.PubSubReconnect("", "/event/LoginEventStream", "unavailable")
	tel.Observe(domain.Event{Kind: domain.EventRenewFailed, At: time.Now()})
	tel.SinkStats().Drop("bad_request", 1)
	tel.SetSalesforceLimits("", map[string]salesforce.Limit{"DailyApiRequests": {Max: 100000, Remaining: 99000}})
	return scrape
}

// TestRuleMetricsExist runs a leader that ingests the synthetic source into
// a Loki that accepts everything, records the events the daemon counts only
// when they happen (a throttled call, a failed token mint, a reconnect, a
// dropped entry, the org's limits), scrapes /metrics, and fails naming every
// metric of the rules file it does not export.
func TestRuleMetricsExist(t *testing.T) {
	used := ruleMetrics(t)

	requireExported(t, rulesFile+" uses", "used by", used, busyLeaderSeries(t)())
}

// requireExported fails naming every metric in used (each with where it is
// used) that the scraped series have does not hold, and lists what
// /metrics exports.
func requireExported(t *testing.T, who, where string, used map[string][]string, have map[string]bool) {
	t.Helper()
	var missing []string
	for _, name := range slices.Sorted(maps.Keys(used)) {
		if !have[name] {
			missing = append(missing, name+" ("+where+" "+strings.Join(used[name], ", ")+")")
		}
	}
	if len(missing) == 0 {
		return
	}
	var names []string
	for n := range have {
		if strings.HasPrefix(n, "sf2loki_") {
			names = append(names, n)
		}
	}
	slices.Sort(names)
	t.Fatalf("%s metrics /metrics does not export:\n  %s\nexported: %s", who, strings.Join(missing, "\n  "), strings.Join(names, " "))
}
