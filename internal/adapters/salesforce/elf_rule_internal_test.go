package salesforce

import (
	"testing"
	"time"
)

// The interval rule as a list of switches: set keeps the switches before
// its day, merges a switch that changes nothing, and keeps at most
// maxSwitches, the days before the oldest kept switch taking the dropped
// one's interval.
func TestELFIntervalRule(t *testing.T) {
	d := func(n int) time.Time { return time.Date(2026, 11, n, 0, 0, 0, 0, time.UTC) }
	at := func(p *elfPos, n int) string { return p.intervalAt(d(n).Add(time.Hour)) }
	p := &elfPos{LastCreated: "2026-11-01T00:00:00.000+0000", IDs: [][2]string{}}
	p.set(IntervalHourly, time.Time{})
	p.set(IntervalDaily, d(10))
	p.set(IntervalHourly, d(12))
	if got := []string{at(p, 9), at(p, 10), at(p, 11), at(p, 12), at(p, 20)}; got[0] != "Hourly" || got[1] != "Daily" || got[2] != "Daily" ||
		got[3] != "Hourly" || got[4] != "Hourly" {
		t.Fatalf("intervals on Nov 9..12, 20: %v", got)
	}
	if p.describe() != "Hourly files with a LogDate before 2026-11-10, Daily files from it, Hourly files from 2026-11-12" {
		t.Fatal(p.describe())
	}
	p.set(IntervalHourly, d(11)) // Nov 11 becomes Hourly: the Daily range shrinks
	if at(p, 10) != "Daily" || at(p, 11) != "Hourly" || len(p.switches()) != 2 {
		t.Fatalf("after Hourly from Nov 11: %s", p.describe())
	}
	p.set(IntervalHourly, d(10)) // no Daily range left: one interval
	if p.Since != "" || len(p.Earlier) != 0 || at(p, 10) != "Hourly" {
		t.Fatalf("after Hourly from Nov 10: %s", p.encode())
	}
	for i := range 2 * maxSwitches {
		p.set(other(p.Interval), d(1).AddDate(0, 0, i+1))
	}
	r := p.switches()
	if len(r) != maxSwitches || !r[0].since.Equal(d(1).AddDate(0, 0, maxSwitches+1)) {
		t.Fatalf("%d switches kept, the oldest from %s", len(r), r[0].Since)
	}
	if at(p, 1) != other(r[0].Interval) {
		t.Fatal("the days before the oldest kept switch do not take the other interval")
	}
	q, err := parsePos(p.encode())
	if err != nil || q.describe() != p.describe() {
		t.Fatalf("round trip: %v %q", err, q.describe())
	}
}
