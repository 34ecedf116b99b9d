package domain_test

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// testRendezvous mirrors the balance's per-replica shard order, to pick
// shard names that given replicas rank first.
func testRendezvous(replica, shard string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(replica))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(shard))
	return h.Sum64()
}

// rworld is replicas over shard leases and a members document, where the
// shards in blocked have a corrupt checkpoint document: every replica's
// keeper refuses to lead them (their lease stays free).
type rworld struct {
	t       *testing.T
	clk     *porttest.FakeClock
	shards  []string
	blocked map[string]bool
	leases  map[string]*porttest.MemoryCAS
	members *porttest.MemoryCAS
	logs    *logBuffer

	mu       sync.Mutex
	replicas map[string]*rreplica
}

type rreplica struct {
	cut     atomic.Bool
	stop    context.CancelFunc
	wg      sync.WaitGroup
	keepers map[string]*domain.LeaseKeeper
}

func newRWorld(t *testing.T, clk *porttest.FakeClock, shards []string, blocked ...string) *rworld {
	w := &rworld{t: t, clk: clk, shards: shards, blocked: map[string]bool{}, leases: map[string]*porttest.MemoryCAS{},
		members: porttest.NewMemoryCAS("members"), replicas: map[string]*rreplica{}, logs: &logBuffer{}}
	for _, s := range shards {
		w.leases[s] = porttest.NewMemoryCAS(s)
	}
	for _, b := range blocked {
		w.blocked[b] = true
	}
	return w
}

func (w *rworld) start(name string) { w.startAs(name, name) }

// startAs starts replica name whose holder id is holder.
func (w *rworld) startAs(name, holder string) {
	r := &rreplica{keepers: map[string]*domain.LeaseKeeper{}}
	ctx, cancel := context.WithCancel(w.t.Context())
	r.stop = cancel
	m, err := domain.NewMembership(severable{w.members, &r.cut}, w.clk, domain.MemberConfig{Holder: holder, TTL: ttl, RenewInterval: renew, Logger: w.logs.logger()})
	if err != nil {
		w.t.Fatal(err)
	}
	b := domain.NewBalancer(m, w.clk, renew, nil)
	for _, s := range w.shards {
		cfg := domain.LeaseConfig{Holder: holder, TTL: ttl, RenewInterval: renew, Gate: b.Gate(s),
			Retry: domain.RetryPolicy{Jitter: func() float64 { return 0.5 }}}
		if w.blocked[s] {
			cfg.EpochFloor = func(context.Context) (uint64, error) {
				return 0, &domain.CorruptError{Object: "state " + s, Problem: "invalid character"}
			}
		}
		k, err := domain.NewLeaseKeeper(severable{w.leases[s], &r.cut}, w.clk, cfg)
		if err != nil {
			w.t.Fatal(err)
		}
		r.keepers[s] = k
		b.Add(domain.Shard{Name: s, Keeper: k})
		r.wg.Go(func() {
			_ = k.Run(ctx, domain.Callbacks{OnAcquire: func(context.Context, domain.Leadership) {}, OnLose: func(domain.Loss) {}})
		})
	}
	r.wg.Go(func() { b.Run(ctx) })
	w.mu.Lock()
	w.replicas[name] = r
	w.mu.Unlock()
}

func (w *rworld) kill(name string) {
	w.mu.Lock()
	r := w.replicas[name]
	delete(w.replicas, name)
	w.mu.Unlock()
	r.cut.Store(true)
	r.stop()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	settle(w.t, w.clk, time.Hour, closed(done))
}

func (w *rworld) stopAll() {
	w.mu.Lock()
	names := make([]string, 0, len(w.replicas))
	for n := range w.replicas {
		names = append(names, n)
	}
	w.mu.Unlock()
	for _, n := range names {
		w.kill(n)
	}
}

// led is, per live replica, the shards it leads.
func (w *rworld) led() map[string][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string][]string{}
	for name, r := range w.replicas {
		out[name] = []string{}
		for s, k := range r.keepers {
			if k.Status().Role == domain.RoleLeader {
				out[name] = append(out[name], s)
			}
		}
		slices.Sort(out[name])
	}
	return out
}

func (w *rworld) counts() []int {
	var c []int
	for _, l := range w.led() {
		c = append(c, len(l))
	}
	slices.Sort(c)
	return c
}

// waitCounts advances until the sorted counts are want (false after limit).
func (w *rworld) waitCounts(limit time.Duration, want ...int) bool {
	end := w.clk.Now().Add(limit)
	for !slices.Equal(w.counts(), want) {
		if w.clk.Now().After(end) {
			return false
		}
		advance(w.t, w.clk, time.Second)
	}
	return true
}

// One org whose checkpoint document is corrupt (no replica can lead it; its
// lease stays free) must not leave a healthy org unled. Five shards (one
// blocked) over r1, r2, r3 joining in turn: a blocked shard (its keeper
// says why) is left out of the shares, so no claim slot goes to it (once
// r3's only slot went to the blocked shard when it ranked first by
// rendezvous, and a handed-off healthy shard was led by nobody, for good).
func TestBalancerBlockedShardLeavesNoHealthyShardUnled(t *testing.T) {
	healthy := []string{"s1", "s2", "s3", "s4"}
	bad := ""
	for i := 0; bad == ""; i++ {
		c := fmt.Sprintf("bad-%d", i)
		first := true
		for _, s := range healthy {
			if testRendezvous("r3", c) >= testRendezvous("r3", s) {
				first = false
			}
		}
		if first {
			bad = c
		}
	}
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		w := newRWorld(t, clk, append([]string{bad}, healthy...), bad)
		defer w.stopAll()
		w.start("r1")
		if !w.waitCounts(ttl+6*renew, 4) {
			t.Fatalf("r1 alone: %v", w.led())
		}
		w.start("r2")
		advance(t, clk, 2*ttl+10*renew)
		t.Logf("r1, r2: %v", w.led())
		w.start("r3")
		limit := 4*ttl + 20*renew
		advance(t, clk, limit)
		total := 0
		for _, l := range w.led() {
			total += len(l)
		}
		if total != len(healthy) {
			t.Errorf("r3 joined: after %s the replicas lead %v: %d of the %d healthy shards are led by nobody "+
				"(the blocked shard %s takes r3's only claim slot)", limit, w.led(), len(healthy)-total, len(healthy), bad)
		}
	})
}

// A blocked shard (its lease free forever) once kept every replica's view
// "unsettled", so the rule that moves a shard to a starved replica never
// fired (2/1/0 for good). Every replica's keeper now learns it is blocked
// (the balance is asked after the checks that block it) and the shares
// leave it out: 1/1/1.
func TestBalancerBalancesAroundABlockedShard(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		w := newRWorld(t, clk, []string{"bad", "s1", "s2", "s3"}, "bad")
		defer w.stopAll()
		w.start("r1")
		if !w.waitCounts(ttl+6*renew, 3) {
			t.Fatalf("r1 alone: %v", w.led())
		}
		w.start("r2")
		if !w.waitCounts(2*ttl+10*renew, 1, 2) {
			t.Fatalf("r1, r2: %v", w.led())
		}
		w.start("r3")
		if !w.waitCounts(4*ttl+20*renew, 1, 1, 1) {
			t.Errorf("r3 joined: after %s the replicas lead %v, want 1/1/1 (one shard, %q, is blocked everywhere)",
				4*ttl+20*renew, w.led(), "bad")
		}
	})
}

// A rebalancing hand-off (the Balancer's Resign) is graceful: the drain
// runs in OnLose while the keeper keeps renewing, as on a graceful stop, so
// the final commits pass the fence (a Resign once stopped renewing, and a
// drain longer than what was left of the fence lost its final commit).
func TestKeeperRenewsWhileAResignationDrains(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		cas := porttest.NewMemoryCAS("lease")
		k, _ := newKeeper(t, cas, clk, "r1")
		draining, drained := make(chan struct{}), make(chan struct{})
		var fenceMidDrain error
		stop := runWith(t, clk, k, domain.Callbacks{
			OnAcquire: func(context.Context, domain.Leadership) {},
			OnLose: func(l domain.Loss) {
				if l.Graceful {
					return
				}
				close(draining)
				<-drained
			},
		})
		defer stop()
		settle(t, clk, time.Minute, func() bool { return k.Status().Role == domain.RoleLeader })
		advance(t, clk, renew-time.Second) // just before a renewal
		k.Resign("rebalancing: this replica leads 3 shards, the fair share is at most 2", 0)
		settle(t, clk, time.Minute, closed(draining))
		_, before := stored(t, cas)
		advance(t, clk, 20*time.Second) // a drain well within shutdown_grace (25s)
		fenceMidDrain = k.CheckFence()
		_, after := stored(t, cas)
		close(drained)
		synctest.Wait()
		if fenceMidDrain != nil {
			t.Errorf("20s into a rebalancing drain the fence fails (%v); the lease was renewed during the drain: %v",
				fenceMidDrain, before != after)
		}
		settle(t, clk, time.Minute, func() bool { r, _ := stored(t, cas); return r.Holder == "" })
		if r, _ := stored(t, cas); r.Departed != "" {
			t.Errorf("a hand-off is not a stop: the released lease says %q departed, and the others would count it gone", r.Departed)
		}
	})
}

// Two replicas that share a holder id (holder_id set in a shared config
// file, or hostname-pid where every instance is "localhost-1") were
// harmless with one lease: the instance tells them apart. With shards the
// two count as one live replica and the shards cannot be balanced between
// them; the membership says so (one ERROR a minute naming the holder id).
func TestMembershipReportsASharedHolderID(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		w := newRWorld(t, clk, []string{"s1", "s2", "s3", "s4", "s5", "s6"})
		defer w.stopAll()
		w.startAs("p1", "h")
		if !w.waitCounts(ttl+6*renew, 6) {
			t.Fatalf("p1 alone: %v", w.led())
		}
		w.start("z")
		if !w.waitCounts(2*ttl+10*renew, 3, 3) {
			t.Fatalf("p1, z: %v", w.led())
		}
		w.startAs("p2", "h") // same holder id, another process
		advance(t, clk, 3*renew)
		if !strings.Contains(w.logs.String(), "two replicas share the holder id") {
			t.Errorf("a third replica sharing p1's holder id: the replicas lead %v and nothing says why", w.led())
		}
	})
}
