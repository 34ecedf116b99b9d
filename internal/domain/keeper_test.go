package domain_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

func TestNewLeaseKeeperValidatesConfig(t *testing.T) {
	m := porttest.NewMemoryCAS("lease")
	clk := porttest.NewFakeClock(t0)
	good := domain.LeaseConfig{Holder: "a", TTL: ttl, RenewInterval: renew}
	cases := map[string]func(*domain.LeaseConfig){
		"empty holder":            func(c *domain.LeaseConfig) { c.Holder = "" },
		"zero ttl":                func(c *domain.LeaseConfig) { c.TTL = 0 },
		"negative ttl":            func(c *domain.LeaseConfig) { c.TTL = -time.Second },
		"zero renew interval":     func(c *domain.LeaseConfig) { c.RenewInterval = 0 },
		"renew interval = ttl/2":  func(c *domain.LeaseConfig) { c.RenewInterval = ttl / 2 },
		"renew interval > ttl":    func(c *domain.LeaseConfig) { c.RenewInterval = 2 * ttl },
		"request timeout = renew": func(c *domain.LeaseConfig) { c.RequestTimeout = renew },
		"zero attempts":           func(c *domain.LeaseConfig) { c.Retry.MaxAttempts = -1 },
	}
	for name, mutate := range cases {
		cfg := good
		mutate(&cfg)
		if _, err := domain.NewLeaseKeeper(m, clk, cfg); !errors.Is(err, domain.ErrInvalidConfig) {
			t.Errorf("%s: got %v, want ErrInvalidConfig", name, err)
		}
	}
	if _, err := domain.NewLeaseKeeper(nil, clk, good); !errors.Is(err, domain.ErrInvalidConfig) {
		t.Errorf("nil store: got %v", err)
	}
	k, err := domain.NewLeaseKeeper(m, clk, good)
	if err != nil {
		t.Fatalf("valid config rejected: %v", err)
	}
	if k.Instance() == "" {
		t.Fatal("no instance id generated")
	}
	if err := k.Run(t.Context(), domain.Callbacks{}); !errors.Is(err, domain.ErrInvalidConfig) {
		t.Fatalf("Run without callbacks: %v", err)
	}
}

// acquire steps a fresh keeper on an absent lease into leadership.
func acquire(t *testing.T, k *domain.LeaseKeeper) domain.StepResult {
	t.Helper()
	res := k.Step(ctx(t))
	if res.Transition != domain.TransitionAcquired {
		t.Fatalf("expected to acquire, got %+v", res)
	}
	return res
}

func TestLeaseKeeper01_FirstAcquireIsCreateOnlyAtEpoch1(t *testing.T) {
	m := porttest.NewMemoryCAS("lease")
	pres := putPreconditions(m)
	k, rec := newKeeper(t, m, porttest.NewFakeClock(t0), "a")
	res := acquire(t, k)
	if res.Epoch != 1 || res.Role != domain.RoleLeader {
		t.Fatalf("first acquire: %+v, want leader at epoch 1", res)
	}
	if p := pres(); len(p) != 1 || !p[0].IsCreateOnly() {
		t.Fatalf("acquisition preconditions %v, want one create-only", p)
	}
	r, _ := stored(t, m)
	if r.Holder != "a" || r.Instance != "a-instance" || r.Epoch != 1 {
		t.Fatalf("stored lease %+v", r)
	}
	if k.CheckFence() != nil || k.Epoch() != 1 {
		t.Fatalf("fence %v, epoch %d after acquiring", k.CheckFence(), k.Epoch())
	}
	if got := rec.kinds(); len(got) != 1 || got[0] != domain.EventAcquired {
		t.Fatalf("events %v", got)
	}
}

func TestLeaseKeeper02_RenewalIsIfVersionKeepsEpochOneWritePerInterval(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewMemoryCAS("lease")
		k, _ := newKeeper(t, m, clk, "a")
		var mu sync.Mutex
		acquired := 0
		stop := runWith(t, clk, k, domain.Callbacks{
			OnAcquire: func(context.Context, domain.Leadership) { mu.Lock(); acquired++; mu.Unlock() },
			OnLose:    func(domain.Loss) {},
		})
		advance(t, clk, 0)
		_, v := stored(t, m)
		m.ResetCalls()
		pres := putPreconditions(m)
		const rounds = 6
		for i := range rounds {
			advance(t, clk, renew)
			r, nv := stored(t, m)
			if r.Epoch != 1 || r.Renewals != uint64(i+1) || r.Holder != "a" {
				t.Fatalf("after renewal %d: %+v", i+1, r)
			}
			if p := pres(); len(p) != i+1 {
				t.Fatalf("after %d intervals: %d writes", i+1, len(p))
			} else if pv, ok := p[i].Version(); !ok || pv != v {
				t.Fatalf("renewal %d precondition %s, want if-version %q", i+1, p[i], v)
			}
			v = nv
		}
		if got := m.Calls(porttest.OpGet); got != 0 {
			t.Fatalf("the leader read the lease %d times; renewals must not read", got)
		}
		stop()
		if acquired != 1 {
			t.Fatalf("OnAcquire ran %d times", acquired)
		}
	})
}

func TestLeaseKeeper03_LostCASDemotesWithoutReread(t *testing.T) {
	t.Run("renewal", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			m := porttest.NewMemoryCAS("lease")
			k, rec := newKeeper(t, m, clk, "a")
			var calls []string
			stop := runWith(t, clk, k, domain.Callbacks{
				OnAcquire: func(context.Context, domain.Leadership) { calls = append(calls, "acquire") },
				OnLose: func(domain.Loss) {
					if k.CheckFence() == nil {
						t.Error("OnLose after a lost renewal ran with a passing fence")
					}
					calls = append(calls, "lose")
				},
			})
			advance(t, clk, 0)
			plant(m, domain.LeaseRecord{Holder: "b", Instance: "b-1", Epoch: 2})
			m.ResetCalls()
			advance(t, clk, renew)
			if got := strings.Join(calls, ","); got != "acquire,lose" {
				t.Fatalf("callbacks %q, want acquire,lose", got)
			}
			if k.CheckFence() == nil {
				t.Fatal("fence passes after losing the lease")
			}
			if m.Calls(porttest.OpGet) != 0 || m.Calls(porttest.OpPut) != 1 {
				t.Fatalf("after the lost CAS: %d gets, %d puts; want 0 gets (no re-read) and 1 put",
					m.Calls(porttest.OpGet), m.Calls(porttest.OpPut))
			}
			if rec.count(domain.EventLost) != 1 {
				t.Fatalf("events %v", rec.kinds())
			}
			stop()
		})
	})
	t.Run("takeover", func(t *testing.T) {
		clk := porttest.NewFakeClock(t0)
		m := porttest.NewMemoryCAS("lease")
		plant(m, domain.LeaseRecord{Holder: "", Epoch: 4})
		// A competitor lands between our read and our write.
		m.Inject(porttest.Fault{Op: porttest.OpPut, Nth: 1, Before: func() {
			plant(m, domain.LeaseRecord{Holder: "c", Instance: "c-1", Epoch: 5})
		}})
		k, rec := newKeeper(t, m, clk, "a")
		res := k.Step(ctx(t))
		if res.Role != domain.RoleStandby || res.Transition != domain.TransitionNone || res.Next != renew {
			t.Fatalf("lost takeover: %+v, want standby polling again after %s", res, renew)
		}
		if m.Calls(porttest.OpGet) != 1 {
			t.Fatalf("%d reads; a lost takeover must not re-read", m.Calls(porttest.OpGet))
		}
		if rec.count(domain.EventLostRace) != 1 {
			t.Fatalf("events %v", rec.kinds())
		}
		if r, _ := stored(t, m); r.Holder != "c" {
			t.Fatalf("winner's lease overwritten: %+v", r)
		}
	})
}

func TestLeaseKeeper04_TakeoverBumpsEpochByOne(t *testing.T) {
	clk := porttest.NewFakeClock(t0)
	m := porttest.NewMemoryCAS("lease")
	plant(m, domain.LeaseRecord{Holder: "b", Instance: "b-1", Epoch: 7, Renewals: 3})
	k, _ := newKeeper(t, m, clk, "a")
	if res := k.Step(ctx(t)); res.Role != domain.RoleStandby {
		t.Fatalf("took over a fresh lease: %+v", res)
	}
	clk.Advance(ttl)
	res := k.Step(ctx(t))
	if res.Transition != domain.TransitionAcquired || res.Epoch != 8 {
		t.Fatalf("takeover: %+v, want acquired at epoch 8", res)
	}
	if r, _ := stored(t, m); r.Epoch != 8 || r.Holder != "a" {
		t.Fatalf("stored %+v", r)
	}
}

func TestLeaseKeeper05_TransientReadNeverTakesOverOrWrites(t *testing.T) {
	for _, planted := range []bool{true, false} {
		t.Run(fmt.Sprintf("lease present %v", planted), func(t *testing.T) {
			clk := porttest.NewFakeClock(t0)
			m := porttest.NewMemoryCAS("lease")
			if planted {
				plant(m, domain.LeaseRecord{Holder: "b", Instance: "b-1", Epoch: 3})
			}
			m.Inject(porttest.Fault{Op: porttest.OpGet, Err: porttest.ErrUnavailable})
			k, _ := newKeeper(t, m, clk, "a")
			for range 20 {
				res := k.Step(ctx(t))
				if res.Role != domain.RoleStandby || !ports.IsTransient(res.Err) {
					t.Fatalf("step with failing reads: %+v", res)
				}
				clk.Advance(res.Next)
			}
			if m.Calls(porttest.OpPut) != 0 {
				t.Fatalf("%d writes after transient read errors; want none", m.Calls(porttest.OpPut))
			}
		})
	}
}

func TestLeaseKeeper06_LeaderTimestampsNeverMoveTakeover(t *testing.T) {
	for name, expires := range map[string]time.Time{
		"far past":   t0.Add(-1000 * time.Hour),
		"far future": t0.Add(1000 * time.Hour),
	} {
		t.Run(name, func(t *testing.T) {
			clk := porttest.NewFakeClock(t0)
			m := porttest.NewMemoryCAS("lease")
			plant(m, domain.LeaseRecord{Holder: "b", Instance: "b-1", Epoch: 1, RenewedAt: expires, ExpiresAt: expires})
			k, _ := newKeeper(t, m, clk, "a")
			if res := k.Step(ctx(t)); res.Role != domain.RoleStandby {
				t.Fatalf("first sight: %+v", res)
			}
			clk.Advance(ttl - time.Nanosecond)
			if res := k.Step(ctx(t)); res.Role != domain.RoleStandby || res.Next != time.Nanosecond {
				t.Fatalf("1ns before ttl of observation: %+v, want standby, next look in 1ns", res)
			}
			clk.Advance(time.Nanosecond)
			if res := k.Step(ctx(t)); res.Transition != domain.TransitionAcquired {
				t.Fatalf("at exactly ttl of observation: %+v, want takeover", res)
			}
		})
	}
	t.Run("a version change restarts the observation", func(t *testing.T) {
		clk := porttest.NewFakeClock(t0)
		m := porttest.NewMemoryCAS("lease")
		plant(m, domain.LeaseRecord{Holder: "b", Instance: "b-1", Epoch: 1})
		k, _ := newKeeper(t, m, clk, "a")
		k.Step(ctx(t))
		clk.Advance(ttl - time.Second)
		plant(m, domain.LeaseRecord{Holder: "b", Instance: "b-1", Epoch: 1, Renewals: 1})
		k.Step(ctx(t))
		clk.Advance(ttl - time.Second)
		if res := k.Step(ctx(t)); res.Role != domain.RoleStandby {
			t.Fatalf("took over %s after the last change: %+v", ttl-time.Second, res)
		}
		clk.Advance(time.Second)
		if res := k.Step(ctx(t)); res.Transition != domain.TransitionAcquired {
			t.Fatalf("not taken over after ttl unchanged: %+v", res)
		}
	})
	t.Run("a longer ttl in the record is honoured", func(t *testing.T) {
		clk := porttest.NewFakeClock(t0)
		m := porttest.NewMemoryCAS("lease")
		plant(m, domain.LeaseRecord{Holder: "b", Instance: "b-1", Epoch: 1, TTL: "1m"})
		k, _ := newKeeper(t, m, clk, "a")
		k.Step(ctx(t))
		clk.Advance(ttl)
		if res := k.Step(ctx(t)); res.Role != domain.RoleStandby {
			t.Fatalf("took over a 1m lease after %s: %+v", ttl, res)
		}
		clk.Advance(time.Minute - ttl)
		if res := k.Step(ctx(t)); res.Transition != domain.TransitionAcquired {
			t.Fatalf("not taken over after 1m: %+v", res)
		}
	})
}

func TestLeaseKeeper07_TwoStandbysRaceOneWinner(t *testing.T) {
	clk := porttest.NewFakeClock(t0)
	m := porttest.NewMemoryCAS("lease")
	plant(m, domain.LeaseRecord{Holder: "old", Instance: "old-1", Epoch: 5})
	a, recA := newKeeper(t, m, clk, "a")
	b, recB := newKeeper(t, m, clk, "b")
	a.Step(ctx(t))
	b.Step(ctx(t))
	clk.Advance(ttl)
	// Hold both writes until both are in flight, so both decided on the same
	// stale version.
	var arrived sync.WaitGroup
	arrived.Add(2)
	m.Inject(porttest.Fault{Op: porttest.OpPut, Times: 2, Before: func() { arrived.Done(); arrived.Wait() }})
	results := make([]domain.StepResult, 2)
	var wg sync.WaitGroup
	for i, k := range []*domain.LeaseKeeper{a, b} {
		wg.Go(func() { results[i] = k.Step(ctx(t)) })
	}
	wg.Wait()
	winners := 0
	for _, r := range results {
		if r.Transition == domain.TransitionAcquired {
			winners++
			if r.Epoch != 6 {
				t.Fatalf("winner epoch %d, want 6", r.Epoch)
			}
		}
	}
	if winners != 1 {
		t.Fatalf("%d winners: %+v", winners, results)
	}
	if recA.count(domain.EventLostRace)+recB.count(domain.EventLostRace) != 1 {
		t.Fatalf("the loser did not observe the lost CAS: a=%v b=%v", recA.kinds(), recB.kinds())
	}
	if (a.CheckFence() == nil) == (b.CheckFence() == nil) {
		t.Fatal("both or neither fence passes")
	}
}

func TestLeaseKeeper08_CheckFenceFailsOnLossAndAtDeadline(t *testing.T) {
	t.Run("after loss", func(t *testing.T) {
		clk := porttest.NewFakeClock(t0)
		m := porttest.NewMemoryCAS("lease")
		k, _ := newKeeper(t, m, clk, "a")
		if err := k.CheckFence(); !errors.Is(err, domain.ErrFenced) {
			t.Fatalf("fence before acquiring: %v", err)
		}
		acquire(t, k)
		plant(m, domain.LeaseRecord{Holder: "b", Instance: "b-1", Epoch: 9})
		clk.Advance(renew)
		k.Step(ctx(t))
		err := k.CheckFence()
		var fe *domain.FenceError
		if !errors.As(err, &fe) || !strings.Contains(err.Error(), "taken over") {
			t.Fatalf("fence after loss: %v", err)
		}
	})
	t.Run("at the deadline while a renewal hangs", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			m := porttest.NewMemoryCAS("lease", porttest.WithClock(clk))
			// Every renewal hangs for an hour (far beyond any timeout).
			m.Inject(porttest.Fault{Op: porttest.OpPut, When: func(c porttest.Call) bool { return c.N > 1 }, Delay: time.Hour})
			k, rec := newKeeper(t, m, clk, "a")
			var lost []domain.Loss
			stop := runWith(t, clk, k, domain.Callbacks{
				OnAcquire: func(context.Context, domain.Leadership) {},
				OnLose:    func(l domain.Loss) { lost = append(lost, l) },
			})
			advance(t, clk, 0)
			deadline := t0.Add(ttl - renew/2)
			if got := k.Status().FenceDeadline; !got.Equal(deadline) {
				t.Fatalf("fence deadline %v, want sentAt+ttl-renew/2 = %v", got, deadline)
			}
			advance(t, clk, deadline.Sub(clk.Now())-time.Nanosecond)
			if err := k.CheckFence(); err != nil {
				t.Fatalf("fence 1ns before the deadline: %v", err)
			}
			if len(lost) != 0 {
				t.Fatal("demoted before the deadline")
			}
			advance(t, clk, time.Nanosecond)
			if err := k.CheckFence(); !errors.Is(err, domain.ErrFenced) {
				t.Fatalf("fence at the deadline: %v", err)
			}
			if len(lost) != 1 || lost[0].Graceful {
				t.Fatalf("OnLose at the deadline: %+v", lost)
			}
			if rec.count(domain.EventFenced) != 1 {
				t.Fatalf("events %v", rec.kinds())
			}
			stop()
		})
	})
}

func TestLeaseKeeper09_RenewalRetryVerifiesBeforeDemoting(t *testing.T) {
	t.Run("own write landed", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			m := porttest.NewMemoryCAS("lease")
			logs := &logBuffer{}
			k, rec := newKeeper(t, m, clk, "a", func(c *domain.LeaseConfig) { c.Logger = logs.logger() })
			acquire(t, k)
			m.Inject(porttest.Fault{Op: porttest.OpPut, ApplyFirst: true, Times: 1})
			clk.Advance(renew)
			var res domain.StepResult
			call(t, clk, func() { res = k.Step(ctx(t)) })
			if res.Role != domain.RoleLeader || k.CheckFence() != nil {
				t.Fatalf("after a recovered lost ack: %+v", res)
			}
			_, v := stored(t, m)
			if k.Status().Version != v {
				t.Fatalf("cached version %q, stored %q: not re-synced", k.Status().Version, v)
			}
			if rec.count(domain.EventRecoveredLostAck) != 1 || !strings.Contains(logs.String(), "level=WARN") {
				t.Fatalf("recovery not reported: events %v, logs %q", rec.kinds(), logs.String())
			}
			clk.Advance(renew)
			if res := k.Step(ctx(t)); res.Role != domain.RoleLeader || res.Err != nil {
				t.Fatalf("next renewal after recovery: %+v", res)
			}
		})
	})
	t.Run("someone else's write", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			m := porttest.NewMemoryCAS("lease")
			k, rec := newKeeper(t, m, clk, "a")
			acquire(t, k)
			m.ResetCalls()
			m.Inject(porttest.Fault{Op: porttest.OpPut, Nth: 1, Err: porttest.ErrUnavailable})
			m.Inject(porttest.Fault{Op: porttest.OpPut, Nth: 2, Before: func() {
				plant(m, domain.LeaseRecord{Holder: "b", Instance: "b-1", Epoch: 2})
			}})
			clk.Advance(renew)
			var res domain.StepResult
			call(t, clk, func() { res = k.Step(ctx(t)) })
			if res.Transition != domain.TransitionLost || k.CheckFence() == nil {
				t.Fatalf("after a verified loss: %+v", res)
			}
			if m.Calls(porttest.OpGet) != 1 {
				t.Fatalf("%d reads, want exactly one verifying read", m.Calls(porttest.OpGet))
			}
			if rec.count(domain.EventRecoveredLostAck) != 0 || rec.count(domain.EventLost) != 1 {
				t.Fatalf("events %v", rec.kinds())
			}
		})
	})
}

// runKeeper runs k in the bubble, logging its callbacks, and returns the
// log and a stop function that waits for Run to return.
func runKeeper(t *testing.T, clk *porttest.FakeClock, k *domain.LeaseKeeper) (log func() []string, stop func()) {
	t.Helper()
	var mu sync.Mutex
	var calls []string
	stop = runWith(t, clk, k, domain.Callbacks{
		OnAcquire: func(_ context.Context, l domain.Leadership) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, fmt.Sprintf("acquire@%d", l.Epoch))
		},
		OnLose: func(l domain.Loss) {
			mu.Lock()
			defer mu.Unlock()
			calls = append(calls, fmt.Sprintf("lose@%d graceful=%v fence=%v", l.Epoch, l.Graceful, k.CheckFence() == nil))
		},
	})
	log = func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), calls...)
	}
	return log, stop
}

func TestLeaseKeeper10_GracefulStopReleasesForImmediateTakeover(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewMemoryCAS("lease")
		a, _ := newKeeper(t, m, clk, "a")
		log, stop := runKeeper(t, clk, a)
		advance(t, clk, 2*renew)
		stop()
		if got := strings.Join(log(), "; "); got != "acquire@1; lose@1 graceful=true fence=true" {
			t.Fatalf("callbacks %q: OnLose on graceful stop must run with a valid fence", got)
		}
		r, _ := stored(t, m)
		if r.Holder != "" || r.Epoch != 1 || r.Departed != "a" {
			t.Fatalf("after release: %+v, want empty holder at epoch 1, departed a", r)
		}
		if a.CheckFence() == nil {
			t.Fatal("fence passes after release")
		}
		gate := &testGate{}
		b, _ := newKeeper(t, m, clk, "b", func(c *domain.LeaseConfig) { c.Gate = gate })
		gate.k = b
		if res := b.Step(ctx(t)); res.Role != domain.RoleStandby || b.Status().Departed != "a" || !b.Status().Free {
			t.Fatalf("a standby reading a lease released on a stop must say who departed: %+v, status %+v", res, b.Status())
		}
		gate.allow.Store(true)
		res := b.Step(ctx(t))
		if res.Transition != domain.TransitionAcquired || res.Epoch != 2 {
			t.Fatalf("standby after a release: %+v, want immediate acquisition at epoch 2", res)
		}
	})
}

func TestLeaseKeeper10_GracefulDrainKeepsRenewing(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewMemoryCAS("lease")
		k, rec := newKeeper(t, m, clk, "a")
		drainFor := 3 * ttl
		var fenceDuringDrain []bool
		stop := runWith(t, clk, k, domain.Callbacks{
			OnAcquire: func(context.Context, domain.Leadership) {},
			OnLose: func(domain.Loss) {
				for range 3 {
					<-clk.After(drainFor / 3)
					fenceDuringDrain = append(fenceDuringDrain, k.CheckFence() == nil)
				}
			},
		})
		advance(t, clk, 0)
		stop()
		for i, ok := range fenceDuringDrain {
			if !ok {
				t.Fatalf("fence failed %d/3 through a %s drain: renewals must continue while draining", i+1, drainFor)
			}
		}
		if n := rec.count(domain.EventRenewed); n < 8 {
			t.Fatalf("%d renewals during a %s drain", n, drainFor)
		}
		if r, _ := stored(t, m); r.Holder != "" {
			t.Fatalf("not released after the drain: %+v", r)
		}
	})
}

func TestLeaseKeeper11_EpochNeverGoesBackwards(t *testing.T) {
	t.Run("lease deleted after epoch 5 was seen", func(t *testing.T) {
		clk := porttest.NewFakeClock(t0)
		m := porttest.NewMemoryCAS("lease")
		plant(m, domain.LeaseRecord{Holder: "b", Instance: "b-1", Epoch: 5})
		k, _ := newKeeper(t, m, clk, "a")
		k.Step(ctx(t))
		m.Remove()
		clk.Advance(renew)
		if res := k.Step(ctx(t)); res.Epoch != 6 {
			t.Fatalf("acquired %+v, want epoch 6", res)
		}
	})
	t.Run("lease corrupted after epoch 5 was seen", func(t *testing.T) {
		clk := porttest.NewFakeClock(t0)
		m := porttest.NewMemoryCAS("lease")
		plant(m, domain.LeaseRecord{Holder: "b", Instance: "b-1", Epoch: 5})
		k, _ := newKeeper(t, m, clk, "a")
		k.Step(ctx(t))
		m.Store([]byte("{garbage"))
		clk.Advance(renew)
		if res := k.Step(ctx(t)); res.Role != domain.RoleStandby {
			t.Fatalf("took over a corrupt lease at first sight: %+v", res)
		}
		clk.Advance(ttl)
		if res := k.Step(ctx(t)); res.Epoch != 6 {
			t.Fatalf("acquired %+v, want epoch 6", res)
		}
	})
	t.Run("checkpoint document carries epoch 9", func(t *testing.T) {
		clk := porttest.NewFakeClock(t0)
		lease := porttest.NewMemoryCAS("lease")
		state := porttest.NewMemoryCAS("state")
		state.Store([]byte(`{"k":"v","__fence_epoch__":"9"}`))
		c, err := domain.NewCheckpointCommitter(state, clk, domain.CommitterConfig{})
		if err != nil {
			t.Fatal(err)
		}
		k, _ := newKeeper(t, lease, clk, "a", func(cfg *domain.LeaseConfig) { cfg.EpochFloor = c.StoredEpoch })
		if res := k.Step(ctx(t)); res.Epoch != 10 {
			t.Fatalf("acquired %+v, want epoch 10", res)
		}
	})
	t.Run("unreadable epoch floor means no acquisition", func(t *testing.T) {
		clk := porttest.NewFakeClock(t0)
		m := porttest.NewMemoryCAS("lease")
		k, _ := newKeeper(t, m, clk, "a", func(cfg *domain.LeaseConfig) {
			cfg.EpochFloor = func(context.Context) (uint64, error) { return 0, porttest.ErrUnavailable }
		})
		if res := k.Step(ctx(t)); res.Role != domain.RoleStandby || m.Calls(porttest.OpPut) != 0 {
			t.Fatalf("acquired without knowing the epoch floor: %+v", res)
		}
	})
}

func TestLeaseKeeper12_SameHolderOtherInstanceIsForeign(t *testing.T) {
	clk := porttest.NewFakeClock(t0)
	m := porttest.NewMemoryCAS("lease")
	plant(m, domain.LeaseRecord{Holder: "a", Instance: "a-previous-process", Epoch: 3})
	k, _ := newKeeper(t, m, clk, "a")
	if res := k.Step(ctx(t)); res.Role != domain.RoleStandby {
		t.Fatalf("took over a lease of another instance with our holder id at once: %+v", res)
	}
	clk.Advance(ttl)
	if res := k.Step(ctx(t)); res.Transition != domain.TransitionAcquired || res.Epoch != 4 {
		t.Fatalf("after ttl: %+v", res)
	}
	// A lease naming this very instance (left by a fenced leadership) is
	// reclaimed at once, with a new epoch.
	clk.Advance(ttl)
	if !k.Expire() {
		t.Fatal("Expire did not end a leadership past its deadline")
	}
	if res := k.Step(ctx(t)); res.Transition != domain.TransitionAcquired || res.Epoch != 5 {
		t.Fatalf("reclaiming our own lease: %+v", res)
	}
}

func TestLeaseKeeper13_AcquireAndLoseStrictlyAlternate(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewMemoryCAS("lease")
		k, _ := newKeeper(t, m, clk, "a")
		log, stop := runKeeper(t, clk, k)
		advance(t, clk, renew/2)
		plant(m, domain.LeaseRecord{Holder: "b", Instance: "b-1", Epoch: 2})
		advance(t, clk, renew)       // renewal loses the CAS
		advance(t, clk, ttl+2*renew) // b's lease goes stale; a takes over
		m.Inject(porttest.Fault{Op: porttest.OpPut, Err: porttest.ErrUnavailable})
		advance(t, clk, ttl) // renewals fail; a fences itself
		m.ClearFaults()
		advance(t, clk, renew) // a reclaims its own lease at once
		stop()
		want := []string{
			"acquire@1", "lose@1 graceful=false fence=false",
			"acquire@3", "lose@3 graceful=false fence=false",
			"acquire@4", "lose@4 graceful=true fence=true",
		}
		if got := log(); strings.Join(got, "; ") != strings.Join(want, "; ") {
			t.Fatalf("callbacks\n got %q\nwant %q", got, want)
		}
	})
}

func TestLeaseKeeper14_ObserverReportsExactSequence(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewMemoryCAS("lease")
		k, rec := newKeeper(t, m, clk, "a")
		_, stop := runKeeper(t, clk, k)
		advance(t, clk, renew)
		stop()
		want := []domain.EventKind{domain.EventAcquired, domain.EventRenewed, domain.EventLost, domain.EventReleased}
		got := rec.kinds()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("events %v, want %v", got, want)
		}
		for _, e := range rec.all() {
			if e.Holder != "a" || e.Instance != "a-instance" || e.Epoch != 1 || e.Backend != "mem://lease" || e.Reason == "" {
				t.Fatalf("event lacks identity: %+v", e)
			}
		}
	})
	t.Run("renewed after failure and recovered lost ack", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			m := porttest.NewMemoryCAS("lease")
			k, rec := newKeeper(t, m, clk, "a")
			acquire(t, k)
			m.Inject(porttest.Fault{Op: porttest.OpPut, Err: porttest.ErrUnavailable, Times: 4})
			clk.Advance(renew)
			call(t, clk, func() { k.Step(ctx(t)) })
			m.Inject(porttest.Fault{Op: porttest.OpPut, ApplyFirst: true, Times: 1})
			clk.Advance(renew)
			call(t, clk, func() { k.Step(ctx(t)) })
			want := []domain.EventKind{domain.EventAcquired, domain.EventRenewFailed,
				domain.EventRecoveredLostAck, domain.EventRenewedAfterFailure}
			if got := rec.kinds(); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("events %v, want %v", got, want)
			}
			if e := rec.all()[3]; e.Failures != 1 || e.Attempts != 2 {
				t.Fatalf("renewed-after-failure event %+v", e)
			}
		})
	})
}

// Found by the simulation (seed 316): the observation window must start when
// the read's answer arrives. A read delayed in flight can return a Version
// that was written long after the request left.
func TestLeaseKeeper06_DelayedReadStartsObservationAtAnswer(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewMemoryCAS("lease", porttest.WithClock(clk))
		plant(m, domain.LeaseRecord{Holder: "b", Instance: "b-1", Epoch: 1})
		m.Inject(porttest.Fault{Op: porttest.OpGet, Nth: 1, Delay: 4 * time.Second, Before: func() {
			plant(m, domain.LeaseRecord{Holder: "b", Instance: "b-1", Epoch: 1, Renewals: 1})
		}})
		k, _ := newKeeper(t, m, clk, "a")
		call(t, clk, func() { k.Step(ctx(t)) })
		answered := clk.Now()
		clk.Advance(ttl - time.Second)
		if res := k.Step(ctx(t)); res.Role != domain.RoleStandby {
			t.Fatalf("took over %s after the answer (%s after the send): %+v", ttl-time.Second, clk.Now().Sub(t0), res)
		}
		clk.Set(answered.Add(ttl))
		if res := k.Step(ctx(t)); res.Transition != domain.TransitionAcquired {
			t.Fatalf("not taken over ttl after the answer: %+v", res)
		}
	})
}

// testGate is a ClaimGate a test opens and closes; it records, at each
// ClaimEnded, whether the keeper then led.
type testGate struct {
	allow atomic.Bool
	k     *domain.LeaseKeeper
	mu    sync.Mutex
	ended []domain.Role
}

func (g *testGate) MayClaim() bool { return g.allow.Load() }

func (g *testGate) ClaimEnded() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.ended = append(g.ended, g.k.Status().Role)
}

func (g *testGate) endings() []domain.Role {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Clone(g.ended)
}

// The gate decides a claim of a free lease (the shard balance), never a
// renewal; Status.Free says the lease could be claimed. Every claim the
// gate allowed ends with ClaimEnded, once, after the keeper leads (a won
// claim) or not (a lost one), so that the balance counts it as led until
// then.
func TestKeeperGateDecidesAClaimOfAFreeLease(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewMemoryCAS("lease")
		g := &testGate{}
		k, _ := newKeeper(t, m, clk, "a", func(c *domain.LeaseConfig) { c.Gate = g })
		g.k = k
		r := k.Step(ctx(t))
		if r.Role != domain.RoleStandby || !strings.Contains(r.Reason, "not contending") || !k.Status().Free {
			t.Fatalf("gated: %+v, status %+v", r, k.Status())
		}
		if len(putPreconditions(m)()) != 0 || len(g.endings()) != 0 {
			t.Fatalf("a gated keeper wrote the lease, or ended a claim it never made: %v", g.endings())
		}
		g.allow.Store(true)
		if r := k.Step(ctx(t)); r.Role != domain.RoleLeader {
			t.Fatalf("allowed: %+v", r)
		}
		if got := g.endings(); !slices.Equal(got, []domain.Role{domain.RoleLeader}) {
			t.Fatalf("a won claim must end once, with the keeper leading: %v", got)
		}
		g.allow.Store(false)
		advance(t, clk, 5*time.Second)
		if r := k.Step(ctx(t)); r.Role != domain.RoleLeader {
			t.Fatalf("a leader renews whatever the gate says: %+v", r)
		}
		if got := g.endings(); len(got) != 1 {
			t.Fatalf("a renewal is no claim: %v", got)
		}

		// A claim that loses its race ends too, the keeper standing by.
		m2 := porttest.NewMemoryCAS("lease2")
		g2 := &testGate{}
		g2.allow.Store(true)
		k2, _ := newKeeper(t, m2, clk, "b", func(c *domain.LeaseConfig) { c.Gate = g2 })
		g2.k = k2
		m2.Inject(porttest.Fault{Op: porttest.OpPut, Times: 1, Before: func() { m2.Store([]byte(`{"holder":"c","epoch":9}`)) }})
		if r := k2.Step(ctx(t)); r.Role != domain.RoleStandby {
			t.Fatalf("a lost race: %+v", r)
		}
		if got := g2.endings(); !slices.Equal(got, []domain.Role{domain.RoleStandby}) {
			t.Fatalf("a lost claim must end once, the keeper standing by: %v", got)
		}
	})
}
