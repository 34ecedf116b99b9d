package domain_test

import (
	"testing"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// egress:budget as the older implementation writes it (Python json.dumps:
// ", " and ": " separators) continues the day's count.
func TestOlderEgressBudgetRecordContinuesTheDay(t *testing.T) {
	clk := porttest.NewFakeClock(t0) // 2026-03-01 12:00 UTC
	g, err := domain.NewEgress(clk, domain.EgressConfig{DailyBytes: 10_000, Action: domain.BudgetPause})
	if err != nil {
		t.Fatal(err)
	}
	g.Restore(`{"date": "2026-03-01", "bytes": 4096}`, true)
	if s := g.Status(); s.Day != "2026-03-01" || s.Used != 4096 {
		t.Fatalf("status %+v, want 4096 bytes used on 2026-03-01", s)
	}
	if err := domain.CheckEgressRecord(`{"date": "2026-03-01", "bytes": 4096}`); err != nil {
		t.Fatal(err)
	}
}
