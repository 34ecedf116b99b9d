package app

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/synthetic"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/telemetry"
)

// The counters of the transforms and of sampling reach /metrics, with the
// source and the shard (org) as labels.
func TestShapeCountersAreExported(t *testing.T) {
	for _, shard := range []string{"", "prod"} {
		cfg, _, err := loadFile(t, `
sink: {loki: {url: http://loki:3100/loki/api/v1/push}}
sources:
  transform_salt: pepper
  synthetic:
    rate: 100000
    sample: {apievent: 0}
    transforms: [{action: drop_row, name: successes, match: {Status: Success}}, {action: hash, fields: [UserId]}]
`)
		if err != nil {
			t.Fatal(err)
		}
		cfg.ShardName = shard
		tel, cleanup, err := telemetry.New(t.Context(), cfg, quiet(), telemetry.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer cleanup()
		sh, err := sourceShaper(cfg, "synthetic", tel)
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

func TestDoctorChecksTheTransforms(t *testing.T) {
	dir := t.TempDir()
	base := "state: {store: file, file: {path: " + filepath.Join(dir, "state.json") + "}}\n"
	row := func(yaml string) (Check, DoctorReport) {
		t.Helper()
		r := Doctor(t.Context(), writeConfig(t, base+yaml))
		for _, c := range r.Checks {
			if c.Name == "transforms" {
				return c, r
			}
		}
		t.Fatalf("no transforms row: %+v", r.Checks)
		return Check{}, r
	}
	if c, _ := row(""); c.Status != Skip {
		t.Fatalf("no transforms: %+v", c)
	}
	c, r := row("sources: {pubsub: {transforms: [{action: hash, fields: [UserId]}]}}\n")
	if c.Status != Warn || !strings.Contains(c.Detail, config.UnsaltedHashAdvice) {
		t.Fatalf("unsalted: %+v", c)
	}
	for _, other := range r.Checks {
		if other.Name == "config" && strings.Contains(other.Detail, config.UnsaltedHashAdvice) {
			t.Fatalf("the warning is printed twice: %+v", r.Checks)
		}
	}
	if c, r := row("sources: {transform_salt_file: " + filepath.Join(dir, "absent") + ", eventlogfile: {transforms: [{action: hash, fields: [USER_ID]}]}}\n"); c.Status != Fail ||
		!strings.Contains(c.Detail, "transform_salt_file") || r.ExitCode != 1 {
		t.Fatalf("unreadable salt file: %+v (exit %d)", c, r.ExitCode)
	}
	if c, _ := row("sources: {transform_salt: pepper-pepper-pepper, eventlogfile: {sample: {API: 0.5}, transforms: [{action: hash, fields: [USER_ID]}]}}\n"); c.Status != Pass ||
		c.Detail != "1 rules compile; hashes keyed by transform_salt" {
		t.Fatalf("salted: %+v", c)
	}
}

// check builds every source's transforms as run does: a salt file it
// cannot read is refused, and the unsalted-hash warning is printed.
func TestCheckBuildsTheTransforms(t *testing.T) {
	dir := t.TempDir()
	onlyEnv(t, nil)
	cfg := "state: {file: {path: " + filepath.Join(dir, "state.json") + "}}\nsink: {loki: {url: http://127.0.0.1:9/loki/api/v1/push}}\n" +
		"sources: {transform_salt_file: " + filepath.Join(dir, "absent") + ", synthetic: {rate: 1, transforms: [{action: hash, fields: [UserId]}]}}\n"
	out, err := runCommand(t, "check", "--config", writeConfig(t, cfg))
	if err == nil || !strings.Contains(out, "sources.transform_salt_file: "+filepath.Join(dir, "absent")+" does not exist") {
		t.Fatalf("check passed with an unreadable salt file: %v\n%s", err, out)
	}
	out, err = runCommand(t, "check", "--config", writeConfig(t, strings.Replace(cfg, "transform_salt_file: "+filepath.Join(dir, "absent")+", ", "", 1)))
	if err != nil || !strings.Contains(out, config.UnsaltedHashAdvice) {
		t.Fatalf("check without a salt: %v\n%s", err, out)
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
	secrets := redactSecrets(cfg)
	for _, want := range []string{"salt-in-the-config-0123456789", "salt-from-a-file-0123456789"} {
		if !slices.Contains(secrets, want) {
			t.Errorf("%s is not redacted", want)
		}
	}
}

// End to end, as run builds the transforms from the file: a regex_replace
// whose replacement names a group ${local} ships the group's text in every
// line (run --dry-run prints what would be pushed), never the value of an
// environment variable named local; and check gives the same verdict with
// the variable set or not.
func TestRegexReplaceShipsTheGroupNotTheEnvironment(t *testing.T) {
	onlyEnv(t, map[string]string{"local": "FROM-THE-ENV"})
	dir := t.TempDir()
	yaml := "state: {file: {path: " + filepath.Join(dir, "state.json") + "}}\n" +
		"service: {log_format: text}\n" +
		"sink: {loki: {url: 'http://127.0.0.1:9/loki/api/v1/push', labels: {job: sf2loki}, batch: {max_wait: 100ms}}}\n" +
		"sources:\n  synthetic:\n    rate: 40\n    event_types: [LoginEvent]\n    transforms:\n" +
		"      - {action: regex_replace, fields: [Username], pattern: '^(?P<local>[^@]+)@.*$', replacement: '${local}@redacted'}\n"
	stdout, _ := dryRun(t, yaml, 2*time.Second, "--dry-run")
	for _, e := range printedLines(t, stdout) {
		var row map[string]any
		if err := json.Unmarshal([]byte(e.Line), &row); err != nil {
			t.Fatal(err)
		}
		if u, _ := row["Username"].(string); !strings.HasPrefix(u, "user") || !strings.HasSuffix(u, "@redacted") {
			t.Fatalf("shipped Username %q, want the group's text (userN@redacted): %s", u, e.Line)
		}
	}
	set, err := runCommand(t, "check", "--config", writeConfig(t, yaml))
	if err != nil {
		t.Fatalf("check with local set: %v\n%s", err, set)
	}
	if err := os.Unsetenv("local"); err != nil {
		t.Fatal(err)
	}
	unset, err := runCommand(t, "check", "--config", writeConfig(t, yaml))
	if err != nil || unset != set {
		t.Fatalf("check with local unset: %v\n%s\n(with it set:\n%s)", err, unset, set)
	}
}
