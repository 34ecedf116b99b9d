package dashboards_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"

	"github.com/sf2loki/sf2loki/internal/dashboards"
)

const dir = "../../deploy/grafana"

// TestGeneratedArtefactsAreCurrent: the committed dashboards and README are
// what the generator writes, and nothing else is in the folder.
func TestGeneratedArtefactsAreCurrent(t *testing.T) {
	files, err := dashboards.Files()
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("%s/%s is stale: run make dashboards", dir, name)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok {
			t.Errorf("%s/%s is not generated: add it to internal/dashboards or remove it", dir, e.Name())
		}
	}
}

// pendingMetrics are series a panel charts whose instruments are being
// added to the daemon, not in docs/operations.md's table yet (none now).
// Keep it short, and remove a name once the table lists it.
var pendingMetrics = []string{}

var metricName = regexp.MustCompile(`sf2loki_[a-z0-9_]+`)

// documentedMetrics is every metric name in docs/operations.md's Metrics
// section: the names /metrics serves.
func documentedMetrics(t *testing.T) map[string]bool {
	t.Helper()
	doc, err := os.ReadFile("../../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	s := string(doc)
	start := strings.Index(s, "\n## Metrics\n")
	if start < 0 {
		t.Fatal("docs/operations.md has no Metrics section")
	}
	s = s[start+1:]
	if end := strings.Index(s, "\n## "); end >= 0 {
		s = s[:end]
	}
	names := map[string]bool{}
	for _, line := range strings.Split(s, "\n") {
		if !strings.HasPrefix(line, "| `sf2loki_") {
			continue
		}
		first := strings.SplitN(line, "|", 3)[1] // the Metric column
		for _, n := range metricName.FindAllString(first, -1) {
			names[n] = true
		}
	}
	if len(names) < 20 {
		t.Fatalf("read only %d metric names from docs/operations.md", len(names))
	}
	return names
}

// TestPrometheusQueriesUseExportedMetrics: every metric a Prometheus panel
// queries is one the daemon exports (docs/operations.md's table) or one of
// the short list being added; a histogram's _bucket, _sum and _count count
// as its name.
func TestPrometheusQueriesUseExportedMetrics(t *testing.T) {
	known := documentedMetrics(t)
	for _, n := range pendingMetrics {
		if known[n] {
			t.Logf("%s is documented now: remove it from pendingMetrics", n)
		}
		known[n] = true
	}
	used := map[string]bool{}
	for _, d := range dashboards.All() {
		if d.Datasource != "prometheus" {
			continue
		}
		for _, expr := range dashboards.Exprs(d) {
			names := metricName.FindAllString(expr, -1)
			if len(names) == 0 {
				t.Errorf("%s: %q queries no sf2loki metric", d.File, expr)
			}
			for _, n := range names {
				base := n
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(n, suffix); ok && known[b] {
						base = b
					}
				}
				if !known[base] {
					t.Errorf("%s: %q queries %s, which sf2loki does not export", d.File, expr, n)
				}
				used[base] = true
			}
		}
	}
	for _, n := range pendingMetrics {
		if !used[n] {
			t.Errorf("pendingMetrics lists %s, which no panel queries", n)
		}
	}
	// And the table is not stale: every documented name a panel queries is an
	// instrument the daemon's code registers, whose Prometheus name adds
	// _total to a counter and _seconds to a histogram or gauge in seconds.
	instruments := instrumentNames(t)
	for n := range used {
		if slices.Contains(pendingMetrics, n) {
			continue
		}
		base, _ := strings.CutSuffix(n, "_total")
		secs, _ := strings.CutSuffix(n, "_seconds")
		if !instruments[n] && !instruments[base] && !instruments[secs] {
			t.Errorf("a panel queries %s, which no instrument in internal/ registers", n)
		}
	}
}

// instrumentNames is every "sf2loki_…" string literal in the daemon's code.
func instrumentNames(t *testing.T) map[string]bool {
	t.Helper()
	lit := regexp.MustCompile(`"(sf2loki_[a-z0-9_]+)"`)
	names := map[string]bool{}
	err := filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "dashboards" || d.Name() == "testenv") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range lit.FindAllStringSubmatch(string(src), -1) {
			names[m[1]] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// The stream labels sf2loki may set (docs/pipeline.md, the Loki sink).
var streamLabels = []string{"job", "service_name", "source", "event_type", "sf_org_id", "environment", "org", "backfill"}

var selector = regexp.MustCompile(`\{([^}]*)\}`)
var matcher = regexp.MustCompile(`^\s*([a-z_]+)\s*(=~|!~|!=|=)\s*"[^"]*"\s*$`)

// TestLokiQueriesUseShippedLabels: every LogQL query selects streams by
// labels sf2loki sets, names a source, and reads the JSON line.
func TestLokiQueriesUseShippedLabels(t *testing.T) {
	for _, d := range dashboards.All() {
		if d.Datasource != "loki" {
			continue
		}
		for _, expr := range dashboards.Exprs(d) {
			m := selector.FindStringSubmatch(expr)
			if m == nil {
				t.Errorf("%s: %q has no stream selector", d.File, expr)
				continue
			}
			hasSource := false
			for _, part := range strings.Split(m[1], ",") {
				mm := matcher.FindStringSubmatch(part)
				if mm == nil {
					t.Errorf("%s: %q: matcher %q unreadable", d.File, expr, part)
					continue
				}
				if !slices.Contains(streamLabels, mm[1]) {
					t.Errorf("%s: %q selects on %s, which sf2loki never sets as a stream label", d.File, expr, mm[1])
				}
				hasSource = hasSource || mm[1] == "source"
			}
			if !hasSource {
				t.Errorf("%s: %q names no source", d.File, expr)
			}
			if !strings.Contains(expr, "| json") {
				t.Errorf("%s: %q does not read the JSON line", d.File, expr)
			}
		}
	}
}

// TestDashboardsParseAndUseTheDatasourceVariable: each committed file is a
// dashboard the SDK reads back; it has a datasource variable of its
// datasource's type, and every panel and every query refers to it, never to
// a fixed UID.
func TestDashboardsParseAndUseTheDatasourceVariable(t *testing.T) {
	plugins.RegisterDefaultPlugins()
	for _, d := range dashboards.All() {
		raw, err := os.ReadFile(filepath.Join(dir, d.File))
		if err != nil {
			t.Fatal(err)
		}
		var typed dashboard.Dashboard //nolint:staticcheck // the v1 model the files carry
		if err := json.Unmarshal(raw, &typed); err != nil {
			t.Fatalf("%s: %v", d.File, err)
		}
		if typed.Uid == nil || *typed.Uid != d.UID {
			t.Errorf("%s: uid %v, want %s", d.File, typed.Uid, d.UID)
		}
		var model struct {
			Templating struct {
				List []struct {
					Type, Name string
					Query      any
				}
			}
			Panels []map[string]any
		}
		if err := json.Unmarshal(raw, &model); err != nil {
			t.Fatalf("%s: %v", d.File, err)
		}
		found := false
		for _, v := range model.Templating.List {
			if v.Type == "datasource" && v.Name == dashboards.DatasourceVar && v.Query == d.Datasource {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no %s variable of type %s", d.File, dashboards.DatasourceVar, d.Datasource)
		}
		panels, queries := 0, 0
		for _, p := range model.Panels {
			if p["type"] == "row" {
				continue
			}
			panels++
			checkRef(t, d, p["title"], p["datasource"])
			targets, _ := p["targets"].([]any)
			if len(targets) == 0 {
				t.Errorf("%s: panel %v has no query", d.File, p["title"])
			}
			for _, q := range targets {
				queries++
				checkRef(t, d, p["title"], q.(map[string]any)["datasource"])
			}
		}
		if want := countPanels(d); panels != want {
			t.Errorf("%s: %d panels, want %d", d.File, panels, want)
		}
		if want := len(dashboards.Exprs(d)); queries != want {
			t.Errorf("%s: %d queries, want %d", d.File, queries, want)
		}
		// No datasource UID anywhere but the variable's.
		for _, m := range regexp.MustCompile(`"uid":\s*"([^"]*)"`).FindAllStringSubmatch(string(raw), -1) {
			if m[1] != "${"+dashboards.DatasourceVar+"}" && m[1] != d.UID {
				t.Errorf("%s: fixed uid %q", d.File, m[1])
			}
		}
	}
}

func checkRef(t *testing.T, d dashboards.Dashboard, title, ref any) {
	t.Helper()
	m, _ := ref.(map[string]any)
	if m == nil || m["uid"] != "${"+dashboards.DatasourceVar+"}" || m["type"] != d.Datasource {
		t.Errorf("%s: panel %v: datasource %v, want the %s variable", d.File, title, ref, dashboards.DatasourceVar)
	}
}

func countPanels(d dashboards.Dashboard) int {
	n := 0
	for _, r := range d.Rows {
		n += len(r.Panels)
	}
	return n
}

// TestREADMEShowsEveryPanelAndQuery: the README names every panel and
// carries every query as it is.
func TestREADMEShowsEveryPanelAndQuery(t *testing.T) {
	readme := dashboards.README()
	for _, d := range dashboards.All() {
		for _, r := range d.Rows {
			for _, p := range r.Panels {
				if !strings.Contains(readme, "**"+p.Title+"**") {
					t.Errorf("README lacks the panel %q", p.Title)
				}
				if d.Datasource == "loki" && p.Relies == "" {
					t.Errorf("%s: panel %q says nothing of the shapes it relies on", d.File, p.Title)
				}
				for _, q := range p.Queries {
					if !strings.Contains(readme, "\n"+q.Expr+"\n") {
						t.Errorf("README lacks the query %q", q.Expr)
					}
				}
			}
		}
	}
}
