// Package e2e runs the domain (LeaseKeeper, CheckpointCommitter) end to end
// over an adapter talking to a real server, through a fault proxy: the same
// scenarios for every backend.
//
// Test support only: production code must not import it.
// Imports: domain, ports, porttest, the real clock and faultproxy.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/testenv/faultproxy"
)

// Harness describes one backend for the end-to-end scenarios.
type Harness struct {
	// Endpoint is the real server's base URL.
	Endpoint string
	// Open returns a store for object name on the server reached through
	// endpoint (the real server or a proxy in front of it), with the given
	// request timeout (0: the adapter's default).
	Open func(t *testing.T, endpoint, name string, timeout time.Duration) ports.ObjectCAS
	// LostAck is the answer the proxy substitutes after the server applied a
	// write: the backend's own 500.
	LostAck faultproxy.Rule
	// IsConditionalPut and IsRead classify requests the proxy saw.
	IsConditionalPut func(faultproxy.Request) bool
	IsRead           func(faultproxy.Request) bool
}

// Timing for the real-clock scenarios: short, with a request timeout well
// above loopback latency on a loaded machine.
const (
	TTL   = 4 * time.Second
	Renew = time.Second
	// slack absorbs scheduling noise in upper bounds; lower bounds are exact
	// safety properties and get none.
	slack = 5 * time.Second
)

var nameSeq atomic.Int64

// Name returns an object name unique to this test process.
func Name(prefix string) string { return fmt.Sprintf("%s-%d", prefix, nameSeq.Add(1)) }

// severable wraps a store so a test can cut it off, as if the process died
// mid-flight: every later call fails and nothing reaches the server.
type severable struct {
	ports.ObjectCAS
	cut atomic.Bool
}

var errSevered = errors.New("severed: the process is gone")

func (s *severable) Get(ctx context.Context) (ports.Object, error) {
	if s.cut.Load() {
		return ports.Object{}, errSevered
	}
	return s.ObjectCAS.Get(ctx)
}

func (s *severable) Put(ctx context.Context, d []byte, p ports.Precondition) (ports.Version, error) {
	if s.cut.Load() {
		return "", errSevered
	}
	return s.ObjectCAS.Put(ctx, d, p)
}

func (s *severable) Delete(ctx context.Context, p ports.Precondition) error {
	if s.cut.Load() {
		return errSevered
	}
	return s.ObjectCAS.Delete(ctx, p)
}

// node is one LeaseKeeper run on the real clock.
type node struct {
	keeper  *domain.LeaseKeeper
	store   *severable
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	leading bool
}

func startNode(t *testing.T, store ports.ObjectCAS, holder string) *node {
	t.Helper()
	n := &node{store: &severable{ObjectCAS: store}, done: make(chan struct{})}
	k, err := domain.NewLeaseKeeper(n.store, clock.New(), domain.LeaseConfig{Holder: holder, TTL: TTL, RenewInterval: Renew})
	if err != nil {
		t.Fatal(err)
	}
	n.keeper = k
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel = cancel
	go func() {
		defer close(n.done)
		_ = k.Run(ctx, domain.Callbacks{
			OnAcquire: func(context.Context, domain.Leadership) { n.set(true) },
			OnLose:    func(domain.Loss) { n.set(false) },
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-n.done
	})
	return n
}

func (n *node) set(v bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.leading = v
}

func (n *node) leads() bool { return n.keeper.CheckFence() == nil }

// stop ends the node: gracefully (release) or as a crash (severed first).
func (n *node) stop(crash bool) {
	if crash {
		n.store.cut.Store(true)
	}
	n.cancel()
	<-n.done
}

// waitLeader waits until one of nodes leads and returns it.
func waitLeader(t *testing.T, limit time.Duration, nodes ...*node) (*node, time.Duration) {
	t.Helper()
	start := time.Now()
	for time.Since(start) < limit {
		for _, n := range nodes {
			if n.leads() {
				return n, time.Since(start)
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("no leader within %s", limit)
	return nil, 0
}

// Run runs every scenario as a subtest.
func Run(t *testing.T, h Harness) {
	t.Run("TwoKeepersExactlyOneLeads", func(t *testing.T) { twoKeepers(t, h) })
	t.Run("CrashWithoutReleaseTakesOverAfterTTL", func(t *testing.T) { failover(t, h, true) })
	t.Run("GracefulReleaseTakesOverWithinOnePoll", func(t *testing.T) { failover(t, h, false) })
	t.Run("CommitsThroughLostAcksNoConflictNoLoss", func(t *testing.T) { lostAcks(t, h) })
	t.Run("RequestsPerRenewInterval", func(t *testing.T) { accounting(t, h) })
}

func twoKeepers(t *testing.T, h Harness) {
	name := Name("lease")
	a := startNode(t, h.Open(t, h.Endpoint, name, 0), "a")
	b := startNode(t, h.Open(t, h.Endpoint, name, 0), "b")
	waitLeader(t, TTL+slack, a, b)
	// Sample for three ttl: never both, always one (after the first).
	end := time.Now().Add(3 * TTL)
	both, none := 0, 0
	for time.Now().Before(end) {
		la, lb := a.leads(), b.leads()
		if la && lb {
			both++
		}
		if !la && !lb {
			none++
		}
		time.Sleep(5 * time.Millisecond)
	}
	if both > 0 {
		t.Fatalf("both keepers passed CheckFence in %d samples", both)
	}
	if none > 0 {
		t.Fatalf("no keeper led in %d samples of a healthy period", none)
	}
}

func failover(t *testing.T, h Harness, crash bool) {
	name := Name("lease")
	a := startNode(t, h.Open(t, h.Endpoint, name, 0), "a")
	waitLeader(t, TTL+slack, a)
	b := startNode(t, h.Open(t, h.Endpoint, name, 0), "b")
	// b has observed a's renewals; stop half an interval off b's poll phase
	// so a release does not happen to land just before a poll.
	time.Sleep(2*Renew + Renew/2)
	if b.leads() {
		t.Fatal("standby leads while the leader is healthy")
	}
	stopped := time.Now()
	a.stop(crash)
	waitLeader(t, TTL+Renew+slack, b)
	took := time.Since(stopped)
	if crash {
		// Safety: b cannot lead before ttl has passed since it saw a's last
		// renewal, which a sent at most one renew interval before dying.
		if took < TTL-Renew {
			t.Fatalf("standby led %s after the crash, before ttl-renew (%s): a lease must outlive its holder by ttl", took, TTL-Renew)
		}
		t.Logf("crash: standby led after %s (ttl %s, renew %s)", took.Round(time.Millisecond), TTL, Renew)
		return
	}
	if took > Renew+slack {
		t.Fatalf("standby led %s after a graceful release; want within one poll (%s) plus slack", took, Renew)
	}
	t.Logf("release: standby led after %s (renew %s)", took.Round(time.Millisecond), Renew)
}

func lostAcks(t *testing.T, h Harness) {
	p := faultproxy.New(t, h.Endpoint)
	p.Add(faultproxy.Rule{Name: "lost-ack", Action: faultproxy.ApplyThenRespond, Every: 5,
		Status: h.LostAck.Status, Body: h.LostAck.Body, Header: h.LostAck.Header,
		Match: func(r *http.Request) bool { return h.IsConditionalPut(faultproxy.FromHTTP(r)) }})
	var recovered, conflicts atomic.Int64
	obs := domain.ObserverFunc(func(e domain.Event) {
		switch e.Kind {
		case domain.EventRecoveredLostAck:
			recovered.Add(1)
		case domain.EventConflict:
			conflicts.Add(1)
		}
	})
	name := Name("state")
	c, err := domain.NewCheckpointCommitter(h.Open(t, p.URL, name, 0), clock.New(), domain.CommitterConfig{
		Observer: obs, Retry: domain.RetryPolicy{BaseDelay: 20 * time.Millisecond, MaxDelay: 100 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	const commits = 200
	for i := range commits {
		if err := c.Commit(t.Context(), fmt.Sprintf("key-%03d", i), fmt.Sprintf("value-%d", i)); err != nil {
			t.Fatalf("commit %d: %v", i, err)
		}
	}
	fresh, err := domain.NewCheckpointCommitter(h.Open(t, h.Endpoint, name, 0), clock.New(), domain.CommitterConfig{})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := fresh.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for i := range commits {
		if got := doc[fmt.Sprintf("key-%03d", i)]; got != fmt.Sprintf("value-%d", i) {
			t.Fatalf("key-%03d = %q after 200 commits: lost", i, got)
		}
	}
	faults := p.Count(func(r faultproxy.Request) bool { return r.Fault == "lost-ack" })
	if conflicts.Load() != 0 || faults < commits/5-1 || recovered.Load() != int64(faults) {
		t.Fatalf("%d lost acks injected, %d recovered, %d conflicts; want every lost ack recovered and no conflict",
			faults, recovered.Load(), conflicts.Load())
	}
	t.Logf("%d commits, %d lost acknowledgements, all recovered, 0 conflicts, 0 lost keys", commits, faults)
}

func accounting(t *testing.T, h Harness) {
	const (
		ttl   = 30 * time.Second
		renew = 10 * time.Second
		fence = ttl - renew/2
	)
	name := Name("lease")
	clk := porttest.NewFakeClock(time.Now())
	pa, pb := faultproxy.New(t, h.Endpoint), faultproxy.New(t, h.Endpoint)
	run := func(store ports.ObjectCAS, holder string) *domain.LeaseKeeper {
		// Poll: this is the polling cost (S3, GCS, a standby whose watch
		// is down); a watching standby's is measured against client-go by
		// make bench-leader-election.
		k, err := domain.NewLeaseKeeper(store, clk, domain.LeaseConfig{Holder: holder, TTL: ttl, RenewInterval: renew, Poll: true})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = k.Run(ctx, domain.Callbacks{OnAcquire: func(context.Context, domain.Leadership) {}, OnLose: func(domain.Loss) {}})
		}()
		t.Cleanup(func() {
			cancel()
			for {
				select {
				case <-done:
					return
				case <-time.After(10 * time.Millisecond):
					clk.Advance(time.Second) // let a graceful stop's waits pass
				}
			}
		})
		return k
	}
	// settle waits (real time, as a hang guard) until exactly the idle timers
	// are armed: every keeper parked in Run, no request in flight.
	settle := func(want ...time.Duration) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			now := clk.Now()
			ds := clk.Deadlines()
			ok := len(ds) == len(want)
			for i := 0; ok && i < len(ds); i++ {
				ok = ds[i].Sub(now) == want[i]
			}
			if ok {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("keepers did not settle: timers at %v after now, want %v", relative(ds, now), want)
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	leader := run(h.Open(t, pa.URL, name, 0), "leader")
	settle(renew, fence) // acquired: renewal and fence timers
	if leader.CheckFence() != nil {
		t.Fatal("the first keeper did not acquire")
	}
	run(h.Open(t, pb.URL, name, 0), "standby")
	settle(renew, renew, fence) // the standby has read once and waits to poll
	pa.Reset()
	pb.Reset()
	const intervals = 6
	for range intervals {
		clk.Advance(renew)
		settle(renew, renew, fence)
	}
	all := func(faultproxy.Request) bool { return true }
	lp, lr, ln := pa.Count(h.IsConditionalPut), pa.Count(h.IsRead), pa.Count(all)
	sp, sr, sn := pb.Count(h.IsConditionalPut), pb.Count(h.IsRead), pb.Count(all)
	t.Logf("over %d renew intervals: leader %d conditional PUTs, %d GETs, %d requests; standby %d GETs, %d PUTs, %d requests",
		intervals, lp, lr, ln, sr, sp, sn)
	if lp != intervals || lr != 0 || ln != intervals {
		t.Fatalf("leader: %d conditional PUTs, %d reads, %d requests over %d intervals; want exactly one conditional PUT per interval and nothing else",
			lp, lr, ln, intervals)
	}
	if sr != intervals || sp != 0 || sn != intervals {
		t.Fatalf("standby: %d reads, %d PUTs, %d requests over %d intervals; want exactly one read per interval and nothing else",
			sr, sp, sn, intervals)
	}
}

func relative(ds []time.Time, now time.Time) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Sub(now)
	}
	return out
}
