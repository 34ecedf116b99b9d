package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/telemetry"
)

// frozenCoord is a coordinator frozen in one role.
type frozenCoord struct {
	leader bool
	now    time.Time
}

func (c frozenCoord) Run(ctx context.Context, _ domain.Callbacks) error { <-ctx.Done(); return nil }
func (c frozenCoord) CheckFence() error {
	if c.leader {
		return nil
	}
	return errors.New("not leading")
}
func (c frozenCoord) Status() domain.Status {
	r := domain.RoleStandby
	if c.leader {
		r = domain.RoleLeader
	}
	return domain.Status{Role: r, Decided: true, LastObserved: c.now, TTL: 30 * time.Second, LeaseHolder: "other"}
}
func (c frozenCoord) Resign(string, time.Duration) {}

// With orgs, /readyz judges each shard this replica leads. Org b's
// credentials were refused while this replica led b; b has since moved to
// another replica (the refusal is sticky: nothing here mints b's tokens
// any more). This replica leads only org a, whose credentials are fine, so
// it is ready (each shard's readiness once read the one process-wide
// SalesforceAuthFailing, and the replica answered 503).
func TestReadyzJudgesEachOrgsAuthOnItsOwn(t *testing.T) {
	clk := porttest.NewFakeClock(time.Now())
	cfg := config.Defaults()
	tel, cleanup, err := telemetry.New(t.Context(), cfg, quiet(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	tel.AddSalesforceAuthProbe("a", func() string { return "" })
	tel.AddSalesforceAuthProbe("b", func() string { return "invalid_grant: expired access/refresh token" })
	var shards []*Shard
	for _, o := range []struct {
		name   string
		leader bool
	}{{"a", true}, {"b", false}} {
		sc := config.Defaults()
		sc.ShardName = o.name
		shards = append(shards, newShard(sc, frozenCoord{leader: o.leader, now: clk.Now()}, nil, StateStore{porttest.NewMemoryCAS("state-" + o.name)}, idle{}, tel, quiet(), clk))
	}
	d := newDaemon(cfg, shards, nil, tel, quiet(), clk)
	for _, standbyOK := range []bool{false, true} {
		code, body := d.ready(standbyOK)
		if code != http.StatusOK || strings.Contains(body, "a: leader: salesforce auth failing") {
			t.Errorf("standby=ok %v: /readyz %d %q; want 200: this replica leads org a only, whose credentials work", standbyOK, code, body)
		}
	}
}

// orgsConfig writes a noop, file-state configuration with the orgs
// in the order given, each with a synthetic source.
func orgsConfig(t *testing.T, dir, lokiURL string, orgs ...string) *config.Config {
	t.Helper()
	var b strings.Builder
	for _, o := range orgs {
		fmt.Fprintf(&b, "  - name: %s\n    salesforce: {org_id: 00D00000000000%sAAA}\n    sources: {synthetic: {rate: 50}}\n", o, strings.ToUpper(o[:1]))
	}
	path := filepath.Join(t.TempDir(), "c.yaml")
	yaml := fmt.Sprintf(`coordinate: {type: noop}
state: {file: {path: %s/state.json}}
service: {health_addr: "127.0.0.1:0", shutdown_grace: 2s}
sink: {loki: {url: %s/loki/api/v1/push, encoding: json, batch: {max_wait: 100ms}}}
orgs:
%s`, dir, lokiURL, b.String())
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// runFor runs a daemon of cfg for d (or until it stops by itself) and
// returns what Run returned.
func runFor(t *testing.T, cfg *config.Config, d time.Duration) error {
	t.Helper()
	dm, cleanup, err := Build(t.Context(), cfg, Overrides{Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	defer cancel()
	return dm.Run(ctx)
}

// The __org__ guard (a reordered first org must not read another org's
// positions) holds with coordinate.type noop too: a single instance with
// several orgs is a documented form. Orgs [alpha, beta] run, then the
// operator lists beta first: beta now gets the configured checkpoint
// document, alpha's. With noop the leader's epoch is 0 and the shard claims
// no epoch, but it adopts the document (checks and stamps its org) all the
// same, so the reordered start stops with what to do (once beta resumed
// from alpha's positions without a word).
func TestNoopOrgsReorderIsCaught(t *testing.T) {
	dir := t.TempDir()
	sink := &jsonLoki{entries: map[string]int{}}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	if err := runFor(t, orgsConfig(t, dir, srv.URL, "alpha", "beta"), 2*time.Second); err != nil {
		t.Fatalf("first run: %v", err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]string
	_ = json.Unmarshal(raw, &doc)
	if doc[domain.OrgKey] != "alpha" {
		t.Errorf("after alpha ran (noop), the configured document has %s=%q, want %q: %s", domain.OrgKey, doc[domain.OrgKey], "alpha", raw)
	}
	err = runFor(t, orgsConfig(t, dir, srv.URL, "beta", "alpha"), 3*time.Second)
	if !errors.Is(err, domain.ErrWrongOrg) {
		t.Errorf("orgs reordered (beta first) under noop: Run returned %v; want ErrWrongOrg (beta would resume from alpha's positions)", err)
	}
}

// doctorOnAlphasDocument runs doctor on a file-lease configuration with
// orgs first and second, whose configured checkpoint document is stamped
// as org alpha's (epoch 3, one checkpoint).
func doctorOnAlphasDocument(t *testing.T, first, second string) DoctorReport {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "state.json"),
		[]byte(`{"`+domain.FenceEpochKey+`":"3","`+domain.OrgKey+`":"alpha","synthetic:x":"42"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	return Doctor(t.Context(), writeConfig(t, fmt.Sprintf(`coordinate: {type: file_lease, file_lease: {path: %s/leader.lease}}
state: {file: {path: %s/state.json}}
orgs:
  - name: %s
  - name: %s
`, dir, dir, first, second)))
}

// doctor with orgs: the first org's checkpoint document is stamped with
// another org (the orgs were reordered). The daemon refuses to start
// (ErrWrongOrg); doctor, whose job is to say so beforehand, fails it.
func TestDoctorFailsAReorderedFirstOrg(t *testing.T) {
	r := doctorOnAlphasDocument(t, "beta", "alpha")
	found := false
	for _, c := range r.Checks {
		if strings.HasSuffix(c.Name, "[org beta]") && c.Status != Pass && c.Status != Skip &&
			(strings.Contains(c.Detail, "alpha") || strings.Contains(c.Detail, domain.OrgKey)) {
			found = true
		}
	}
	if !found {
		var lines []string
		for _, c := range r.Checks {
			lines = append(lines, fmt.Sprintf("%s %s: %s", c.Name, c.Status, c.Detail))
		}
		t.Errorf("doctor says nothing about beta's checkpoint document belonging to alpha:\n%s", strings.Join(lines, "\n"))
	}
}

// doctor with orgs and leases checks every org's lease and document, but
// not the members document the balance rests on (it has its own object and
// permissions: dir/shards/members.json, the Lease <name>-members). A
// replica that cannot read or write it sees only itself and never
// balances; doctor says so before the first start.
func TestDoctorChecksTheMembersDocument(t *testing.T) {
	dir := t.TempDir()
	// The members document's path is a directory: unreadable, unwritable.
	if err := os.MkdirAll(filepath.Join(dir, "shards", "members.json"), 0o750); err != nil {
		t.Fatal(err)
	}
	r := Doctor(t.Context(), writeConfig(t, fmt.Sprintf(`coordinate: {type: file_lease, file_lease: {path: %s/leader.lease}}
state: {file: {path: %s/state.json}}
orgs:
  - name: alpha
  - name: beta
`, dir, dir)))
	var lines []string
	for _, c := range r.Checks {
		if strings.Contains(c.Name, "member") || strings.Contains(c.Detail, "members.json") {
			if c.Status == Fail {
				return
			}
		}
		lines = append(lines, fmt.Sprintf("%s %s: %s", c.Name, c.Status, c.Detail))
	}
	t.Errorf("doctor (exit %d) has no failing check of the members document %s/shards/members.json (a directory here):\n%s",
		r.ExitCode, dir, strings.Join(lines, "\n"))
}

// doctor's state row does not count __org__ as a checkpoint.
func TestDoctorDoesNotCountTheOrgStamp(t *testing.T) {
	r := doctorOnAlphasDocument(t, "alpha", "beta")
	for _, c := range r.Checks {
		if c.Name == "state [org alpha]" && !strings.Contains(c.Detail, "holds 1 checkpoints") {
			t.Errorf("%s: %s; the document holds one checkpoint (synthetic:x) besides the reserved keys", c.Name, c.Detail)
		}
	}
}
