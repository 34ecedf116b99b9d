package domain_test

import (
	"testing"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// Every acquisition says what state the lease was in, so that a take-over
// of a stale lease (its holder died or froze) can be told from a planned
// one (a release, a first start): alerts on leadership churn count only
// the former.
func TestAnAcquisitionSaysWhatTheLeaseWas(t *testing.T) {
	for _, c := range []struct {
		name  string
		plant *domain.LeaseRecord // nil: absent
		wait  bool                // let the planted lease go stale first
		want  domain.AcquiredFrom
	}{
		{"absent", nil, false, domain.FromAbsent},
		{"released", &domain.LeaseRecord{Holder: "", Departed: "b", Instance: "b-instance", Epoch: 3, TTL: ttl.String()}, false, domain.FromReleased},
		{"own", &domain.LeaseRecord{Holder: "a", Instance: "a-instance", Epoch: 3, TTL: ttl.String()}, false, domain.FromOwn},
		{"stale", &domain.LeaseRecord{Holder: "b", Instance: "b-instance", Epoch: 3, TTL: ttl.String()}, true, domain.FromStale},
	} {
		t.Run(c.name, func(t *testing.T) {
			bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
				m := porttest.NewMemoryCAS("lease")
				if c.plant != nil {
					plant(m, *c.plant)
				}
				k, rec := newKeeper(t, m, clk, "a")
				if c.wait {
					if res := k.Step(t.Context()); res.Role == domain.RoleLeader {
						t.Fatalf("a held lease was taken at once: %+v", res)
					}
					advance(t, clk, ttl+renew)
				}
				if res := k.Step(t.Context()); res.Role != domain.RoleLeader {
					t.Fatalf("not acquired: %+v", res)
				}
				var got []domain.AcquiredFrom
				for _, e := range rec.all() {
					if e.Kind == domain.EventAcquired {
						got = append(got, e.From)
					}
				}
				if len(got) != 1 || got[0] != c.want {
					t.Fatalf("acquired from %v, want [%s]", got, c.want)
				}
			})
		})
	}
}
