package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// check builds every source's transforms as run does: a salt file it
// cannot read is refused, and the unsalted-hash warning is printed.
func TestCheckBuildsTheTransforms(t *testing.T) {
	dir := t.TempDir()
	testenv.OnlyEnv(t, nil)
	cfg := "state: {file: {path: " + filepath.Join(dir, "state.json") + "}}\nsink: {loki: {url: http://127.0.0.1:9/loki/api/v1/push}}\n" +
		"sources: {transform_salt_file: " + filepath.Join(dir, "absent") + ", synthetic: {rate: 1, transforms: [{action: hash, fields: [UserId]}]}}\n"
	out, err := runCommand(t, "check", "--config", testenv.WriteConfig(t, cfg))
	if err == nil || !strings.Contains(out, "sources.transform_salt_file: "+filepath.Join(dir, "absent")+" does not exist") {
		t.Fatalf("check passed with an unreadable salt file: %v\n%s", err, out)
	}
	out, err = runCommand(t, "check", "--config", testenv.WriteConfig(t, strings.Replace(cfg, "transform_salt_file: "+filepath.Join(dir, "absent")+", ", "", 1)))
	if err != nil || !strings.Contains(out, config.UnsaltedHashAdvice) {
		t.Fatalf("check without a salt: %v\n%s", err, out)
	}
}

// End to end, as run builds the transforms from the file: a regex_replace
// whose replacement names a group ${local} ships the group's text in every
// line (run --dry-run prints what would be pushed), never the value of an
// environment variable named local; and check gives the same verdict with
// the variable set or not.
func TestRegexReplaceShipsTheGroupNotTheEnvironment(t *testing.T) {
	testenv.OnlyEnv(t, map[string]string{"local": "FROM-THE-ENV"})
	dir := t.TempDir()
	yaml := "state: {file: {path: " + filepath.Join(dir, "state.json") + "}}\n" +
		"service: {log_format: text}\n" +
		"sink: {loki: {url: 'http://127.0.0.1:9/loki/api/v1/push', labels: {job: sf2loki}, batch: {max_wait: 100ms}}}\n" +
		"sources:\n  synthetic:\n    rate: 40\n    event_types: [LoginEvent]\n    transforms:\n" +
		"      - {action: regex_replace, fields: [Username], pattern: '^(?P<local>[^@]+)@.*$', replacement: '${local}@redacted'}\n"
	stdout, _ := dryRun(t, yaml, 2*time.Second, "--dry-run")
	for _, e := range testenv.PrintedLines(t, stdout) {
		var row map[string]any
		if err := json.Unmarshal([]byte(e.Line), &row); err != nil {
			t.Fatal(err)
		}
		if u, _ := row["Username"].(string); !strings.HasPrefix(u, "user") || !strings.HasSuffix(u, "@redacted") {
			t.Fatalf("shipped Username %q, want the group's text (userN@redacted): %s", u, e.Line)
		}
	}
	set, err := runCommand(t, "check", "--config", testenv.WriteConfig(t, yaml))
	if err != nil {
		t.Fatalf("check with local set: %v\n%s", err, set)
	}
	if err := os.Unsetenv("local"); err != nil {
		t.Fatal(err)
	}
	unset, err := runCommand(t, "check", "--config", testenv.WriteConfig(t, yaml))
	if err != nil || unset != set {
		t.Fatalf("check with local unset: %v\n%s\n(with it set:\n%s)", err, unset, set)
	}
}
