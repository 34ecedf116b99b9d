package app

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/loki"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// dryRun runs `sf2loki run --dry-run` on yaml for about d and returns its
// stdout and stderr.
func dryRun(t *testing.T, yaml string, d time.Duration, args ...string) (stdout, stderr string) {
	t.Helper()
	root := NewRootCommand()
	var out, errs bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errs)
	root.SetArgs(append([]string{"run", "--config", writeConfig(t, yaml)}, args...))
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	if err := root.ExecuteContext(ctx); err != nil {
		t.Fatalf("run: %v\nstderr:\n%s", err, errs.String())
	}
	return out.String(), errs.String()
}

// printedLines decodes stdout, which must hold JSON lines only.
func printedLines(t *testing.T, stdout string) []loki.Printed {
	t.Helper()
	var out []loki.Printed
	sc := bufio.NewScanner(strings.NewReader(stdout))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		dec := json.NewDecoder(bytes.NewReader(sc.Bytes()))
		dec.DisallowUnknownFields()
		var p loki.Printed
		if err := dec.Decode(&p); err != nil {
			t.Fatalf("stdout holds a line that is not an entry (%v): %q", err, sc.Text())
		}
		if _, err := time.Parse(time.RFC3339Nano, p.Time); err != nil || p.Line == "" || p.Labels == nil || p.Metadata == nil {
			t.Fatalf("an incomplete entry: %q", sc.Text())
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		t.Fatal("the dry run printed nothing")
	}
	return out
}

// TestDryRunPrintsEntriesAndCommitsNothing: run --dry-run with the
// synthetic source and no Loki URL prints every entry as a JSON line with
// the labels the Loki sink would add (static labels, structured metadata
// promoted) and logs only to stderr; it creates neither the lease nor the
// state file nor their locks, and does not listen on service.health_addr
// (held by another process here).
func TestDryRunPrintsEntriesAndCommitsNothing(t *testing.T) {
	onlyEnv(t, nil)
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
	entries := printedLines(t, stdout)
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
	if out, err := runCommand(t, "check", "--config", writeConfig(t, yaml)); err == nil || !strings.Contains(out, "sink.loki.url: required when a source is enabled") {
		t.Fatalf("check without a dry run: %v\n%s", err, out)
	}
	stdout, _ = dryRun(t, strings.Replace(yaml, "sink: {", "sink: {stdout: {enabled: true}, ", 1), time.Second)
	printedLines(t, stdout)
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("the dry run wrote %v beside the lease and state files", left)
	}
}

// TestDryRunWithOrgs: with orgs, each org's entries carry its org,
// environment and sf_org_id labels; the S3 lease, membership and
// checkpoint objects (at an endpoint that answers nothing) are never
// opened.
func TestDryRunWithOrgs(t *testing.T) {
	onlyEnv(t, nil)
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
	for _, e := range printedLines(t, stdout) {
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

// TestDryRunGraph: a dry run's graph ignores the coordinator and the state
// store it is given (none of their objects is read or written), its
// pipeline commits nothing even to its own in-memory document, and its
// health endpoint is never service.health_addr.
func TestDryRunGraph(t *testing.T) {
	lease, state := porttest.NewMemoryCAS("lease"), porttest.NewMemoryCAS("state")
	cfg := testConfig(config.CoordinateS3Lease)
	cfg.Service.HealthAddr = ":8080"
	cfg.Sources.Synthetic.Rate = 200
	cfg.Sink.Loki.Batch.MaxWait = 20 * time.Millisecond
	cfg.Sink.Stdout.Enabled = true
	var out syncBuffer
	d, cleanup, err := Build(t.Context(), cfg, Overrides{LeaseStore: lease, StateStore: state, MembersStore: lease, Logger: quiet(), Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if d.cfg.Coordinate.Type != config.CoordinateNoop || d.cfg.Service.HealthAddr != "127.0.0.1:0" || cfg.Coordinate.Type != config.CoordinateS3Lease {
		t.Fatalf("the dry run runs coordinate %s on %s (the configuration says %s)", d.cfg.Coordinate.Type, d.cfg.Service.HealthAddr, cfg.Coordinate.Type)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	if err := d.Run(ctx); err != nil {
		t.Fatal(err)
	}
	printedLines(t, out.String())
	for _, s := range []*porttest.MemoryCAS{lease, state} {
		for _, op := range []porttest.Op{porttest.OpGet, porttest.OpPut, porttest.OpDelete} {
			if n := s.Calls(op); n != 0 {
				t.Errorf("%s: %d %s calls", s, n, op)
			}
		}
	}
	doc, err := d.Committer().Load(t.Context())
	if err != nil || len(doc) != 0 || d.Committer().Version() != "" {
		t.Fatalf("the dry run committed to its own document: %v %v (version %q)", doc, err, d.Committer().Version())
	}
}
