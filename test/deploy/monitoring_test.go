package deploy

import (
	"bytes"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// The chart cannot read outside its directory, so it holds copies of the
// rules file and of the dashboards; make chart-files writes them.
const (
	rulesFile      = "deploy/prometheus/sf2loki-rules.yaml"
	chartRulesFile = "deploy/helm/sf2loki/files/sf2loki-rules.yaml"
	dashboardsDir  = "deploy/grafana"
	chartDashboard = "deploy/helm/sf2loki/dashboards"
)

// TestChartFilesInSync: the chart's copy of the rules file and of every
// dashboard is the file it copies, and it has no dashboard of its own.
func TestChartFilesInSync(t *testing.T) {
	root := testenv.RepoRoot(t)
	read := func(rel string) []byte {
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		return b
	}
	if src := read(rulesFile); len(src) == 0 || !bytes.Equal(src, read(chartRulesFile)) {
		t.Errorf("%s is not a copy of %s: run make chart-files", chartRulesFile, rulesFile)
	}
	jsons := func(rel string) []string {
		m, err := filepath.Glob(filepath.Join(root, rel, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range m {
			names = append(names, filepath.Base(p))
		}
		return names
	}
	src, dst := jsons(dashboardsDir), jsons(chartDashboard)
	if !slices.Equal(src, dst) {
		t.Errorf("the chart's dashboards %q are not those of %s %q: run make chart-files", dst, dashboardsDir, src)
	}
	for _, name := range src {
		if !bytes.Equal(read(filepath.Join(dashboardsDir, name)), read(filepath.Join(chartDashboard, name))) {
			t.Errorf("%s/%s differs from %s/%s: run make chart-files", chartDashboard, name, dashboardsDir, name)
		}
	}
}

// renderChart renders a chart directory with extra helm arguments.
func renderChart(t *testing.T, chart string, args ...string) []map[string]any {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t, "helm"), append([]string{"template", "sf2loki", chart, "--namespace", "sf2loki-mon"}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, out)
	}
	return decodeAll(t, "helm template", out)
}

// byKindName indexes rendered objects by kind/name.
func byKindName(objs []map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, o := range objs {
		out[toString(o["kind"])+"/"+toString(get(o, "metadata", "name"))] = o
	}
	return out
}

// copyChart copies the chart into a temporary directory.
func copyChart(t *testing.T) string {
	t.Helper()
	src := filepath.Join(testenv.RepoRoot(t), "deploy", "helm", "sf2loki")
	dst := filepath.Join(t.TempDir(), "sf2loki")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	return dst
}

// TestHelmMonitoring renders the chart with the ServiceMonitor, the
// PrometheusRule and the dashboards ConfigMap on (ci/monitoring-values.yaml)
// and checks them, and that none of them renders by default.
func TestHelmMonitoring(t *testing.T) {
	root := testenv.RepoRoot(t)
	chart := filepath.Join(root, "deploy", "helm", "sf2loki")
	values := filepath.Join(chart, "ci", "monitoring-values.yaml")

	t.Run("off by default", func(t *testing.T) {
		objs := byKindName(renderChart(t, chart, "-f", filepath.Join(chart, "ci", "s3-lease-values.yaml")))
		for _, k := range []string{"ServiceMonitor/sf2loki", "PrometheusRule/sf2loki", "ConfigMap/sf2loki-dashboards"} {
			if objs[k] != nil {
				t.Errorf("%s rendered with the default values", k)
			}
		}
	})

	t.Run("ServiceMonitor and PrometheusRule", func(t *testing.T) {
		objs := byKindName(renderChart(t, chart, "-f", values))
		svc, sm := objs["Service/sf2loki"], objs["ServiceMonitor/sf2loki"]
		if sm == nil || svc == nil {
			t.Fatalf("no ServiceMonitor or Service: %v", slices.Sorted(maps.Keys(objs)))
		}
		if get(sm, "apiVersion") != "monitoring.coreos.com/v1" || get(sm, "metadata", "labels", "release") != "kube-prometheus-stack" {
			t.Errorf("ServiceMonitor %v labels %v", get(sm, "apiVersion"), get(sm, "metadata", "labels"))
		}
		// It selects the Service, on one of its ports, in its namespace.
		sel, _ := get(sm, "spec", "selector", "matchLabels").(map[string]any)
		labels, _ := get(svc, "metadata", "labels").(map[string]any)
		if len(sel) == 0 {
			t.Fatal("the ServiceMonitor selects no labels")
		}
		for k, v := range sel {
			if labels[k] != v {
				t.Errorf("the ServiceMonitor selects %s=%v, the Service has %v", k, v, labels[k])
			}
		}
		port := get(sm, "spec", "endpoints", 0, "port")
		if get(svc, "spec", "ports", 0, "name") != port || get(sm, "spec", "endpoints", 0, "path") != "/metrics" {
			t.Errorf("the ServiceMonitor scrapes port %v path %v; the Service's port is %v", port, get(sm, "spec", "endpoints", 0, "path"),
				get(svc, "spec", "ports", 0, "name"))
		}
		if got := toString(get(sm, "spec", "namespaceSelector", "matchNames")); got != `["sf2loki-mon"]` {
			t.Errorf("the ServiceMonitor looks in namespaces %s", got)
		}

		pr := objs["PrometheusRule/sf2loki"]
		if pr == nil {
			t.Fatal("no PrometheusRule")
		}
		data, err := os.ReadFile(filepath.Join(root, rulesFile))
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]any
		if err := yaml.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(get(pr, "spec"), want) {
			t.Errorf("the PrometheusRule's spec is not %s:\n%v", rulesFile, get(pr, "spec"))
		}
		if groups, _ := get(pr, "spec", "groups").([]any); len(groups) < 2 {
			t.Errorf("the PrometheusRule has %d groups", len(groups))
		}
		// Prometheus' templates reach Prometheus as written, not run by helm.
		if s := toString(get(pr, "spec", "groups", 1, "rules", 0, "annotations", "summary")); !bytes.Contains([]byte(s), []byte("{{ $labels.job }}")) {
			t.Errorf("the first alert's summary lost its Prometheus template: %s", s)
		}
	})

	t.Run("dashboards", func(t *testing.T) {
		// The chart's own dashboards, if any, render into one ConfigMap.
		objs := byKindName(renderChart(t, chart, "-f", values))
		have, _ := filepath.Glob(filepath.Join(chart, "dashboards", "*.json"))
		if cm := objs["ConfigMap/sf2loki-dashboards"]; (cm != nil) != (len(have) > 0) {
			t.Errorf("dashboards ConfigMap rendered: %v, with %d dashboards in the chart", cm != nil, len(have))
		}
		// A chart with two dashboards: both in the ConfigMap, with the
		// sidecar's label.
		dir := copyChart(t)
		if err := os.RemoveAll(filepath.Join(dir, "dashboards")); err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(filepath.Join(dir, "dashboards"), 0o755); err != nil {
			t.Fatal(err)
		}
		dash := map[string]string{"a.json": `{"title": "A", "panels": []}`, "b.json": "{\n  \"title\": \"B {{ not helm }}\"\n}"}
		for name, body := range dash {
			if err := os.WriteFile(filepath.Join(dir, "dashboards", name), []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		cm := byKindName(renderChart(t, dir, "-f", values))["ConfigMap/sf2loki-dashboards"]
		if cm == nil {
			t.Fatal("no dashboards ConfigMap with two dashboards in the chart")
		}
		if get(cm, "metadata", "labels", "grafana_dashboard") != "1" || get(cm, "metadata", "annotations", "grafana_folder") != "sf2loki" {
			t.Errorf("dashboards ConfigMap metadata %v", get(cm, "metadata"))
		}
		for name, body := range dash {
			if got := get(cm, "data", name); got != body {
				t.Errorf("dashboards ConfigMap %s = %q, want %q", name, got, body)
			}
		}
		// Off: nothing, even with dashboards.
		if cm := byKindName(renderChart(t, dir, "-f", values, "--set", "dashboards.enabled=false"))["ConfigMap/sf2loki-dashboards"]; cm != nil {
			t.Error("dashboards ConfigMap rendered with dashboards.enabled=false")
		}
		// On, with none: nothing.
		if err := os.RemoveAll(filepath.Join(dir, "dashboards")); err != nil {
			t.Fatal(err)
		}
		if cm := byKindName(renderChart(t, dir, "-f", values))["ConfigMap/sf2loki-dashboards"]; cm != nil {
			t.Error("dashboards ConfigMap rendered without dashboards")
		}
	})
}
