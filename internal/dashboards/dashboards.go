// Package dashboards generates the Grafana dashboards under deploy/grafana
// and their README from one description. Only cmd/dashgen and this
// package's tests import it, so the Grafana SDK stays out of the daemon.
//
// Imports: the Grafana SDK and the standard library; nothing of sf2loki.
package dashboards

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/logs"
	"github.com/grafana/grafana-foundation-sdk/go/loki"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/stat"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
)

// Kind is a panel's visualisation.
type Kind string

// The visualisations the dashboards use.
const (
	TimeSeries Kind = "timeseries"
	Stat       Kind = "stat"
	Logs       Kind = "logs"
)

// Query is one target of a panel.
type Query struct {
	Expr   string
	Legend string
}

// Panel is one panel: its queries and, for a Loki panel, the label and line
// shapes of what sf2loki ships that it relies on.
type Panel struct {
	Title       string
	Description string
	Kind        Kind
	Unit        string
	Width       uint32 // of 24; 12 when zero
	Queries     []Query
	Relies      string
}

// Row is a titled group of panels.
type Row struct {
	Title  string
	Panels []Panel
}

// Variable is a template variable other than the datasource.
type Variable struct {
	Name, Label, Query, Doc string
}

// Dashboard is one dashboard file.
type Dashboard struct {
	File        string // under deploy/grafana
	UID         string
	Title       string
	Description string
	Datasource  string // plugin type of the datasource variable: prometheus or loki
	Variables   []Variable
	Rows        []Row
}

// DatasourceVar is the name of every dashboard's datasource variable; each
// panel and query refers to it, never to a fixed UID.
const DatasourceVar = "datasource"

// All is every dashboard, in the README's order.
func All() []Dashboard { return []Dashboard{health(), security()} }

func ptr[T any](v T) *T { return &v }

func dsRef(typ string) common.DataSourceRef {
	return common.DataSourceRef{Type: ptr(typ), Uid: ptr("${" + DatasourceVar + "}")}
}

// JSON renders one dashboard as Grafana's JSON model, indented, with a
// final newline.
func JSON(d Dashboard) ([]byte, error) {
	ds := dsRef(d.Datasource)
	// The v1 JSON model, which every Grafana imports and provisions; the
	// SDK's v2 resource needs Grafana 12 with its new dashboard API.
	//nolint:staticcheck // the v1 model on purpose, as said above
	b := dashboard.NewDashboardBuilder(d.Title).
		Uid(d.UID).
		Description(d.Description).
		Tags([]string{"sf2loki", "generated"}).
		Editable().
		Timezone("browser").
		Time("now-6h", "now").
		Refresh("1m").
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		WithVariable(dashboard.NewDatasourceVariableBuilder(DatasourceVar).
			Label(dsLabel(d.Datasource)).
			Type(d.Datasource))
	for _, v := range d.Variables {
		b = b.WithVariable(dashboard.NewQueryVariableBuilder(v.Name).
			Label(v.Label).
			Description(v.Doc).
			Datasource(ds).
			Query(dashboard.StringOrMap{String: ptr(v.Query)}).
			Definition(v.Query).
			Refresh(dashboard.VariableRefreshOnTimeRangeChanged).
			Sort(dashboard.VariableSortAlphabeticalAsc).
			Multi(true).
			IncludeAll(true).
			AllValue(".*"))
	}
	id := uint32(0)
	for _, r := range d.Rows {
		id++
		b = b.WithRow(dashboard.NewRowBuilder(r.Title).Id(id))
		for _, p := range r.Panels {
			id++
			b = b.WithPanel(panel(d.Datasource, ds, p, id))
		}
	}
	built, err := b.Build()
	if err != nil {
		return nil, fmt.Errorf("dashboard %s: %w", d.UID, err)
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(built); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func dsLabel(typ string) string {
	if typ == "loki" {
		return "Loki"
	}
	return "Prometheus"
}

func targets(typ string, ds common.DataSourceRef, qs []Query, logLines bool) []cog.Builder[variants.Dataquery] {
	var out []cog.Builder[variants.Dataquery]
	for i, q := range qs {
		ref := string(rune('A' + i))
		if typ == "loki" {
			t := loki.NewDataqueryBuilder().Datasource(ds).RefId(ref).Expr(q.Expr)
			if q.Legend != "" {
				t = t.LegendFormat(q.Legend)
			}
			if logLines {
				t = t.MaxLines(500)
			}
			out = append(out, t)
			continue
		}
		t := prometheus.NewDataqueryBuilder().Datasource(ds).RefId(ref).Expr(q.Expr).Range()
		if q.Legend != "" {
			t = t.LegendFormat(q.Legend)
		}
		out = append(out, t)
	}
	return out
}

func panel(typ string, ds common.DataSourceRef, p Panel, id uint32) cog.Builder[dashboard.Panel] {
	w := p.Width
	if w == 0 {
		w = 12
	}
	desc := p.Description
	if p.Relies != "" {
		desc += " Relies on: " + p.Relies
	}
	switch p.Kind {
	case Stat:
		b := stat.NewPanelBuilder().Id(id).Title(p.Title).Description(desc).Datasource(ds).Span(w).Height(8).
			ReduceOptions(common.NewReduceDataOptionsBuilder().Calcs([]string{"lastNotNull"})).
			Targets(targets(typ, ds, p.Queries, false))
		if p.Unit != "" {
			b = b.Unit(p.Unit)
		}
		return b
	case Logs:
		return logs.NewPanelBuilder().Id(id).Title(p.Title).Description(desc).Datasource(ds).Span(w).Height(10).
			ShowTime(true).WrapLogMessage(true).PrettifyLogMessage(false).EnableLogDetails(true).
			SortOrder(common.LogsSortOrderDescending).DedupStrategy(common.LogsDedupStrategyNone).
			Targets(targets(typ, ds, p.Queries, true))
	default:
		b := timeseries.NewPanelBuilder().Id(id).Title(p.Title).Description(desc).Datasource(ds).Span(w).Height(8).
			Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom)).
			Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending)).
			Targets(targets(typ, ds, p.Queries, false))
		if p.Unit != "" {
			b = b.Unit(p.Unit)
		}
		return b
	}
}

// Files is every generated file under deploy/grafana by name: each
// dashboard's JSON and README.md.
func Files() (map[string][]byte, error) {
	out := map[string][]byte{"README.md": []byte(README())}
	for _, d := range All() {
		j, err := JSON(d)
		if err != nil {
			return nil, err
		}
		out[d.File] = j
	}
	return out, nil
}

// README is deploy/grafana/README.md: each dashboard, its variables, and
// each panel with its queries.
func README() string {
	var b strings.Builder
	b.WriteString(`# Grafana dashboards

<!-- Generated by ` + "`make dashboards`" + ` (cmd/dashgen) from internal/dashboards: do not edit. -->

Import the JSON files into Grafana (Dashboards → New → Import) or provision them from this folder.
No datasource UID is fixed: each dashboard has a ` + "`datasource`" + ` variable of the right type
(Prometheus or Loki) that every panel and query uses, so pick yours at the top of the dashboard.

| File | Dashboard | Datasource |
|---|---|---|
`)
	for _, d := range All() {
		fmt.Fprintf(&b, "| [`%s`](%s) | %s | %s |\n", d.File, d.File, d.Title, dsLabel(d.Datasource))
	}
	for _, d := range All() {
		fmt.Fprintf(&b, "\n## %s\n\n`%s`, uid `%s`. %s\n\n", d.Title, d.File, d.UID, d.Description)
		b.WriteString("Variables:\n\n")
		fmt.Fprintf(&b, "- `%s`: the %s datasource.\n", DatasourceVar, dsLabel(d.Datasource))
		for _, v := range d.Variables {
			fmt.Fprintf(&b, "- `%s` (`%s`, All is `.*`): %s\n", v.Name, v.Query, v.Doc)
		}
		for _, r := range d.Rows {
			fmt.Fprintf(&b, "\n### %s\n", r.Title)
			for _, p := range r.Panels {
				fmt.Fprintf(&b, "\n**%s** (%s). %s\n", p.Title, p.Kind, p.Description)
				if p.Relies != "" {
					fmt.Fprintf(&b, "Relies on: %s\n", p.Relies)
				}
				b.WriteString("\n```" + lang(d.Datasource) + "\n")
				for _, q := range p.Queries {
					b.WriteString(q.Expr + "\n")
				}
				b.WriteString("```\n")
			}
		}
	}
	return b.String()
}

func lang(typ string) string {
	if typ == "loki" {
		return "logql"
	}
	return "promql"
}

// Exprs is every query of a dashboard, in order.
func Exprs(d Dashboard) []string {
	var out []string
	for _, r := range d.Rows {
		for _, p := range r.Panels {
			for _, q := range p.Queries {
				out = append(out, q.Expr)
			}
		}
	}
	return out
}

// Names is the sorted set of file names Files returns.
func Names() []string {
	names := []string{"README.md"}
	for _, d := range All() {
		names = append(names, d.File)
	}
	sort.Strings(names)
	return names
}
