package domain_test

import (
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// observed returns the EventObserved events reported so far.
func observed(r *recorder) []domain.Event {
	var out []domain.Event
	for _, e := range r.all() {
		if e.Kind == domain.EventObserved {
			out = append(out, e)
		}
	}
	return out
}

func TestStandbyReportsTheHolderAtFirstReadAndOnEveryChange(t *testing.T) {
	clk := porttest.NewFakeClock(t0)
	m := porttest.NewMemoryCAS("lease")
	plant(m, domain.LeaseRecord{Holder: "b", Instance: "b-1", Epoch: 4})
	k, rec := newKeeper(t, m, clk, "a")

	// The first read reports the holder; the polls that follow, with the
	// holder renewing, report nothing more.
	for range 5 {
		if res := k.Step(ctx(t)); res.Role != domain.RoleStandby {
			t.Fatalf("took a fresh lease: %+v", res)
		}
		plant(m, domain.LeaseRecord{Holder: "b", Instance: "b-1", Epoch: 4, Renewals: 1})
		clk.Advance(renew)
	}
	got := observed(rec)
	if len(got) != 1 {
		t.Fatalf("%d observed events over five polls of one holder, want 1: %+v", len(got), got)
	}
	if e := got[0]; e.LeaseHolder != "b" || e.Epoch != 4 || e.Holder != "a" || !strings.Contains(e.Reason, "first read") {
		t.Fatalf("first observation %+v", e)
	}

	// Another replica takes the lease over: reported once, naming the one
	// before.
	plant(m, domain.LeaseRecord{Holder: "c", Instance: "c-1", Epoch: 5})
	for range 3 {
		k.Step(ctx(t))
		clk.Advance(renew)
	}
	got = observed(rec)
	if len(got) != 2 {
		t.Fatalf("%d observed events after one change of holder, want 2: %+v", len(got), got)
	}
	if e := got[1]; e.LeaseHolder != "c" || e.Epoch != 5 || e.Reason != "was held by b (epoch 4)" {
		t.Fatalf("observation after the change %+v", e)
	}
}

func TestStandbyReportsWhoTookTheLeaseFromIt(t *testing.T) {
	clk := porttest.NewFakeClock(t0)
	m := porttest.NewMemoryCAS("lease")
	k, rec := newKeeper(t, m, clk, "a")
	acquire(t, k)
	plant(m, domain.LeaseRecord{Holder: "b", Instance: "b-1", Epoch: 2})
	clk.Advance(renew)
	if res := k.Step(ctx(t)); res.Transition != domain.TransitionLost {
		t.Fatalf("renewal over a taken lease: %+v", res)
	}
	k.Step(ctx(t))
	got := observed(rec)
	if len(got) != 1 || got[0].LeaseHolder != "b" || got[0].Epoch != 2 || got[0].Reason != "taken over from this process (epoch 1)" {
		t.Fatalf("observed %+v", got)
	}
	if lost := rec.all()[1]; lost.Kind != domain.EventLost || lost.Graceful {
		t.Fatalf("a lease taken over is not a planned loss: %+v", lost)
	}
}

func TestStandbyNamesAnEarlierProcessOfItsOwnHolder(t *testing.T) {
	clk := porttest.NewFakeClock(t0)
	m := porttest.NewMemoryCAS("lease")
	plant(m, domain.LeaseRecord{Holder: "a", Instance: "a-previous-process", Epoch: 3})
	k, rec := newKeeper(t, m, clk, "a")
	k.Step(ctx(t))
	got := observed(rec)
	if len(got) != 1 || got[0].LeaseHolder != "a" || !strings.Contains(got[0].Reason, "earlier process (instance a-previous-process)") {
		t.Fatalf("observed %+v", got)
	}
}

func TestAFreeLeaseIsNotReportedAsHeld(t *testing.T) {
	clk := porttest.NewFakeClock(t0)
	m := porttest.NewMemoryCAS("lease")
	plant(m, domain.LeaseRecord{Holder: "", Instance: "b-1", Epoch: 2})
	k, rec := newKeeper(t, m, clk, "a")
	if res := k.Step(ctx(t)); res.Transition != domain.TransitionAcquired {
		t.Fatalf("released lease not taken: %+v", res)
	}
	if got := observed(rec); len(got) != 0 {
		t.Fatalf("a released lease reported as held: %+v", got)
	}
}

func TestGracefulStopIsAPlannedLossThenARelease(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewMemoryCAS("lease")
		k, rec := newKeeper(t, m, clk, "a")
		_, stop := runKeeper(t, clk, k)
		advance(t, clk, renew)
		stop()
		var lost, released *domain.Event
		for _, e := range rec.all() {
			switch e.Kind {
			case domain.EventLost:
				lost = &e
			case domain.EventReleased:
				released = &e
			}
		}
		if lost == nil || !lost.Graceful || lost.Reason != "stopping" {
			t.Fatalf("lost on graceful stop: %+v", lost)
		}
		if released == nil || released.Reason != "released on graceful stop" {
			t.Fatalf("released: %+v", released)
		}
	})
}

func TestResignationIsAPlannedLossThenARelease(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewMemoryCAS("lease")
		logs := &logBuffer{}
		k, rec := newKeeper(t, m, clk, "a", func(c *domain.LeaseConfig) { c.Logger = logs.logger() })
		_, stop := runKeeper(t, clk, k)
		advance(t, clk, renew)
		k.Resign("rebalancing", 0)
		advance(t, clk, renew)
		stop()
		var lost, released domain.Event
		for _, e := range rec.all() { // the first term's
			switch {
			case e.Kind == domain.EventLost && lost.Kind == "":
				lost = e
			case e.Kind == domain.EventReleased && released.Kind == "":
				released = e
			}
		}
		if !lost.Graceful || lost.Reason != "resigned: rebalancing" || released.Reason != "released after resigning (rebalancing)" {
			t.Fatalf("lost %+v, released %+v", lost, released)
		}
		if out := logs.String(); strings.Contains(out, "level=WARN") || !strings.Contains(out, "level=INFO msg=\"resigning leadership") {
			t.Fatalf("a resignation is planned: one INFO line, no WARN:\n%s", out)
		}
	})
}
