package domain_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// oneReplica is replica "a" of a shard set, its keepers stepped by hand.
type oneReplica struct {
	leases  map[string]*porttest.MemoryCAS
	keepers map[string]*domain.LeaseKeeper
	b       *domain.Balancer
}

// newOneReplica builds replica a over shards, beside replica b beating in
// the same members document, and lets a learn its peers.
func newOneReplica(t *testing.T, clk *porttest.FakeClock, shards ...string) *oneReplica {
	t.Helper()
	members := porttest.NewMemoryCAS("members")
	mb, err := domain.NewMembership(members, clk, domain.MemberConfig{Holder: "b", TTL: ttl, RenewInterval: renew})
	if err != nil {
		t.Fatal(err)
	}
	ma, err := domain.NewMembership(members, clk, domain.MemberConfig{Holder: "a", TTL: ttl, RenewInterval: renew})
	if err != nil {
		t.Fatal(err)
	}
	r := &oneReplica{leases: map[string]*porttest.MemoryCAS{}, keepers: map[string]*domain.LeaseKeeper{},
		b: domain.NewBalancer(ma, clk, renew, nil)}
	for _, s := range shards {
		r.leases[s] = porttest.NewMemoryCAS(s)
		k, err := domain.NewLeaseKeeper(r.leases[s], clk, domain.LeaseConfig{Holder: "a", TTL: ttl, RenewInterval: renew, Gate: r.b.Gate(s)})
		if err != nil {
			t.Fatal(err)
		}
		r.keepers[s] = k
		r.b.Add(domain.Shard{Name: s, Keeper: k})
	}
	for range 2 {
		if err := mb.Beat(t.Context()); err != nil {
			t.Fatal(err)
		}
		r.b.Step(t.Context())
		advance(t, clk, renew/2)
	}
	return r
}

func (r *oneReplica) led() (n int) {
	for _, k := range r.keepers {
		if k.CheckFence() == nil {
			n++
		}
	}
	return n
}

// A claim in flight counts as led: replica a, leading one of four shards
// beside a live replica b (fair share 2), is allowed one claim; while that
// claim is still being written, a second shard is released by a replica
// that is not live, and a's gate refuses it. Before claims in flight were
// counted, the second shard was claimed too when it came first in a's
// rendezvous order, and a led 3 shards with a ceiling of 2. Both orders
// are tried.
func TestAClaimInFlightCountsAsLed(t *testing.T) {
	for _, order := range [][2]string{{"org-x", "org-y"}, {"org-y", "org-x"}} {
		first, second := order[0], order[1]
		t.Run(first+" first", func(t *testing.T) {
			bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
				r := newOneReplica(t, clk, "org-a", "org-b", first, second)
				r.leases["org-b"].Store(domain.LeaseRecord{Holder: "b", Instance: "b1", Epoch: 1, TTL: ttl.String()}.Encode())
				r.leases[first].Store(domain.LeaseRecord{Holder: "d", Instance: "d1", Epoch: 1, TTL: ttl.String()}.Encode())
				r.leases[second].Store(domain.LeaseRecord{Holder: "c", Instance: "c1", Epoch: 1, TTL: ttl.String()}.Encode())
				for _, s := range []string{"org-b", first, second} {
					r.keepers[s].Step(t.Context())
				}
				if res := r.keepers["org-a"].Step(t.Context()); res.Role != domain.RoleLeader {
					t.Fatalf("a must claim the absent org-a (room 2 of fair share 2): %+v", res)
				}

				// d releases the first: a's claim of it is held in flight.
				r.leases[first].Store(domain.LeaseRecord{Holder: "", Epoch: 1, TTL: ttl.String()}.Encode())
				writing, land := make(chan struct{}), make(chan struct{})
				r.leases[first].Inject(porttest.Fault{Op: porttest.OpPut, Times: 1, Before: func() {
					close(writing)
					<-land
				}})
				done := make(chan domain.StepResult)
				go func() { done <- r.keepers[first].Step(context.Background()) }()
				<-writing

				// c releases the second while that claim is in flight.
				r.leases[second].Store(domain.LeaseRecord{Holder: "", Epoch: 1, TTL: ttl.String()}.Encode())
				res := r.keepers[second].Step(t.Context())
				close(land)
				if got := <-done; got.Role != domain.RoleLeader {
					t.Fatalf("the claim in flight must land: %+v", got)
				}
				if res.Role == domain.RoleLeader || r.led() > 2 {
					t.Fatalf("a claimed %s while its claim of %s was in flight: it leads %d shards, the ceiling is 2 (%+v)", second, first, r.led(), res)
				}
				if plan := r.b.Plan(); plan.Led != 2 || len(plan.Claim) != 0 {
					t.Fatalf("after the claim landed: %+v", plan)
				}
			})
		})
	}
}

// A fleet stopped gracefully and started again under the same holder ids
// (a StatefulSet, fixed holder_id): every lease reads "released, departed
// b" with b's old process. The new b beats; a must not count it gone for
// the old process's release, so a claims its share (2 of 4), not all.
func TestADepartedHolderRestartedIsNotGone(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		shards := []string{"org-1", "org-2", "org-3", "org-4"}
		r := newOneReplica(t, clk, shards...)
		for _, s := range shards {
			r.leases[s].Store(domain.LeaseRecord{Holder: "", Instance: "b-before-the-restart", Departed: "b", Epoch: 1, TTL: ttl.String()}.Encode())
		}
		for _, s := range shards {
			r.keepers[s].Step(t.Context())
		}
		if got, live := r.led(), r.b.Members(); got != 2 || len(live) != 2 {
			t.Fatalf("a leads %d of 4 with members %v: a restarted b was counted gone for its earlier process's release", got, live)
		}
	})
}

// A replica that keeps becoming live (c crash-looping, each process under
// a new instance) keeps every other replica settling; settling holds back
// releases for balance, but not for ever: a, leading all four shards with
// c live (ceiling 2), hands one off within a few renew intervals. Before
// the run of settling was bounded, a never released: it led 4 with a
// ceiling of 2 for as long as c looped.
func TestAReplicaAboveTheCeilingReleasesWhilePeersKeepJoining(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		const maxSettle = 4 // renew intervals: the bound the balancer documents
		shards := []string{"org-1", "org-2", "org-3", "org-4"}
		members := porttest.NewMemoryCAS("members")
		ma, err := domain.NewMembership(members, clk, domain.MemberConfig{Holder: "a", TTL: ttl, RenewInterval: renew})
		if err != nil {
			t.Fatal(err)
		}
		b := domain.NewBalancer(ma, clk, renew, nil)
		keepers := map[string]*domain.LeaseKeeper{}
		for _, s := range shards {
			k, err := domain.NewLeaseKeeper(porttest.NewMemoryCAS(s), clk, domain.LeaseConfig{Holder: "a", TTL: ttl, RenewInterval: renew, Gate: b.Gate(s)})
			if err != nil {
				t.Fatal(err)
			}
			keepers[s] = k
			b.Add(domain.Shard{Name: s, Keeper: k})
		}
		// Alone, a learns and claims all four.
		for range 3 {
			b.Step(t.Context())
			for _, s := range shards {
				keepers[s].Step(t.Context())
			}
			advance(t, clk, renew)
		}
		if plan := b.Plan(); plan.Led != 4 {
			t.Fatalf("alone, a must lead all four: %+v", plan)
		}
		// c restarts every renew interval, under a new instance each time.
		released := false
		for i := range 6 * maxSettle {
			mc, err := domain.NewMembership(members, clk, domain.MemberConfig{Holder: "c", Instance: fmt.Sprintf("c%d", i), TTL: ttl, RenewInterval: renew})
			if err != nil {
				t.Fatal(err)
			}
			if err := mc.Beat(t.Context()); err != nil {
				t.Fatal(err)
			}
			if plan := b.Step(t.Context()); plan.Release != "" {
				released = true
				if i > maxSettle {
					t.Fatalf("a released only after %d renew intervals of c looping (at most %d)", i, maxSettle)
				}
				break
			}
			advance(t, clk, renew)
		}
		if !released {
			t.Fatalf("a leads 4 shards beside a looping c (ceiling 2) and never releases one: %+v", b.Plan())
		}
	})
}

// A replica whose heartbeats fail at first learns its peers with the first
// one that lands once two renew intervals have passed since it started,
// not half a renew interval after that: the wait for a second heartbeat
// is for replicas started together, and two intervals are already past.
// Before, the first heartbeat landing late only started that wait, and a
// lone replica claimed nothing for another step.
func TestAReplicaWhoseFirstHeartbeatsFailLearnsWhenOneLands(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		members := porttest.NewMemoryCAS("members")
		// Refused outright (not retried within the beat: the fake clock
		// only moves when the test moves it).
		members.Inject(porttest.Fault{Op: porttest.OpGet, Err: errors.New("403 access denied")})
		ma, err := domain.NewMembership(members, clk, domain.MemberConfig{Holder: "a", TTL: ttl, RenewInterval: renew})
		if err != nil {
			t.Fatal(err)
		}
		b := domain.NewBalancer(ma, clk, renew, nil)
		k, err := domain.NewLeaseKeeper(porttest.NewMemoryCAS("org-1"), clk, domain.LeaseConfig{Holder: "a", TTL: ttl, RenewInterval: renew, Gate: b.Gate("org-1")})
		if err != nil {
			t.Fatal(err)
		}
		b.Add(domain.Shard{Name: "org-1", Keeper: k})
		for range 2 {
			b.Step(t.Context())
			if res := k.Step(t.Context()); res.Role == domain.RoleLeader {
				t.Fatalf("a claims before it has learned its peers: %+v", res)
			}
			advance(t, clk, renew)
		}
		members.ClearFaults()
		b.Step(t.Context())
		if res := k.Step(t.Context()); res.Role != domain.RoleLeader {
			t.Fatalf("two renew intervals after it started, with a heartbeat landed, a must claim the free shard: %+v, plan %+v", res, b.Plan())
		}
	})
}
