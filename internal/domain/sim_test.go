package domain_test

// Deterministic simulation of three sf2loki nodes sharing a lease object and a
// checkpoint object. Each node runs the real LeaseKeeper.Run driver and a toy
// source that commits increasing positions through the real
// CheckpointCommitter. With shards, every node runs a keeper, a committer
// and a toy source per shard (each shard its own lease and document), and a
// real Membership and Balancer gating the keepers' claims. Every node has its own clock (skewed wall time, rate
// drifting up to ±5%); every request crosses a simulated network whose
// latency and faults (lost acknowledgements, transient errors, throttling,
// spurious lost CAS races, delayed writes) and whose process pauses are drawn
// from the seed. The scheduler runs inside a testing/synctest bubble: it
// waits until every node goroutine is blocked, checks the invariants, then
// performs the single earliest event. Same seed, same run.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

var (
	simSeeds = flag.Int("sim.seeds", 2000, "number of simulation seeds to run (env SF2LOKI_SIM_SEEDS overrides)")
	simSeed  = flag.Uint64("sim.seed", 0, "run only this simulation seed, with its trace")
)

// simConfig is one simulation's shape.
type simConfig struct {
	seed  uint64
	nodes int
	chaos time.Duration // faults, pauses and latency spikes
	calm  time.Duration // no faults: leadership must settle
	// maxDriftPPT bounds each node's clock rate error, in parts per thousand.
	maxDriftPPT int64
	// fastNode, if >= 0, runs that node's clock at fastRatePPT (to prove the
	// checker catches an overlap when the drift assumption is broken).
	fastNode    int
	fastRatePPT int64
	// shards, when above 0, runs that many shards (a lease and a document
	// each) balanced over the nodes through a members document (Balancer);
	// 0 is the classic single lease.
	shards int
}

func defaultSimConfig(seed uint64) simConfig {
	return simConfig{seed: seed, nodes: 3, chaos: 150 * time.Second, calm: ttl + 2*renew + 10*time.Second,
		maxDriftPPT: 50, fastNode: -1}
}

// balanceBound is how long after the faults stop the shards must be led
// and balanced: the membership and the stale leases of nodes that were
// paused take a ttl to settle, then a hand-off or a claim per renew
// interval, a few of them.
func balanceBound() time.Duration { return 2*ttl + 6*renew }

// shardSimConfig is one simulation of shards: three nodes over five shards
// (uneven: 2/2/1), the same faults and pauses.
func shardSimConfig(seed uint64) simConfig {
	c := defaultSimConfig(seed)
	// The faults stop, the shards settle; then a node is killed and later
	// one joins (sim_shards_test.go), each phase given phaseGap.
	c.shards, c.calm = 5, 3*phaseGap()
	return c
}

var simKeys = []string{"pubsub:/event/LoginEventStream", "eventlog_objects:LoginHistory", "eventlogfile:API"}

// simReq is one request on the simulated network.
type simReq struct {
	seq       uint64
	node      int
	obj       string // "lease" or "state"
	op        porttest.Op
	data      []byte
	pre       ports.Precondition
	sentAt    time.Time
	deliverAt time.Time // when the store sees it
	respondAt time.Time // when the answer reaches the node
	fate      string    // ok, fail, lostack, drop, throttle, spurious
	assigned  bool
	resp      chan simResp
	answer    simResp
}

type simResp struct {
	obj ports.Object
	v   ports.Version
	err error
}

type simTimer struct {
	seq     uint64
	node    int
	due     time.Time // node-local deadline
	ch      chan time.Time
	stopped bool
}

type simNode struct {
	id        int
	name      string
	ratePPT   int64     // local ns per 1000 global ns
	base      time.Time // local reading at global t0
	clock     *simClock
	keeper    *domain.LeaseKeeper // shard 0's
	committer *domain.CheckpointCommitter
	// keepers and committers are every shard's (shard 0 first).
	keepers    []*domain.LeaseKeeper
	committers []*domain.CheckpointCommitter
	rng        *lockedRand
	pauses     []simPause
	paused     bool
	pausedTo   time.Time
	watch      bool // its keepers watch their leases
	cancel     context.CancelFunc
	done       chan struct{}
	work       sync.WaitGroup
}

type simPause struct{ at, until time.Time }

type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

func (l *lockedRand) Float64() float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.Float64()
}

func (l *lockedRand) IntN(n int) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.r.IntN(n)
}

type world struct {
	cfg   simConfig
	rng   *rand.Rand // the scheduler's; node goroutines never touch it
	mu    sync.Mutex
	now   time.Time // global simulated time
	seq   uint64
	chaos bool

	nodes  []*simNode
	timers []*simTimer
	reqs   []*simReq // registered, not yet delivered to the store
	resps  []*simReq // delivered, answer not yet returned
	// objects are the stores: "lease" and "state" (shard 0), "lease-<i>"
	// and "state-<i>", and "members" with shards.
	objects map[string]*porttest.MemoryCAS

	trace       []string
	violations  []string
	calmAt      time.Time
	leaderSince time.Time // first instant after calmAt with a leader (every shard led)
	// balancedSince is the first instant after calmAt when every shard is
	// led and the nodes' counts differ by at most one (shards only).
	balancedSince time.Time
	stats         simStats
	// outage counts, per node and object, the requests still to fail after
	// a write landed with its acknowledgement lost: the rest of that call
	// fails, so its outcome stays unknown into the next call.
	outage map[string]int
	// leaders is each shard's leader at the last check ("" when unled);
	// phases the scripted end of a shard simulation.
	leaders []string
	phases  shardPhases
	t       *testing.T
	// watches are the nodes' lease watches; notes the reports on their way
	// (late, repeated, stale, dropped or broken during chaos). wrng draws
	// their fates, apart from rng so that the other draws stay as they were.
	watches  []*simWatch
	notes    []*simNote
	wrng     *rand.Rand
	watchSeq uint64
}

type simStats struct {
	events, commits, acquisitions, recovered, conflicts, fenced, pauses, dropped int
	// notes counts watch reports delivered, noteFaults those dropped,
	// repeated, replayed stale or turned into a broken watch.
	notes, noteFaults int
	// acrossCalls counts writes whose outcome stayed unknown past their call
	// and were recognised by the next one.
	acrossCalls int
}

// simClock is one node's clock: its readings follow global time at the
// node's rate; its timers fire when the scheduler says so.
type simClock struct {
	w    *world
	node *simNode
}

func (c *simClock) Now() time.Time {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	return c.w.localLocked(c.node, c.w.now)
}

func (c *simClock) After(d time.Duration) <-chan time.Time { return c.NewTimer(d).C() }

func (c *simClock) NewTimer(d time.Duration) ports.Timer {
	c.w.mu.Lock()
	defer c.w.mu.Unlock()
	t := &simTimer{node: c.node.id, ch: make(chan time.Time, 1)}
	c.w.armLocked(t, c.node, d)
	return &simTimerHandle{w: c.w, t: t}
}

type simTimerHandle struct {
	w *world
	t *simTimer
}

func (h *simTimerHandle) C() <-chan time.Time { return h.t.ch }

func (h *simTimerHandle) Stop() bool {
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	was := !h.t.stopped && slices.Contains(h.w.timers, h.t)
	h.w.removeTimerLocked(h.t)
	h.t.stopped = true
	select {
	case <-h.t.ch:
	default:
	}
	return was
}

func (h *simTimerHandle) Reset(d time.Duration) bool {
	was := h.Stop()
	h.w.mu.Lock()
	defer h.w.mu.Unlock()
	h.t.stopped = false
	h.w.armLocked(h.t, h.w.nodes[h.t.node], d)
	return was
}

func (w *world) armLocked(t *simTimer, n *simNode, d time.Duration) {
	w.seq++
	t.seq = w.seq
	t.due = w.localLocked(n, w.now).Add(max(d, 0))
	w.timers = append(w.timers, t)
}

func (w *world) removeTimerLocked(t *simTimer) {
	w.timers = slices.DeleteFunc(w.timers, func(x *simTimer) bool { return x == t })
}

// localLocked converts global time to a node's local reading.
func (w *world) localLocked(n *simNode, g time.Time) time.Time {
	el := g.Sub(t0)
	return n.base.Add(time.Duration(int64(el) / 1000 * n.ratePPT))
}

// globalAt is the earliest global time at which the node's clock reads at
// least local.
func (w *world) globalAt(n *simNode, local time.Time) time.Time {
	el := local.Sub(n.base)
	if el <= 0 {
		return t0
	}
	// local = (g/1000)*rate, integer division on g: search upward from the
	// rounded estimate.
	g := int64(el) / n.ratePPT * 1000
	for time.Duration(g/1000*n.ratePPT) < el {
		g += 1000
	}
	return t0.Add(time.Duration(g))
}

// simCAS is one node's handle on one object, through the network.
type simCAS struct {
	w    *world
	node *simNode
	obj  string
}

func (s *simCAS) String() string { return "sim://" + s.obj }

func (s *simCAS) call(ctx context.Context, op porttest.Op, data []byte, pre ports.Precondition) simResp {
	if err := ctx.Err(); err != nil {
		return simResp{err: fmt.Errorf("%s %s: %w", op, s, err)}
	}
	r := &simReq{node: s.node.id, obj: s.obj, op: op, data: data, pre: pre, resp: make(chan simResp, 1)}
	s.w.mu.Lock()
	s.w.seq++
	r.seq, r.sentAt = s.w.seq, s.w.now
	s.w.reqs = append(s.w.reqs, r)
	s.w.mu.Unlock()
	select {
	case a := <-r.resp:
		return a
	case <-ctx.Done():
		// The request stays on the network and may still be applied.
		return simResp{err: fmt.Errorf("%s %s: %w", op, s, ctx.Err())}
	}
}

func (s *simCAS) Get(ctx context.Context) (ports.Object, error) {
	a := s.call(ctx, porttest.OpGet, nil, ports.Precondition{})
	return a.obj, a.err
}

func (s *simCAS) Put(ctx context.Context, data []byte, pre ports.Precondition) (ports.Version, error) {
	if err := pre.Validate(false); err != nil {
		return "", err
	}
	a := s.call(ctx, porttest.OpPut, slices.Clone(data), pre)
	return a.v, a.err
}

func (s *simCAS) Delete(ctx context.Context, pre ports.Precondition) error {
	if err := pre.Validate(true); err != nil {
		return err
	}
	return s.call(ctx, porttest.OpDelete, nil, pre).err
}

func (w *world) logLocked(format string, args ...any) {
	w.trace = append(w.trace, fmt.Sprintf("%10.3fs ", w.now.Sub(t0).Seconds())+fmt.Sprintf(format, args...))
}

// traceWriter puts a node's log lines in the trace.
type traceWriter struct {
	w    *world
	node string
}

func (t traceWriter) Write(p []byte) (int, error) {
	t.w.mu.Lock()
	defer t.w.mu.Unlock()
	t.w.logLocked("%s log: %s", t.node, strings.TrimSpace(string(p)))
	return len(p), nil
}

func (w *world) violate(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	w.violations = append(w.violations, msg)
	w.logLocked("VIOLATION: %s", msg)
}

func newWorld(cfg simConfig) *world {
	w := &world{cfg: cfg, rng: rand.New(rand.NewPCG(cfg.seed, 0x5f2)), now: t0, chaos: true, objects: map[string]*porttest.MemoryCAS{},
		outage: map[string]int{}, wrng: rand.New(rand.NewPCG(cfg.seed, 0x3a7c))}
	for i := range max(cfg.shards, 1) {
		for _, o := range []string{leaseObj(i), stateObj(i)} {
			w.objects[o] = porttest.NewMemoryCAS(o)
		}
	}
	if cfg.shards > 0 {
		w.objects["members"] = porttest.NewMemoryCAS("members")
	}
	w.calmAt = t0.Add(cfg.chaos)
	for i := range cfg.nodes {
		drift := w.rng.Int64N(2*cfg.maxDriftPPT+1) - cfg.maxDriftPPT
		n := &simNode{id: i, name: fmt.Sprintf("n%d", i), ratePPT: 1000 + drift,
			base: t0.Add(time.Duration(w.rng.Int64N(int64(2*time.Minute))) - time.Minute),
			rng:  &lockedRand{r: rand.New(rand.NewPCG(cfg.seed, uint64(i+1)))}}
		if i == cfg.fastNode {
			n.ratePPT = cfg.fastRatePPT
		}
		n.clock = &simClock{w: w, node: n}
		n.watch = w.wrng.IntN(3) > 0 // two nodes in three watch, on average
		// Pauses: a few per node, most longer than the ttl.
		for at := t0.Add(w.exp(70 * time.Second)); at.Before(w.calmAt); at = at.Add(w.exp(70 * time.Second)) {
			d := time.Duration(1+w.rng.IntN(5)) * time.Second
			if w.rng.IntN(3) > 0 {
				d = ttl + time.Duration(w.rng.Int64N(int64(20*time.Second)))
			}
			n.pauses = append(n.pauses, simPause{at: at, until: at.Add(d)})
			at = at.Add(d)
		}
		w.nodes = append(w.nodes, n)
	}
	return w
}

// leaseObj and stateObj name shard i's objects.
func leaseObj(i int) string {
	if i == 0 {
		return "lease"
	}
	return fmt.Sprintf("lease-%d", i)
}

func stateObj(i int) string {
	if i == 0 {
		return "state"
	}
	return fmt.Sprintf("state-%d", i)
}

func (w *world) exp(mean time.Duration) time.Duration {
	return time.Duration(w.rng.ExpFloat64() * float64(mean))
}

func (w *world) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)+1))
}

// start builds node n's keepers, committers and toy sources (and, with
// shards, its membership and balancer) and runs them.
func (w *world) start(t *testing.T, n *simNode) {
	observer := func(shard string, index int) domain.Observer {
		return domain.ObserverFunc(func(e domain.Event) {
			w.mu.Lock()
			defer w.mu.Unlock()
			switch e.Kind {
			case domain.EventAcquired:
				w.stats.acquisitions++
				w.noteAcquiredLocked(n.name, index)
			case domain.EventRecoveredLostAck:
				w.stats.recovered++
				if strings.Contains(e.Reason, "outcome was unknown") {
					w.stats.acrossCalls++
				}
			case domain.EventConflict:
				w.stats.conflicts++
			case domain.EventCommitFenced:
				w.stats.fenced++
			case domain.EventCommitted:
				w.stats.commits++
			}
			if e.Kind != domain.EventRenewed && e.Kind != domain.EventCommitted {
				w.logLocked("%s%s %s epoch=%d %s", n.name, shard, e.Kind, e.Epoch, e.Reason)
			}
		})
	}
	var balancer *domain.Balancer
	if w.cfg.shards > 0 {
		m, err := domain.NewMembership(&simCAS{w: w, node: n, obj: "members"}, n.clock, domain.MemberConfig{Holder: n.name,
			Instance: n.name + "-1", TTL: ttl, RenewInterval: renew, RequestTimeout: 5 * time.Second, Retry: domain.RetryPolicy{Jitter: n.rng.Float64}})
		if err != nil {
			t.Fatal(err)
		}
		balancer = domain.NewBalancer(m, n.clock, renew, slog.New(slog.NewTextHandler(traceWriter{w: w, node: n.name}, &slog.HandlerOptions{
			ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
				if a.Key == slog.TimeKey {
					return slog.Attr{}
				}
				return a
			}})))
	}
	ctx, cancel := context.WithCancel(context.Background())
	n.cancel, n.done = cancel, make(chan struct{})
	var runs sync.WaitGroup
	for i := range max(w.cfg.shards, 1) {
		shard := ""
		if w.cfg.shards > 0 {
			shard = fmt.Sprintf("/s%d", i)
		}
		obs := observer(shard, i)
		var keeper *domain.LeaseKeeper
		committer, err := domain.NewCheckpointCommitter(&simCAS{w: w, node: n, obj: stateObj(i)}, n.clock, domain.CommitterConfig{
			Fence: func() error { return keeper.CheckFence() }, RequestTimeout: 5 * time.Second,
			Retry: domain.RetryPolicy{Jitter: n.rng.Float64}, Observer: obs,
		})
		if err != nil {
			t.Fatal(err)
		}
		lc := domain.LeaseConfig{Holder: n.name, Instance: n.name + "-1", TTL: ttl, RenewInterval: renew,
			Retry: domain.RetryPolicy{Jitter: n.rng.Float64}, EpochFloor: committer.StoredEpoch, Observer: obs}
		if balancer != nil {
			lc.Gate = balancer.Gate(leaseObj(i))
		}
		var lease ports.ObjectCAS = &simCAS{w: w, node: n, obj: leaseObj(i)}
		if n.watch {
			lease = &simWatchCAS{simCAS: lease.(*simCAS)}
		}
		keeper, err = domain.NewLeaseKeeper(lease, n.clock, lc)
		if err != nil {
			t.Fatal(err)
		}
		n.keepers, n.committers = append(n.keepers, keeper), append(n.committers, committer)
		if balancer != nil {
			balancer.Add(domain.Shard{Name: leaseObj(i), Keeper: keeper})
		}
		work := &n.work // the shard's leader work
		if i > 0 {
			work = &sync.WaitGroup{}
		}
		runs.Go(func() {
			_ = keeper.Run(ctx, domain.Callbacks{
				OnAcquire: func(lctx context.Context, l domain.Leadership) {
					work.Go(func() { w.source(lctx, n, committer, l.Epoch) })
				},
				OnLose: func(domain.Loss) {
					work.Wait()
					committer.Reset()
				},
			})
		})
	}
	n.keeper, n.committer = n.keepers[0], n.committers[0]
	if balancer != nil {
		runs.Go(func() { balancer.Run(ctx) })
	}
	go func() {
		runs.Wait()
		close(n.done)
	}()
}

// source is the toy source: claim, then commit increasing positions.
func (w *world) source(ctx context.Context, n *simNode, committer *domain.CheckpointCommitter, epoch uint64) {
	sleep := func(d time.Duration) bool {
		select {
		case <-n.clock.After(d):
			return true
		case <-ctx.Done():
			return false
		}
	}
	for {
		err := committer.Claim(ctx, epoch)
		if err == nil {
			break
		}
		if errors.Is(err, domain.ErrFenced) || ctx.Err() != nil {
			<-ctx.Done()
			return
		}
		committer.Reset()
		if !sleep(time.Second) {
			return
		}
	}
	pos := map[string]int{}
	load := func() bool {
		doc, err := committer.Load(ctx)
		if err != nil {
			return false
		}
		for _, k := range simKeys {
			pos[k], _ = strconv.Atoi(doc[k])
		}
		return true
	}
	if !load() {
		<-ctx.Done()
		return
	}
	for sleep(time.Duration(1000+n.rng.IntN(3000)) * time.Millisecond) {
		k := simKeys[n.rng.IntN(len(simKeys))]
		pos[k]++
		err := committer.Commit(ctx, k, fmt.Sprintf("%09d", pos[k]))
		switch {
		case errors.Is(err, domain.ErrFenced):
			<-ctx.Done()
			return
		case errors.Is(err, domain.ErrConflict):
			committer.Reset()
			if !load() {
				<-ctx.Done()
				return
			}
		}
	}
}

// assignFresh draws latency and fate for requests registered since the last
// event, in a deterministic order.
func (w *world) assignFresh() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.assignWatchesLocked()
	var fresh []*simReq
	for _, r := range w.reqs {
		if !r.assigned {
			fresh = append(fresh, r)
		}
	}
	slices.SortFunc(fresh, func(a, b *simReq) int {
		if a.node != b.node {
			return a.node - b.node
		}
		// One node's objects are driven by goroutines of their own (a
		// keeper per shard): their requests' seq order is a race, the order
		// of one object's requests is not.
		if c := strings.Compare(a.obj, b.obj); c != 0 {
			return c
		}
		return int(a.seq) - int(b.seq)
	})
	for _, r := range fresh {
		r.assigned = true
		r.fate = "ok"
		key := fmt.Sprintf("%d/%s", r.node, r.obj)
		lat := w.between(time.Millisecond, 20*time.Millisecond)
		if w.chaos {
			switch p := w.rng.IntN(100); {
			case p < 8:
				lat = w.between(500*time.Millisecond, 3*time.Second)
			case p < 10:
				lat = w.between(ttl+5*time.Second, 2*ttl) // a write delayed past any lease
			case p < 30:
				lat = w.between(20*time.Millisecond, 500*time.Millisecond)
			}
			switch p := w.rng.IntN(100); {
			case p < 5:
				r.fate = "fail"
			case p < 9 && r.op != porttest.OpGet:
				r.fate = "lostack"
			case p < 11:
				r.fate = "drop"
			case p < 13:
				r.fate = "throttle"
			case p < 15 && r.op != porttest.OpGet:
				r.fate = "spurious"
			}
			switch {
			case w.outage[key] > 0:
				w.outage[key]--
				r.fate = "fail"
			case r.fate == "lostack" && w.rng.IntN(3) == 0:
				w.outage[key] = domain.DefaultMaxAttempts - 1
			}
		}
		r.deliverAt = r.sentAt.Add(lat)
		if r.deliverAt.Before(w.now) {
			r.deliverAt = w.now
		}
	}
}

// deliver applies a request at the store and schedules its answer.
func (w *world) deliverLocked(r *simReq) {
	store := w.objects[r.obj]
	before, had := store.Peek()
	apply := func() simResp {
		switch r.op {
		case porttest.OpGet:
			o, err := store.Get(context.Background())
			return simResp{obj: o, err: err}
		case porttest.OpPut:
			v, err := store.Put(context.Background(), r.data, r.pre)
			return simResp{v: v, err: err}
		default:
			return simResp{err: store.Delete(context.Background(), r.pre)}
		}
	}
	var a simResp
	switch r.fate {
	case "fail":
		a.err = porttest.ErrUnavailable
	case "throttle":
		a.err = porttest.ErrThrottled
	case "spurious":
		a.err = fmt.Errorf("injected lost race: %w", ports.ErrPreconditionFailed)
	default:
		a = apply()
		if r.fate == "lostack" && a.err == nil {
			a = simResp{err: porttest.ErrLostAck}
		}
	}
	after, has := store.Peek()
	if has && (!had || after.Version != before.Version) {
		w.checkWrite(r, before.Data, had, after.Data)
	}
	if has != had || after.Version != before.Version {
		prev := ports.Change{Object: before, Absent: !had}
		w.reportLocked(r.obj, ports.Change{Object: after, Absent: !has}, prev)
	}
	r.answer = a
	w.logLocked("%s %s %s %s → %s", w.nodes[r.node].name, r.op, r.obj, describePre(r), describeAnswer(r))
	if r.fate == "drop" {
		w.stats.dropped++
		return // the answer never arrives; the node's request timeout fires
	}
	lat := w.between(time.Millisecond, 20*time.Millisecond)
	if w.chaos && w.rng.IntN(10) == 0 {
		lat = w.between(500*time.Millisecond, 4*time.Second)
	}
	r.respondAt = w.now.Add(lat)
	w.resps = append(w.resps, r)
}

func describePre(r *simReq) string {
	if r.op == porttest.OpGet {
		return ""
	}
	return r.pre.String()
}

func describeAnswer(r *simReq) string {
	a := r.answer
	s := "ok"
	switch {
	case a.err != nil:
		s = a.err.Error()
	case a.v != "":
		s = "v" + string(a.v)
	case a.obj.Version != "":
		s = "v" + string(a.obj.Version)
	}
	if r.fate != "ok" {
		s += " [" + r.fate + "]"
	}
	return s
}

// checkWrite checks the invariants on a write the store accepted.
func (w *world) checkWrite(r *simReq, before []byte, had bool, after []byte) {
	who := w.nodes[r.node].name
	if r.obj == "members" {
		return // heartbeats: soft state
	}
	if strings.HasPrefix(r.obj, "lease") {
		old, _ := domain.DecodeLeaseRecord(before)
		nu, err := domain.DecodeLeaseRecord(after)
		if err == nil && had && nu.Epoch < old.Epoch {
			w.violate("lease epoch moved backwards %d → %d by %s", old.Epoch, nu.Epoch, who)
		}
		return
	}
	var oldDoc, newDoc map[string]string
	if had {
		_ = json.Unmarshal(before, &oldDoc)
	}
	if err := json.Unmarshal(after, &newDoc); err != nil {
		w.violate("checkpoint document unreadable after a write by %s: %v", who, err)
		return
	}
	oldEpoch, _ := strconv.ParseUint(oldDoc[domain.FenceEpochKey], 10, 64)
	newEpoch, _ := strconv.ParseUint(newDoc[domain.FenceEpochKey], 10, 64)
	if newEpoch < oldEpoch {
		w.violate("%s: commit from epoch %d accepted over document epoch %d (writer %s)", r.obj, newEpoch, oldEpoch, who)
	}
	for _, k := range simKeys {
		if oldDoc[k] != "" && newDoc[k] < oldDoc[k] {
			w.violate("%s: position of %s moved backwards %s → %s (writer %s, epoch %d)", r.obj, k, oldDoc[k], newDoc[k], who, newEpoch)
		}
	}
}

// checkLeaders checks that at most one node's fence passes now, per shard,
// and notes when every shard is led (and, with shards, balanced).
func (w *world) checkLeaders() {
	shards := max(w.cfg.shards, 1)
	led, counts := 0, map[string]int{}
	var twice []string
	leaders := make([]string, shards)
	for i := range shards {
		var passing []string
		for _, n := range w.nodes {
			if len(n.keepers) > i && n.keepers[i].CheckFence() == nil {
				passing = append(passing, fmt.Sprintf("%s(epoch %d)", n.name, n.keepers[i].Epoch()))
				counts[n.name]++
				leaders[i] = n.name
			}
		}
		if len(passing) > 1 {
			twice = append(twice, fmt.Sprintf("%s: %d nodes pass CheckFence at once: %s", leaseObj(i), len(passing), strings.Join(passing, ", ")))
		}
		if len(passing) > 0 {
			led++
		}
	}
	lo, hi := shards, 0
	for _, n := range w.nodes {
		if n.name != w.phases.victim {
			lo, hi = min(lo, counts[n.name]), max(hi, counts[n.name])
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, v := range twice {
		w.violate("%s", v)
	}
	w.leaders = leaders
	w.checkPhasesLocked(leaders)
	calm := !w.now.Before(w.calmAt)
	if calm && led == shards && w.leaderSince.IsZero() {
		w.leaderSince = w.now
	}
	if calm && w.cfg.shards > 0 && led == shards && hi-lo <= 1 && w.balancedSince.IsZero() {
		w.balancedSince = w.now
	}
}

// event is the next thing the scheduler does.
type event struct {
	at   time.Time
	rank int // tie-break: pauses, deliveries, answers, timers
	node int
	seq  uint64
	do   func()
}

func (w *world) nextEvent(end time.Time) (event, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	var best event
	found := false
	consider := func(e event) {
		if !found || e.at.Before(best.at) || (e.at.Equal(best.at) && (e.rank < best.rank ||
			(e.rank == best.rank && (e.node < best.node || (e.node == best.node && e.seq < best.seq))))) {
			best, found = e, true
		}
	}
	if w.chaos {
		consider(event{at: w.calmAt, rank: -1, do: w.becomeCalm})
	}
	if w.cfg.shards > 0 {
		switch w.phases.phase {
		case phaseChaos:
			consider(event{at: w.calmAt.Add(phaseGap()), rank: -1, do: w.beginLoss})
		case phaseLoss:
			consider(event{at: w.phases.killAt.Add(phaseGap()), rank: -1, do: func() { w.start(w.t, w.beginJoin()) }})
		}
	}
	for _, n := range w.nodes {
		if n.paused {
			consider(event{at: n.pausedTo, rank: 0, node: n.id, do: func() { w.resume(n) }})
		} else if len(n.pauses) > 0 && w.chaos {
			p := n.pauses[0]
			consider(event{at: p.at, rank: 0, node: n.id, do: func() { w.pause(n, p) }})
		}
	}
	for _, r := range w.reqs {
		consider(event{at: r.deliverAt, rank: 1, node: r.node, seq: r.seq, do: func() { w.deliver(r) }})
	}
	for _, r := range w.resps {
		if w.nodes[r.node].paused {
			continue
		}
		consider(event{at: r.respondAt, rank: 2, node: r.node, seq: r.seq, do: func() { w.answer(r) }})
	}
	for _, nt := range w.notes {
		if nt.watch.node.paused {
			continue
		}
		consider(event{at: nt.at, rank: 2, node: nt.watch.node.id, seq: nt.seq, do: func() { w.deliverNote(nt) }})
	}
	for _, tm := range w.timers {
		n := w.nodes[tm.node]
		if n.paused {
			continue
		}
		at := w.globalAt(n, tm.due)
		if at.Before(w.now) {
			at = w.now
		}
		consider(event{at: at, rank: 3, node: tm.node, seq: tm.seq, do: func() { w.fire(tm) }})
	}
	if !found || best.at.After(end) {
		return event{}, false
	}
	return best, true
}

func (w *world) becomeCalm() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.chaos = false
	w.logLocked("calm: faults stop; pauses end; in-flight requests land promptly")
	for _, r := range w.reqs {
		if r.deliverAt.After(w.now.Add(20 * time.Millisecond)) {
			r.deliverAt = w.now.Add(20 * time.Millisecond)
		}
	}
	for _, n := range w.nodes {
		n.pauses = nil
		if n.paused {
			n.pausedTo = w.now
		}
	}
}

func (w *world) pause(n *simNode, p simPause) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n.pauses = n.pauses[1:]
	n.paused, n.pausedTo = true, p.until
	w.stats.pauses++
	w.logLocked("%s paused for %s", n.name, p.until.Sub(p.at))
}

func (w *world) resume(n *simNode) {
	w.mu.Lock()
	defer w.mu.Unlock()
	n.paused = false
	w.logLocked("%s resumed", n.name)
}

func (w *world) deliver(r *simReq) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reqs = slices.DeleteFunc(w.reqs, func(x *simReq) bool { return x == r })
	w.deliverLocked(r)
}

func (w *world) answer(r *simReq) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.resps = slices.DeleteFunc(w.resps, func(x *simReq) bool { return x == r })
	r.resp <- r.answer
}

func (w *world) fire(tm *simTimer) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.removeTimerLocked(tm)
	select {
	case tm.ch <- w.localLocked(w.nodes[tm.node], w.now):
	default:
	}
}

// run simulates until the end and returns the violations found.
func (w *world) run(t *testing.T) []string {
	w.t = t
	for _, n := range w.nodes {
		w.start(t, n)
	}
	end := w.calmAt.Add(w.cfg.calm)
	for {
		synctest.Wait()
		w.assignFresh()
		w.checkLeaders()
		ev, ok := w.nextEvent(end)
		if !ok {
			break
		}
		w.mu.Lock()
		if ev.at.After(w.now) {
			w.now = ev.at
		}
		w.stats.events++
		w.mu.Unlock()
		ev.do()
	}
	w.mu.Lock()
	w.now = end
	if w.cfg.shards == 0 && (w.leaderSince.IsZero() || w.leaderSince.Sub(w.calmAt) > ttl+2*renew) {
		w.violate("no leader within ttl+2*renew (%s) after faults stopped (first leader at +%s)",
			ttl+2*renew, w.leaderSince.Sub(w.calmAt))
	}
	if bound := balanceBound(); w.cfg.shards > 0 && (w.balancedSince.IsZero() || w.balancedSince.Sub(w.calmAt) > bound) {
		w.violate("shards not balanced within %s after faults stopped (balanced at +%s)", bound, w.balancedSince.Sub(w.calmAt))
	}
	if w.phases.phase == phaseJoin {
		w.closeJoinLocked()
	}
	w.mu.Unlock()
	w.shutdown()
	return w.violations
}

// shutdown stops every node: requests fail fast, timers fire at once.
func (w *world) shutdown() {
	for _, n := range w.nodes {
		n.cancel()
	}
	for {
		synctest.Wait()
		all := true
		for _, n := range w.nodes {
			select {
			case <-n.done:
			default:
				all = false
			}
		}
		if all {
			return
		}
		w.mu.Lock()
		for _, r := range w.reqs {
			r.resp <- simResp{err: porttest.ErrUnavailable}
		}
		for _, r := range w.resps {
			r.resp <- r.answer
		}
		w.reqs, w.resps, w.notes = nil, nil, nil
		for _, tm := range w.timers {
			select {
			case tm.ch <- w.now:
			default:
			}
		}
		w.timers = nil
		for _, n := range w.nodes {
			n.paused = false
		}
		w.mu.Unlock()
	}
}

// simulate runs one seed in its own bubble.
func simulate(t *testing.T, cfg simConfig) (violations, trace []string, stats simStats) {
	synctest.Test(t, func(t *testing.T) {
		w := newWorld(cfg)
		violations = w.run(t)
		trace, stats = w.trace, w.stats
	})
	return violations, trace, stats
}

func seedCount(t *testing.T) int {
	n := *simSeeds
	if s := os.Getenv("SF2LOKI_SIM_SEEDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("SF2LOKI_SIM_SEEDS=%q is not a positive integer", s)
		}
		n = v
	}
	return n
}

func reportFailure(t *testing.T, seed uint64, violations, trace []string) {
	t.Helper()
	const tail = 400
	shown := trace
	if len(shown) > tail {
		shown = shown[len(shown)-tail:]
	}
	t.Errorf("seed %d: %d invariant violation(s):\n  %s\nreplay: go test ./internal/domain -run 'TestSimulation$' -sim.seed=%d -v\nlast %d trace lines:\n%s",
		seed, len(violations), strings.Join(violations, "\n  "), seed, len(shown), strings.Join(shown, "\n"))
}

// runSeeds simulates seeds 1..n (four at a time), reports the first three
// that broke an invariant, and returns the summed stats and how many broke.
func runSeeds(t *testing.T, n int, config func(uint64) simConfig) (total simStats, failed int) {
	var mu sync.Mutex
	kinds, first := map[string]int{}, map[string]uint64{}
	defer func() {
		for _, k := range slices.Sorted(maps.Keys(kinds)) {
			t.Logf("%6d × %s (seed %d first)", kinds[k], k, first[k])
		}
	}()
	seeds := make(chan uint64)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for seed := range seeds {
				v, trace, stats := simulate(t, config(seed))
				mu.Lock()
				total.events += stats.events
				total.commits += stats.commits
				total.acquisitions += stats.acquisitions
				total.recovered += stats.recovered
				total.acrossCalls += stats.acrossCalls
				total.conflicts += stats.conflicts
				total.fenced += stats.fenced
				total.pauses += stats.pauses
				total.dropped += stats.dropped
				total.notes += stats.notes
				total.noteFaults += stats.noteFaults
				if len(v) > 0 {
					failed++
					if failed <= 3 {
						reportFailure(t, seed, v, trace)
					}
				}
				if dir := os.Getenv("SF2LOKI_SIM_TRACES"); dir != "" && len(v) > 0 {
					body := strings.Join(v, "\n") + "\n\n" + strings.Join(trace, "\n") + "\n"
					if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("seed-%d.txt", seed)), []byte(body), 0o644); err != nil {
						t.Errorf("SF2LOKI_SIM_TRACES: %v", err)
					}
				}
				for _, msg := range v {
					k := violationKind(msg)
					if kinds[k]++; first[k] == 0 || seed < first[k] {
						first[k] = seed
					}
				}
				mu.Unlock()
			}
		})
	}
	for seed := uint64(1); seed <= uint64(n); seed++ {
		seeds <- seed
	}
	close(seeds)
	wg.Wait()
	return total, failed
}

// violationKind is a violation's message with its names and numbers
// blanked, to count the kinds of violation over many seeds.
func violationKind(msg string) string {
	return kindBlanks.ReplaceAllString(msg, "#")
}

var kindBlanks = regexp.MustCompile(`\b(n|lease-|state-|v|epoch )?[0-9][0-9.]*(ms|s)?\b|\[[^]]*\]|\([^)]*\)`)

// TestSimulation runs the deterministic simulation over many seeds.
func TestSimulation(t *testing.T) {
	if *simSeed != 0 {
		v, trace, stats := simulate(t, defaultSimConfig(*simSeed))
		t.Logf("seed %d: %+v\n%s", *simSeed, stats, strings.Join(trace, "\n"))
		if len(v) > 0 {
			reportFailure(t, *simSeed, v, trace)
		}
		return
	}
	n := seedCount(t)
	total, failed := runSeeds(t, n, defaultSimConfig)
	// The wall time is go test's own "--- PASS: TestSimulation (Ns)" line.
	t.Logf("simulation: %d seeds, %d with violations; totals %+v", n, failed, total)
	if total.commits == 0 || total.acquisitions < n || total.recovered == 0 || total.pauses == 0 || total.notes == 0 || total.noteFaults == 0 || (n >= 200 && total.acrossCalls == 0) {
		t.Fatalf("the simulation exercised too little to mean anything: %+v", total)
	}
}

// TestSimulationIsDeterministic replays seeds and compares traces.
func TestSimulationIsDeterministic(t *testing.T) {
	for seed := uint64(1); seed <= 5; seed++ {
		_, a, _ := simulate(t, defaultSimConfig(seed))
		_, b, _ := simulate(t, defaultSimConfig(seed))
		if !slices.Equal(a, b) {
			i := 0
			for i < len(a) && i < len(b) && a[i] == b[i] {
				i++
			}
			t.Fatalf("seed %d diverged at trace line %d:\n%q\n%q", seed, i, at(a, i), at(b, i))
		}
	}
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "<end>"
}

// TestSimulationCatchesBrokenDriftAssumption proves the overlap check can
// fire: a node whose clock runs at twice real speed waits out the ttl in half
// the time, and takes over while the leader's fence still passes.
func TestSimulationCatchesBrokenDriftAssumption(t *testing.T) {
	for seed := uint64(1); seed <= 50; seed++ {
		cfg := defaultSimConfig(seed)
		cfg.fastNode, cfg.fastRatePPT = 1, 2000
		v, _, _ := simulate(t, cfg)
		for _, msg := range v {
			if strings.Contains(msg, "pass CheckFence at once") {
				t.Logf("seed %d caught it: %s", seed, msg)
				return
			}
		}
	}
	t.Fatal("50 seeds with a clock running at 2x never produced two simultaneous leaders: the checker is blind")
}

// TestSimulationShards runs the simulation with five shards balanced over
// three nodes (a membership document and a Balancer per node): per shard at
// most one node passes the fence at any instant, no document moves
// backwards, and after the faults stop every shard is led and the nodes'
// counts differ by at most one within balanceBound. A tenth of
// TestSimulation's seeds (at least 50).
func TestSimulationShards(t *testing.T) {
	if *simSeed != 0 {
		v, trace, stats := simulate(t, shardSimConfig(*simSeed))
		t.Logf("seed %d: %+v\n%s", *simSeed, stats, strings.Join(trace, "\n"))
		if len(v) > 0 {
			reportFailure(t, *simSeed, v, trace)
		}
		return
	}
	n := max(seedCount(t)/10, 50)
	total, failed := runSeeds(t, n, shardSimConfig)
	t.Logf("shard simulation: %d seeds, %d with violations; totals %+v", n, failed, total)
	if total.commits == 0 || total.acquisitions < 5*n || total.pauses == 0 {
		t.Fatalf("the shard simulation exercised too little to mean anything: %+v", total)
	}
}
