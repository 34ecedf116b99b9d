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
	tel, cleanup, err := telemetry.New(t.Context(), TelemetrySettings(cfg), quiet(), telemetry.Options{})
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
