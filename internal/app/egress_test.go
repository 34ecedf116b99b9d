package app

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// A leader whose day's budget is spent stays ready and says why on /readyz,
// /statusz and /metrics; the gauges exist from the start.
func TestEgressBudgetOnHealthEndpoints(t *testing.T) {
	lease, state := porttest.NewMemoryCAS("lease"), porttest.NewMemoryCAS("state")
	now := time.Date(2026, 3, 1, 23, 59, 59, 0, time.UTC)
	clk := porttest.NewFakeClock(now)
	cfg := testenv.Config(config.CoordinateFileLease)
	cfg.Sources.Synthetic.Rate = 1
	cfg.Sink.Loki.URL = "http://127.0.0.1:1/loki/api/v1/push"
	cfg.Sink.Loki.Egress.DailyByteBudget = 1000
	d, cleanup, err := Build(t.Context(), cfg, Overrides{LeaseStore: lease, StateStore: state, Clock: clk, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	h := d.Handler()
	if _, metrics := get(t, h, "/metrics"); !strings.Contains(metrics, "sf2loki_egress_budget_used_bytes 0") ||
		!strings.Contains(metrics, "sf2loki_egress_budget_bytes 1000") || !strings.Contains(metrics, "sf2loki_egress_paused 0") {
		t.Fatalf("/metrics before anything was shipped lacks the egress gauges:\n%s", grepLines(metrics, "egress"))
	}
	k := d.Coordinator().(*domain.LeaseKeeper)
	res := k.Step(t.Context())
	d.shards[0].gauges.SetLeader(true, res.Epoch) // the leader's gauges, without starting its work
	g := d.shards[0].workload.(*pipelineWorkload).egress
	g.Restore(`{"date":"2026-03-01","bytes":1000}`, true)
	spent, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := g.Admit(spent, spent, 1, 10); err == nil {
		t.Fatal("a paused governor admitted a batch")
	}
	code, body := get(t, h, "/readyz")
	if code != 200 || !strings.Contains(body, "budget paused until 2026-03-02T00:00:00Z") {
		t.Fatalf("/readyz with the budget spent: %d %q", code, body)
	}
	_, metrics := get(t, h, "/metrics")
	for _, want := range []string{"sf2loki_egress_budget_used_bytes 1000", "sf2loki_egress_paused 1"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, grepLines(metrics, "egress"))
		}
	}
	_, body = get(t, h, "/statusz")
	var st StatusReport
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Egress == nil || !st.Egress.Paused || st.Egress.UsedBytes != 1000 ||
		st.Egress.Until != "2026-03-02T00:00:00Z" {
		t.Fatalf("/statusz egress %+v (%v)", st.Egress, err)
	}
	clk.Advance(1500 * time.Millisecond) // within the fence: the next UTC day
	if code, body := get(t, h, "/readyz"); code != 200 || body != "leader\n" {
		t.Fatalf("/readyz on the next day: %d %q", code, body)
	}
}

// scope deployment splits the limits evenly over the orgs; scope org gives
// each org all of them.
func TestEgressScopeSplitsOverOrgs(t *testing.T) {
	yaml := `orgs:
  - {name: a, salesforce: {auth_mode: none}}
  - {name: b, salesforce: {auth_mode: none}}
  - {name: c, salesforce: {auth_mode: none}}
sink: {loki: {url: http://l/push, egress: {daily_byte_budget: 3000, max_lines_per_second: 300, max_bytes_per_second: 30000, scope: %s}}}
`
	for scope, want := range map[string]int64{"deployment": 1000, "org": 3000} {
		cfg, _, err := config.Load(testenv.WriteConfig(t, fmt.Sprintf(yaml, scope)))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range cfg.Shards() {
			e := egressConfig(s, nil, quiet())
			if e.DailyBytes != want || e.LinesPerSecond != float64(want)/10 || e.BytesPerSecond != float64(want)*10 {
				t.Errorf("scope %s, org %s: %+v, want a budget of %d", scope, s.ShardName, e, want)
			}
		}
	}
}

// grepLines keeps the lines of s holding sub.
func grepLines(s, sub string) string {
	var out []string
	for line := range strings.SplitSeq(s, "\n") {
		if strings.Contains(line, sub) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// A deployment budget smaller than the number of orgs is split rounding
// up: each org keeps a budget (integer division gave 0, which is none).
func TestEgressDeploymentShareNeverRoundsToUnlimited(t *testing.T) {
	yaml := `orgs:
  - {name: a, salesforce: {auth_mode: none}}
  - {name: b, salesforce: {auth_mode: none}}
  - {name: c, salesforce: {auth_mode: none}}
sink: {loki: {url: http://l/push, egress: {daily_byte_budget: 2, scope: deployment}}}
`
	cfg, _, err := config.Load(testenv.WriteConfig(t, yaml))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range cfg.Shards() {
		if e := egressConfig(s, nil, quiet()); e.DailyBytes != 1 {
			t.Errorf("org %s: a 2-byte deployment budget over 3 orgs gives %d bytes each, want 1", s.ShardName, e.DailyBytes)
		}
	}
}

// state set and import check the egress record like a source's position.
func TestStateChecksTheEgressRecord(t *testing.T) {
	if err := CheckCheckpoint(domain.EgressKey, `{"date":"2026-03-01","bytes":10}`); err != nil {
		t.Fatalf("a valid record refused: %v", err)
	}
	for _, v := range []string{`garbage`, `{"date":"03/01/2026","bytes":0}`} {
		if err := CheckCheckpoint(domain.EgressKey, v); err == nil {
			t.Errorf("state accepts %s = %s", domain.EgressKey, v)
		}
	}
}
