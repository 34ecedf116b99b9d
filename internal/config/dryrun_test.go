package config_test

import (
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/config"
)

// TestDryRunNeedsNoLokiURL: a source needs sink.loki.url, unless
// sink.stdout.enabled or the DryRun option (run --dry-run) makes it a dry
// run; the option applies before validation.
func TestDryRunNeedsNoLokiURL(t *testing.T) {
	const yaml = "sources: {synthetic: {rate: 5}}\n"
	if msg := problems(t, yaml); !strings.Contains(msg, "sink.loki.url: required when a source is enabled") {
		t.Fatalf("without a dry run: %s", msg)
	}
	cfg, _, err := config.Load(write(t, yaml), config.DryRun)
	if err != nil || !cfg.Sink.Stdout.Enabled {
		t.Fatalf("with the DryRun option: %v (sink.stdout.enabled %v)", err, cfg != nil && cfg.Sink.Stdout.Enabled)
	}
	if _, _, err := config.Load(write(t, yaml+"sink: {stdout: {enabled: true}}\n")); err != nil {
		t.Fatalf("with sink.stdout.enabled: %v", err)
	}
}
