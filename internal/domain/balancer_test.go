package domain_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// severable is a replica's link to the store: once cut, every request
// fails (a killed process, as the store sees it).
type severable struct {
	ports.ObjectCAS
	cut *atomic.Bool
}

var errSevered = ports.Transient("test", errors.New("the replica is dead"))

func (s severable) Get(ctx context.Context) (ports.Object, error) {
	if s.cut.Load() {
		return ports.Object{}, errSevered
	}
	return s.ObjectCAS.Get(ctx)
}

func (s severable) Put(ctx context.Context, data []byte, pre ports.Precondition) (ports.Version, error) {
	if s.cut.Load() {
		return "", errSevered
	}
	return s.ObjectCAS.Put(ctx, data, pre)
}

// shardWorld is replicas sharing shard leases and a members document.
type shardWorld struct {
	t       *testing.T
	clk     *porttest.FakeClock
	leases  map[string]*porttest.MemoryCAS
	members *porttest.MemoryCAS
	shards  []string

	mu       sync.Mutex
	replicas map[string]*shardReplica
	leading  map[string]map[string]bool // shard → replicas whose OnAcquire ran without OnLose
}

type shardReplica struct {
	name    string
	cut     atomic.Bool
	stop    context.CancelFunc
	done    sync.WaitGroup
	keepers map[string]*domain.LeaseKeeper
}

func newShardWorld(t *testing.T, clk *porttest.FakeClock, shards int) *shardWorld {
	w := &shardWorld{t: t, clk: clk, leases: map[string]*porttest.MemoryCAS{}, members: porttest.NewMemoryCAS("members"),
		replicas: map[string]*shardReplica{}, leading: map[string]map[string]bool{}}
	for i := range shards {
		name := fmt.Sprintf("org-%d", i)
		w.shards = append(w.shards, name)
		w.leases[name] = porttest.NewMemoryCAS(name)
		w.leading[name] = map[string]bool{}
	}
	return w
}

func (w *shardWorld) start(name string) {
	r := &shardReplica{name: name, keepers: map[string]*domain.LeaseKeeper{}}
	ctx, cancel := context.WithCancel(w.t.Context())
	r.stop = cancel
	m, err := domain.NewMembership(severable{w.members, &r.cut}, w.clk, domain.MemberConfig{Holder: name, TTL: ttl, RenewInterval: renew})
	if err != nil {
		w.t.Fatal(err)
	}
	b := domain.NewBalancer(m, w.clk, renew, nil)
	for _, s := range w.shards {
		k, err := domain.NewLeaseKeeper(severable{w.leases[s], &r.cut}, w.clk, domain.LeaseConfig{Holder: name, TTL: ttl, RenewInterval: renew,
			Gate: b.Gate(s), Retry: domain.RetryPolicy{Jitter: func() float64 { return 0.5 }}})
		if err != nil {
			w.t.Fatal(err)
		}
		r.keepers[s] = k
		b.Add(domain.Shard{Name: s, Keeper: k})
		r.done.Go(func() {
			_ = k.Run(ctx, domain.Callbacks{
				OnAcquire: func(context.Context, domain.Leadership) { w.lead(s, name, true) },
				OnLose:    func(domain.Loss) { w.lead(s, name, false) },
			})
		})
	}
	r.done.Go(func() { b.Run(ctx) })
	w.mu.Lock()
	w.replicas[name] = r
	w.mu.Unlock()
}

// lead records a leadership change and checks that no shard has two
// leaders whose fences are valid at once.
func (w *shardWorld) lead(shard, replica string, on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !on {
		delete(w.leading[shard], replica)
		return
	}
	for other := range w.leading[shard] {
		if r := w.replicas[other]; r != nil && r.keepers[shard].CheckFence() == nil {
			w.t.Errorf("%s: %s acquired while %s still passes the fence", shard, replica, other)
		}
	}
	w.leading[shard][replica] = true
}

// kill cuts a replica off the store and stops it (no release reaches the
// store).
func (w *shardWorld) kill(name string) {
	w.mu.Lock()
	r := w.replicas[name]
	delete(w.replicas, name)
	w.mu.Unlock()
	r.cut.Store(true)
	r.end(w.t, w.clk)
}

// end stops the replica and waits for its goroutines, moving the clock.
func (r *shardReplica) end(t *testing.T, clk *porttest.FakeClock) {
	r.stop()
	done := make(chan struct{})
	go func() { r.done.Wait(); close(done) }()
	settle(t, clk, time.Hour, closed(done))
}

// counts is how many shards each live replica leads (by its keepers).
func (w *shardWorld) counts() map[string]int {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[string]int{}
	for name, r := range w.replicas {
		out[name] = 0
		for _, k := range r.keepers {
			if k.Status().Role == domain.RoleLeader {
				out[name]++
			}
		}
	}
	return out
}

func (w *shardWorld) balanced(want ...int) bool {
	var got []int
	total := 0
	for _, n := range w.counts() {
		got = append(got, n)
		total += n
	}
	slices.Sort(got)
	return total == len(w.shards) && slices.Equal(got, want)
}

// within advances the clock until the counts are want, failing after limit.
func (w *shardWorld) within(limit time.Duration, want ...int) time.Duration {
	w.t.Helper()
	start := w.clk.Now()
	for !w.balanced(want...) {
		if w.clk.Now().Sub(start) > limit {
			w.t.Fatalf("counts %v after %s, want %v", w.counts(), limit, want)
		}
		advance(w.t, w.clk, time.Second)
	}
	return w.clk.Now().Sub(start)
}

// Three replicas over six shards settle at 2/2/2; a killed replica's two
// shards move within ttl and a few renew intervals (3/3); it comes back and
// the shards spread again (2/2/2); a replica stopping gracefully hands its
// shards off within a few renew intervals. No shard ever has two leaders
// passing its fence.
func TestBalancerSpreadsShardsOverReplicas(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		w := newShardWorld(t, clk, 6)
		for _, r := range []string{"r1", "r2", "r3"} {
			w.start(r)
		}
		t.Logf("settled 2/2/2 after %s", w.within(8*renew, 2, 2, 2))
		advance(t, clk, 3*renew)
		if !w.balanced(2, 2, 2) {
			t.Fatalf("moved at steady state: %v", w.counts())
		}
		w.kill("r2")
		// ttl + renew from its last renewal, plus the claim; when two replicas
		// ask for one shard at once, the other waits for the loser's next poll.
		took := w.within(ttl+2*renew, 3, 3)
		t.Logf("r2 killed: its shards moved after %s (ttl %s, renew %s)", took, ttl, renew)
		w.start("r2")
		t.Logf("r2 back: 2/2/2 after %s", w.within(ttl+6*renew, 2, 2, 2))
		w.mu.Lock()
		r3 := w.replicas["r3"]
		w.mu.Unlock()
		r3.end(t, clk) // graceful: its keepers release, it leaves the membership
		w.mu.Lock()
		delete(w.replicas, "r3")
		w.mu.Unlock()
		t.Logf("r3 stopped: 3/3 after %s", w.within(3*renew, 3, 3))
		for _, r := range []string{"r1", "r2"} {
			w.kill(r)
		}
	})
}
