package cli

import (
	"bytes"
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// dryRun runs `sf2loki run --dry-run` on yaml for about d and returns its
// stdout and stderr.
func dryRun(t *testing.T, yaml string, d time.Duration, args ...string) (stdout, stderr string) {
	t.Helper()
	root := NewRootCommand()
	var out, errs bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errs)
	root.SetArgs(append([]string{"run", "--config", testenv.WriteConfig(t, yaml)}, args...))
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, errs.String())
	}
	return out.String(), errs.String()
}

// TestDryRunPrintsEntriesAndCommitsNothing: run --dry-run with the
// synthetic source and no Loki URL prints every entry as a JSON line with
// the labels the Loki sink would add (static labels, structured metadata
// promoted) and logs only to stderr; it creates neither the lease nor the
// state file nor their locks, and does not listen on service.health_addr
// (held by another process here).
func TestDryRunPrintsEntriesAndCommitsNothing(t *testing.T) {
	testenv.OnlyEnv(t, nil)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	yaml := "coordinate: {type: file_lease, file_lease: {path: " + dir + "/leader.lease}}\n" +
		"state: {file: {path: " + dir + "/state.json}}\n" +
		"service: {health_addr: '" + busy.Addr().String() + "', log_format: text}\n" +
		"sources: {synthetic: {rate: 40}}\n" +
		"sink: {loki: {labels: {job: sf2loki, service_name: salesforce}, structured_metadata_fields: [Username], batch: {max_wait: 100ms}}}\n"
	stdout, stderr := dryRun(t, yaml, 2*time.Second, "--dry-run")
	entries := testenv.PrintedLines(t, stdout)
	for _, e := range entries {
		if e.Labels["job"] != "sf2loki" || e.Labels["service_name"] != "salesforce" || e.Labels["source"] != "synthetic" || e.Labels["event_type"] == "" ||
			e.Metadata["sequence"] == "" || e.Metadata["user_id"] == "" || !strings.HasSuffix(e.Metadata["Username"], "@example.com") ||
			!strings.HasPrefix(e.Line, "{") {
			t.Fatalf("entry %+v lacks the labels or metadata the Loki sink would send", e)
		}
	}
	for _, want := range []string{"dry run: printing entries to stdout, committing nothing", "coordinate=noop", "state=mem://dry-run"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the dry run wrote %v beside the lease and state files", left)
	}

	// Without --dry-run the same configuration needs a Loki URL; with
	// sink.stdout.enabled it does not.
	if out, err := runCommand(t, "check", "--config", testenv.WriteConfig(t, yaml)); err == nil || !strings.Contains(out, "sink.loki.url: required when a source is enabled") {
		t.Fatalf("check without a dry run: %v\n%s", err, out)
	}
	stdout, _ = dryRun(t, strings.Replace(yaml, "sink: {", "sink: {stdout: {enabled: true}, ", 1), time.Second)
	testenv.PrintedLines(t, stdout)
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the dry run wrote %v beside the lease and state files", left)
	}
}

// TestDryRunWithOrgs: with orgs, each org's entries carry its org,
// environment and sf_org_id labels; the S3 lease, membership and
// checkpoint objects (at an endpoint that answers nothing) are never
// opened.
func TestDryRunWithOrgs(t *testing.T) {
	testenv.OnlyEnv(t, nil)
	yaml := `coordinate: {type: s3_lease, s3_lease: {bucket: b, region: r, endpoint_url: 'http://127.0.0.1:1'}}
state: {store: s3, s3: {bucket: b, region: r, endpoint_url: 'http://127.0.0.1:1'}}
service: {log_format: text}
sink: {loki: {url: 'http://127.0.0.1:1/loki/api/v1/push', labels: {job: sf2loki}, batch: {max_wait: 100ms}}}
orgs:
  - name: prod
    salesforce: {org_id: 00D000000000001AAA}
    sources: {synthetic: {rate: 20}}
  - name: uat
    salesforce: {org_id: 00D000000000002AAA, environment: sandbox}
    sources: {synthetic: {rate: 20}}
`
	stdout, stderr := dryRun(t, yaml, 2*time.Second, "--dry-run")
	seen := map[string]bool{}
	for _, e := range testenv.PrintedLines(t, stdout) {
		org := e.Labels["org"]
		want := map[string][2]string{"prod": {"production", "00D000000000001AAA"}, "uat": {"sandbox", "00D000000000002AAA"}}[org]
		if e.Labels["environment"] != want[0] || e.Labels["sf_org_id"] != want[1] || e.Labels["job"] != "sf2loki" {
			t.Fatalf("entry of org %q has labels %v", org, e.Labels)
		}
		seen[org] = true
	}
	if !seen["prod"] || !seen["uat"] {
		t.Fatalf("entries of %v only", seen)
	}
	if strings.Contains(stderr, "127.0.0.1:1") || strings.Contains(stderr, "level=ERROR") {
		t.Fatalf("the dry run reached for a store or logged an error:\n%s", stderr)
	}
}
