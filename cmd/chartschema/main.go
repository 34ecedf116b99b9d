// Command chartschema writes sf2loki's configuration schema into the Helm
// chart's values.schema.json, under config: the chart cannot read outside
// its directory, and Helm checks values against draft-07 schemas, so the
// draft 2020-12 schema of `sf2loki config schema` goes in converted ($defs
// become definitions). Every other value's schema is written by hand in
// that file and kept as it is. `make chart-files` runs it.
//
// Imports: internal/chartschema only.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/sf2loki/sf2loki/internal/chartschema"
)

func main() {
	cfg := flag.String("config-schema", "configs/sf2loki.schema.json", "sf2loki's configuration schema")
	chart := flag.String("chart-schema", "deploy/helm/sf2loki/values.schema.json", "the chart's values schema, rewritten in place")
	flag.Parse()
	if err := run(*cfg, *chart); err != nil {
		fmt.Fprintln(os.Stderr, "chartschema:", err)
		os.Exit(1)
	}
}

func run(cfgPath, chartPath string) error {
	cfgData, err := os.ReadFile(cfgPath)
	if err != nil {
		return err
	}
	chartData, err := os.ReadFile(chartPath)
	if err != nil {
		return err
	}
	out, err := chartschema.Merge(cfgData, chartData)
	if err != nil {
		return err
	}
	return os.WriteFile(chartPath, out, 0o644)
}
