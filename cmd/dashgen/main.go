// Command dashgen writes the Grafana dashboards and their README into a
// folder (deploy/grafana by default): `make dashboards` runs it.
//
// Imports: internal/dashboards only.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sf2loki/sf2loki/internal/dashboards"
)

func main() {
	out := flag.String("out", "deploy/grafana", "the folder to write into")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "dashgen:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	files, err := dashboards.Files()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, name := range dashboards.Names() {
		if err := os.WriteFile(filepath.Join(dir, name), files[name], 0o644); err != nil {
			return err
		}
	}
	return nil
}
