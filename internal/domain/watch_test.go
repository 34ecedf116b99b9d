package domain_test

import (
	"context"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// nop callbacks for keepers whose work does not matter.
var nopCallbacks = domain.Callbacks{OnAcquire: func(context.Context, domain.Leadership) {}, OnLose: func(domain.Loss) {}}

// acquiredAt returns when the recorder's first acquisition happened.
func acquiredAt(r *recorder) (time.Time, bool) {
	for _, e := range r.all() {
		if e.Kind == domain.EventAcquired {
			return e.At, true
		}
	}
	return time.Time{}, false
}

// leaderAndStandby starts a, waits until it leads, then starts b.
func leaderAndStandby(t *testing.T, clk *porttest.FakeClock, m *porttest.WatchedMemory, opts ...keeperOpt) (a, b *domain.LeaseKeeper,
	ra, rb *recorder, stopA, stopB func()) {
	t.Helper()
	a, ra = newKeeper(t, m, clk, "a", opts...)
	stopA = runWith(t, clk, a, nopCallbacks)
	settle(t, clk, time.Minute, func() bool { return a.Status().Role == domain.RoleLeader })
	b, rb = newKeeper(t, m, clk, "b", opts...)
	stopB = runWith(t, clk, b, nopCallbacks)
	advance(t, clk, renew)
	return a, b, ra, rb, stopA, stopB
}

// A graceful stop releases the lease; a watching standby claims it at the
// instant of the release, where a polling one waits for its next poll.
func TestAWatchingStandbyClaimsAReleaseAtOnce(t *testing.T) {
	for _, tc := range []struct {
		name    string
		opts    []keeperOpt
		atOnce  bool
		watched bool
	}{
		{"watching", nil, true, true},
		{"polling", []keeperOpt{func(c *domain.LeaseConfig) { c.Poll = true }}, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
				m := porttest.NewWatchedMemory(porttest.NewMemoryCAS("lease"))
				_, b, ra, rb, stopA, stopB := leaderAndStandby(t, clk, m, tc.opts...)
				defer stopB()
				if got := b.Status().Watching; got != tc.watched {
					t.Fatalf("standby watching = %v, want %v", got, tc.watched)
				}
				advance(t, clk, renew/3) // mid-way between two polls
				stopA()
				settle(t, clk, time.Minute, func() bool { return b.Status().Role == domain.RoleLeader })
				var released time.Time
				for _, e := range ra.all() {
					if e.Kind == domain.EventReleased {
						released = e.At
					}
				}
				got, _ := acquiredAt(rb)
				waited := got.Sub(released)
				if tc.atOnce && waited != 0 {
					t.Fatalf("the watching standby claimed %s after the release, want at once", waited)
				}
				if !tc.atOnce && waited <= 0 {
					t.Fatalf("the polling standby claimed %s after the release: the comparison is void", waited)
				}
			})
		})
	}
}

// While the leader renews, a watching standby sends no request at all; a
// polling one reads the lease every renew_interval.
func TestAWatchingStandbyDoesNotPoll(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewWatchedMemory(porttest.NewMemoryCAS("lease"))
		a, b, _, _, stopA, stopB := leaderAndStandby(t, clk, m)
		defer stopA()
		defer stopB()
		m.ResetCalls()
		advance(t, clk, 10*time.Minute)
		if got := m.Calls(porttest.OpGet); got != 0 {
			t.Fatalf("the standby read the lease %d times in 10 minutes while watching it", got)
		}
		if a.Status().Role != domain.RoleLeader || b.Status().Role != domain.RoleStandby || !b.Status().Watching {
			t.Fatalf("roles changed: a %v, b %+v", a.Status().Role, b.Status())
		}
		if running, _ := m.Watches(); running != 1 {
			t.Fatalf("%d watches run, want the standby's only (a leader does not watch)", running)
		}
	})
}

// A watch that silently stops reporting (every change dropped) must never
// let a standby take over from a live leader: it looks again with a read
// when the last version it saw would go stale, sees the renewal, and waits.
func TestASilentWatchNeverLetsAStandbyClaimEarly(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewWatchedMemory(porttest.NewMemoryCAS("lease"))
		a, b, ra, rb, stopA, stopB := leaderAndStandby(t, clk, m)
		defer stopB()
		m.Mute(true)
		m.ResetCalls()
		advance(t, clk, 10*time.Minute)
		if n := rb.count(domain.EventAcquired); n != 0 || a.Status().Role != domain.RoleLeader {
			t.Fatalf("with every change dropped, the standby acquired %d times beside a live leader (a %v)", n, a.Status().Role)
		}
		if n := ra.count(domain.EventLost) + ra.count(domain.EventFenced); n != 0 {
			t.Fatalf("the live leader lost its lease %d times", n)
		}
		// It looks once per ttl−renew_interval of a version it believes
		// unchanged (an observation within every ttl keeps it ready).
		if got, most := m.Calls(porttest.OpGet), int(10*time.Minute/(ttl-renew))+1; got > most {
			t.Fatalf("the standby read the lease %d times in 10 minutes, want at most %d (once per ttl−renew)", got, most)
		}
		stopA()
		_ = b
	})
}

// A dead holder's lease (never renewed) is taken over once it is unchanged
// for ttl on the standby's clock, whether the watch reports or is silent.
func TestAWatchingStandbyTakesOverADeadHolderAfterTTL(t *testing.T) {
	for _, muted := range []bool{false, true} {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			m := porttest.NewWatchedMemory(porttest.NewMemoryCAS("lease"))
			plant(m.MemoryCAS, domain.LeaseRecord{Holder: "dead", Instance: "dead-1", Epoch: 4, TTL: ttl.String()})
			m.Mute(muted)
			b, rb := newKeeper(t, m, clk, "b")
			start := clk.Now()
			stop := runWith(t, clk, b, nopCallbacks)
			defer stop()
			settle(t, clk, 5*time.Minute, func() bool { return b.Status().Role == domain.RoleLeader })
			got, _ := acquiredAt(rb)
			if d := got.Sub(start); d < ttl || d > ttl+renew {
				t.Fatalf("muted %v: took over %s after the start, want within [ttl, ttl+renew] = [%s, %s]", muted, d, ttl, ttl+renew)
			}
		})
	}
}

// A watch that breaks makes the standby poll every renew_interval, and a
// release it did not hear about is claimed at the next poll; once the
// watch resumes, the polling stops.
func TestABrokenWatchFallsBackToPollingAndResumes(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewWatchedMemory(porttest.NewMemoryCAS("lease"))
		a, b, _, _, stopA, stopB := leaderAndStandby(t, clk, m)
		defer stopA()
		defer stopB()
		m.Break(porttest.ErrUnavailable)
		synctest.Wait()
		st := b.Status()
		if st.Watching || !strings.Contains(st.WatchBroken, "polling") {
			t.Fatalf("after the watch broke: watching %v, broken %q; want polling, and saying so", st.Watching, st.WatchBroken)
		}
		m.ResetCalls()
		advance(t, clk, 6*renew)
		if got := m.Calls(porttest.OpGet); got < 5 || got > 7 {
			t.Fatalf("a standby with a broken watch read the lease %d times in 6 renew intervals, want about 6", got)
		}
		m.Resume()
		synctest.Wait()
		if st := b.Status(); !st.Watching || st.WatchBroken != "" {
			t.Fatalf("after the watch resumed: %+v", st)
		}
		m.ResetCalls()
		advance(t, clk, 6*renew)
		if got := m.Calls(porttest.OpGet); got != 0 {
			t.Fatalf("the standby still polls (%d reads) after the watch resumed", got)
		}
		if a.Status().Role != domain.RoleLeader {
			t.Fatal("the leader lost its lease")
		}
	})
}

// A watching standby that hears nothing (a dead holder whose lease names a
// longer ttl than ours) still observes the lease within every ttl of ours:
// readiness counts on it, and a silent watch is caught by it.
func TestAWatchingStandbyObservesWithinEveryTTL(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewWatchedMemory(porttest.NewMemoryCAS("lease"))
		plant(m.MemoryCAS, domain.LeaseRecord{Holder: "dead", Instance: "dead-1", Epoch: 4, TTL: (2 * ttl).String()})
		b, _ := newKeeper(t, m, clk, "b")
		stop := runWith(t, clk, b, nopCallbacks)
		defer stop()
		settle(t, clk, time.Minute, func() bool { return b.Status().Watching })
		end := clk.Now().Add(2*ttl + renew)
		for clk.Now().Before(end) && b.Status().Role != domain.RoleLeader {
			if st := b.Status(); clk.Now().Sub(st.LastObserved) >= ttl {
				t.Fatalf("at +%s the watching standby last observed the lease %s ago, not within ttl %s", clk.Now().Sub(t0), clk.Now().Sub(st.LastObserved), ttl)
			}
			advance(t, clk, time.Second)
		}
		if b.Status().Role != domain.RoleLeader {
			t.Fatal("the dead holder's lease (ttl 60s) was not taken over")
		}
	})
}
