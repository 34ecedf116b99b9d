package app

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/synthetic"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/telemetry"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// The counters of the transforms and of sampling reach /metrics, with the
// source and the shard (org) as labels.
func TestShapeCountersAreExported(t *testing.T) {
	for _, shard := range []string{"", "prod"} {
		cfg, _, err := config.Load(testenv.WriteConfig(t, `
sink: {loki: {url: http://loki:3100/loki/api/v1/push}}
sources:
  transform_salt: pepper
  synthetic:
    rate: 100000
    sample: {apievent: 0}
    transforms: [{action: drop_row, name: successes, match: {Status: Success}}, {action: hash, fields: [UserId]}]
`))
		if err != nil {
			t.Fatal(err)
		}
		cfg.ShardName = shard
		tel, cleanup, err := telemetry.New(t.Context(), TelemetrySettings(cfg), quiet(), telemetry.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer cleanup()
		sh, err := SourceShaper(cfg, "synthetic", tel)
		if err != nil {
			t.Fatal(err)
		}
		src, err := synthetic.New(synthetic.Config{Rate: 100000, Shaper: sh})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		per := map[string]int{} // entries by checkpoint key
		_ = src.Run(ctx, func(string) (string, bool) { return "", false }, func(e ports.Entry) error {
			if !e.CheckpointOnly {
				t.Errorf("an entry passed: %+v", e) // logins succeed (dropped), API events are sampled out
			}
			if per[e.Checkpoint.Key]++; per[e.Checkpoint.Key] == 5 {
				cancel()
			}
			return nil
		})
		_, metrics := get(t, tel.MetricsHandler(), "/metrics")
		label := ""
		if shard != "" {
			label = `,shard="prod"`
		}
		for _, want := range []string{
			fmt.Sprintf(`sf2loki_rows_filtered_total{rule="successes"%s,source="synthetic"} %d`, label, per["synthetic:LoginEvent"]),
			fmt.Sprintf(`sf2loki_entries_sampled_out_total{event_type="ApiEvent"%s,source="synthetic"} %d`, label, per["synthetic:ApiEvent"]),
		} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s:\n%s", want, grepLines(metrics, "sf2loki_"))
			}
		}
	}
}

func TestTransformSalt(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "salt")
	if err := os.WriteFile(file, []byte(" from-file \n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(dir, "empty")
	_ = os.WriteFile(empty, []byte("\n"), 0o600)
	hash := []config.Transform{{Action: "hash", Fields: []string{"UserId"}}}
	for _, tc := range []struct {
		src  config.Sources
		salt string
		err  string
	}{
		{config.Sources{TransformSalt: " value ", TransformSaltFile: file, PubSub: config.PubSub{Transforms: hash}}, "value", ""},
		{config.Sources{TransformSaltFile: file, PubSub: config.PubSub{Transforms: hash}}, "from-file", ""},
		{config.Sources{TransformSaltFile: filepath.Join(dir, "absent"), PubSub: config.PubSub{Transforms: hash}}, "", "sources.transform_salt_file: open"},
		{config.Sources{TransformSaltFile: empty, EventLogFile: config.EventLogFile{Transforms: hash}}, "", "is empty"},
		// No hash transform: the file is not read.
		{config.Sources{TransformSaltFile: filepath.Join(dir, "absent")}, "", ""},
	} {
		salt, err := transformSalt(tc.src)
		if salt != tc.salt || (err == nil) != (tc.err == "") || err != nil && !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%+v: salt %q, error %v; want %q, %q", tc.src, salt, err, tc.salt, tc.err)
		}
	}
}

// The salts are secrets (their key is tagged so): redacted from logs and
// errors, whether set or in a file, in every org.
func TestTransformSaltsAreRedacted(t *testing.T) {
	file := filepath.Join(t.TempDir(), "salt")
	if err := os.WriteFile(file, []byte("salt-from-a-file-0123456789\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Defaults()
	cfg.Sources.TransformSalt = "salt-in-the-config-0123456789"
	cfg.Orgs = []config.Org{{Name: "prod"}, {Name: "uat", Sources: config.Sources{TransformSaltFile: file}}}
	secrets := RedactSecrets(cfg)
	for _, want := range []string{"salt-in-the-config-0123456789", "salt-from-a-file-0123456789"} {
		if !slices.Contains(secrets, want) {
			t.Errorf("%s is not redacted", want)
		}
	}
}
