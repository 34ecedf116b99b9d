package domain

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// LaneConfig bounds one lane's queue and shapes its batches.
type LaneConfig struct {
	// QueueEntries and QueueBytes bound the queue (a full queue blocks the
	// sources: backpressure, never a drop). QueueBytes 0 means no byte bound.
	QueueEntries int
	QueueBytes   int64
	// A batch is pushed at BatchEntries entries, BatchBytes bytes, or
	// BatchWait after its first entry, whichever comes first.
	BatchEntries int
	BatchBytes   int64
	BatchWait    time.Duration
}

// MaxQueueEntries bounds a lane's queue (its buffer grows with what it
// holds, about 100 bytes an entry).
const MaxQueueEntries = 1 << 20

// DefaultLane is sized for a 512 MiB container: two lanes of at most 64 MiB
// queued each.
var DefaultLane = LaneConfig{QueueEntries: 10000, QueueBytes: 64 << 20, BatchEntries: 1000, BatchBytes: 1 << 20, BatchWait: time.Second}

// PipelineConfig configures a Pipeline.
type PipelineConfig struct {
	Realtime, Bulk LaneConfig
	// RetryMin and RetryMax bound the backoff between pushes of a batch the
	// sink refused transiently (defaults 1s and 30s).
	RetryMin, RetryMax time.Duration
	// Jitter spreads backoffs (nil: math/rand/v2).
	Jitter func() float64
	// StallTimeout is the liveness guard: when entries have waited
	// undelivered while no push and no commit succeeded for this long, Run
	// abandons the batches in flight (uncommitted) and returns a
	// *StalledError, so that the leader can hand over. 0 disables it; else
	// it must exceed CommitInterval.
	StallTimeout time.Duration
	// MaxInFlight is how many batches a lane pushes at once (0: 1). Their
	// checkpoints are released in the lane's order whatever order the sink
	// accepts them in, so a key's position moves only once every earlier
	// batch holding it was accepted.
	MaxInFlight int
	// ReorderWindow is how much newer than the oldest entry of an earlier
	// batch still in flight a batch's newest entry may be for the batch to
	// be pushed before that one lands (Loki refuses, per stream, entries
	// older than its newest by more than half its max_chunk_age). A batch
	// that would exceed it waits for the earlier ones. 0: a batch overtakes
	// only batches whose entries are all at least as new as its own.
	ReorderWindow time.Duration
	// CommitInterval is the least time between the end of one checkpoint
	// commit and the start of the next: accepted positions are gathered
	// (the latest value per key) and written together, and always at the
	// end of a run. 0 commits as soon as a batch is released (one write at
	// a time, coalescing what is released meanwhile).
	CommitInterval time.Duration
	// Egress, if set, governs the pushes of both lanes (rates and a daily
	// byte budget); its day's use is committed under EgressKey.
	Egress *Egress
	// Produced, if set, is asked once per source for the function told of
	// each entry that source queued (checkpoint-only entries aside), on
	// the goroutine that emitted it once the lane took it: it runs per
	// entry, so it must be cheap, and safe for concurrent use (a source may
	// emit from several goroutines).
	Produced func(source string) func(ports.Entry)
	// Fence, if set, is asked before every push and, through the push's
	// context (ports.SendGate), by the sink just before each request: an
	// error (ErrFenced) abandons the batch uncommitted; the push's context
	// ends when the fence closes (at its deadline, unless a renewal moved
	// it). The lease keeper's FenceDeadline; nil for a single instance.
	Fence func() (deadline time.Time, err error)
	// Observer, if set, is told of each push the fence stopped
	// (EventPushFenced).
	Observer Observer
	Logger   *slog.Logger
}

// CheckpointWriter is what the pipeline commits through: the
// CheckpointCommitter.
type CheckpointWriter interface {
	CommitMany(ctx context.Context, kv map[string]string) error
}

// Pipeline moves entries from sources through two lanes to the sink and
// commits each batch's checkpoints only after the sink accepted it.
type Pipeline struct {
	sink  ports.Sink
	clock ports.Clock
	cfg   PipelineConfig
	retry RetryPolicy
	log   *slog.Logger
	// lanes are the current run's (nil outside Run), for Held.
	lanes atomic.Pointer[[2]*lane]
}

// Held returns the entries and the bytes (as the lane's byte bound counts
// them) lane holds now: queued, batched or pushed and not yet released; 0
// outside Run.
func (p *Pipeline) Held(l ports.Lane) (entries, bytes int64) {
	all := p.lanes.Load()
	if all == nil || int(l) < 0 || int(l) >= len(all) {
		return 0, 0
	}
	ln := all[l]
	ln.bytes.mu.Lock()
	bytes = ln.bytes.used
	ln.bytes.mu.Unlock()
	return ln.live.pending.Load(), bytes
}

// NewPipeline validates cfg and returns a pipeline.
func NewPipeline(sink ports.Sink, clock ports.Clock, cfg PipelineConfig) (*Pipeline, error) {
	if sink == nil || clock == nil {
		return nil, configErrorf("pipeline needs a sink and a clock")
	}
	for name, l := range map[string]*LaneConfig{"realtime": &cfg.Realtime, "bulk": &cfg.Bulk} {
		if *l == (LaneConfig{}) {
			*l = DefaultLane
		}
		if l.QueueEntries < 1 || l.BatchEntries < 1 || l.BatchBytes < 1 || l.BatchWait <= 0 || l.QueueBytes < 0 {
			return nil, configErrorf("pipeline %s lane: queue entries, batch entries, batch bytes and batch wait must be positive: %+v", name, *l)
		}
		if l.QueueEntries > MaxQueueEntries {
			return nil, configErrorf("pipeline %s lane: queue entries %d above the maximum %d", name, l.QueueEntries, MaxQueueEntries)
		}
	}
	if cfg.MaxInFlight < 0 || cfg.ReorderWindow < 0 || cfg.CommitInterval < 0 {
		return nil, configErrorf("pipeline max in flight, reorder window and commit interval must not be negative")
	}
	if cfg.MaxInFlight == 0 {
		cfg.MaxInFlight = 1
	}
	if cfg.StallTimeout > 0 && cfg.StallTimeout <= cfg.CommitInterval {
		return nil, configErrorf("pipeline stall timeout %s must exceed the commit interval %s (positions wait that long to be committed)", cfg.StallTimeout, cfg.CommitInterval)
	}
	if cfg.RetryMin <= 0 {
		cfg.RetryMin = time.Second
	}
	if cfg.RetryMax < cfg.RetryMin {
		cfg.RetryMax = max(30*time.Second, cfg.RetryMin)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	retry := RetryPolicy{MaxAttempts: 1, BaseDelay: cfg.RetryMin, MaxDelay: cfg.RetryMax, Jitter: cfg.Jitter}.withDefaults()
	return &Pipeline{sink: sink, clock: clock, cfg: cfg, retry: retry, log: log}, nil
}

// costs computes what an entry charges against its lane's byte budget,
// remembering the size of the labels and metadata maps it measured: a
// source's entries share their maps (a file's rows, a topic's events), and
// ports.Entry's maps are never written once made, so the same map has the
// same size. A source may emit from several goroutines at once (one per
// event type, topic or object), so the memory is a small table of atomic
// slots keyed by the map's address, safe for concurrent use; an entry's
// cost is computed once, when it is queued, and travels with it.
type costs struct {
	slots [16]atomic.Pointer[mapSize]
}

// mapSize is the bytes of one map's keys and values. It keeps the map
// alive, so its address is never reused while it is remembered.
type mapSize struct {
	m unsafe.Pointer
	n int
}

// of is what e charges: its line, checkpoint value, labels and metadata,
// and 64 bytes for the rest.
func (c *costs) of(e ports.Entry) int64 {
	if e.CheckpointOnly {
		return 0
	}
	n := len(e.Line) + 64 + len(e.Checkpoint.Value)
	n += c.mapBytes(e.Labels)
	n += c.mapBytes(e.Metadata)
	return int64(n)
}

// mapBytes is the bytes of m's keys and values, measured again only when m
// is not remembered.
func (c *costs) mapBytes(m map[string]string) int {
	if len(m) == 0 {
		return 0
	}
	id := reflect.ValueOf(m).UnsafePointer()
	slot := &c.slots[uintptr(id)>>4%uintptr(len(c.slots))]
	if s := slot.Load(); s != nil && s.m == id {
		return s.n
	}
	n := 0
	for k, v := range m {
		n += len(k) + len(v)
	}
	slot.Store(&mapSize{m: id, n: n})
	return n
}

// budget bounds the bytes queued in a lane. Admission waits until the lane
// is under budget and then charges, so one oversized entry cannot deadlock.
type budget struct {
	mu    sync.Mutex
	used  int64
	max   int64
	freed chan struct{}
}

func (b *budget) acquire(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.max == 0 || b.used < b.max {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		ch := b.freed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (b *budget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	close(b.freed)
	b.freed = make(chan struct{})
}

type lane struct {
	name  string
	cfg   LaneConfig
	q     *queue
	costs costs // what the lane's entries cost, measured as they are queued
	bytes *budget
	live  *liveness

	mu      sync.Mutex
	flights []*flight     // pushed or waiting to be released, in the lane's order
	changed chan struct{} // closed and replaced when a flight lands or is released
	// abandoned counts what was dropped uncommitted (logged once at the end).
	abandonedBatches, abandonedEntries int
}

// poison records keys whose batch was abandoned: no later commit for them
// may leapfrog it in this run.
type poison struct {
	mu   sync.Mutex
	keys map[string]bool
}

func (p *poison) add(batch []ports.Entry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range batch {
		if e.Checkpoint.Key != "" {
			p.keys[e.Checkpoint.Key] = true
		}
	}
}

func (p *poison) has(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.keys[key]
}

// Run runs the sources until ctx ends or one fails, then drains: what is
// queued is pushed and committed with drain (which the caller keeps live for
// the shutdown grace while the fence still holds). Anything not pushed by
// then stays uncommitted and is re-ingested by the next leader. It returns
// the first fatal error: a sink's non-transient error, a fence or conflict
// from the committer, or a source's failure.
//
// Each lane collects batches and pushes up to MaxInFlight of them at once;
// a batch's checkpoints are released in the lane's order once it and every
// earlier batch landed, and the committer writes what was released at most
// once per CommitInterval, and at the end.
func (p *Pipeline) Run(ctx, drain context.Context, commits CheckpointWriter, resume func(string) (string, bool), sources []ports.Source) error {
	p.cfg.Egress.Restore(resume(EgressKey))
	lanes := map[ports.Lane]*lane{
		ports.LaneRealtime: newLane("realtime", p.cfg.Realtime, p.clock.Now()),
		ports.LaneBulk:     newLane("bulk", p.cfg.Bulk, p.clock.Now()),
	}
	p.lanes.Store(&[2]*lane{lanes[ports.LaneRealtime], lanes[ports.LaneBulk]})
	defer p.lanes.Store(nil)
	srcCtx, stopSources := context.WithCancelCause(ctx)
	defer stopSources(nil)
	// A stall or a fatal error abandons the pushes and commits in flight,
	// drain or not.
	drain, abandon := context.WithCancel(drain)
	defer abandon()
	var (
		errMu    sync.Mutex
		firstErr error
	)
	fail := func(err error) {
		errMu.Lock()
		if firstErr == nil {
			firstErr = err
		}
		errMu.Unlock()
		stopSources(err)
	}
	// A fatal push or commit error (a conflict, a fence) abandons every push
	// and commit in flight: no commit could land after it, and Run must
	// return promptly so that the daemon can reload.
	failAbandon := func(err error) { fail(err); abandon() }
	var producers = map[ports.Lane]*sync.WaitGroup{ports.LaneRealtime: {}, ports.LaneBulk: {}}
	for _, s := range sources {
		l := lanes[s.Lane()]
		producers[s.Lane()].Go(func() {
			emit := func(e ports.Entry) error { return l.push(srcCtx, e, l.costs.of(e)) }
			if p.cfg.Produced != nil {
				produced := p.cfg.Produced(s.Name())
				emit = func(e ports.Entry) error {
					if err := l.push(srcCtx, e, l.costs.of(e)); err != nil {
						return err
					}
					if !e.CheckpointOnly {
						produced(e)
					}
					return nil
				}
			}
			if err := s.Run(srcCtx, resume, emit); err != nil && srcCtx.Err() == nil {
				fail(fmt.Errorf("source %s: %w", s.Name(), err))
			}
		})
	}
	q := newCommitQueue(p.clock.Now())
	var watcher sync.WaitGroup
	watchCtx, stopWatch := context.WithCancel(drain)
	defer stopWatch()
	if p.cfg.StallTimeout > 0 {
		watched := []watched{{"realtime", lanes[ports.LaneRealtime].live}, {"bulk", lanes[ports.LaneBulk].live}, {checkpointLane, q.live}}
		watcher.Go(func() {
			if err := p.watch(watchCtx, watched); err != nil {
				p.log.Error("pipeline stalled: abandoning the batches and commits in flight, uncommitted", "error", err)
				failAbandon(err)
			}
		})
	}
	lanesDone, committed := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(committed)
		p.commitLoop(drain, q, commits, lanesDone, failAbandon)
	}()
	var consumers sync.WaitGroup
	poisoned := &poison{keys: map[string]bool{}}
	for id, l := range lanes {
		go func() {
			producers[id].Wait()
			l.q.close()
		}()
		consumers.Go(func() { p.consume(ctx, drain, l, q, poisoned, failAbandon) })
	}
	consumers.Wait()
	close(lanesDone)
	<-committed
	stopWatch()
	watcher.Wait()
	errMu.Lock()
	defer errMu.Unlock()
	return firstErr
}

func newLane(name string, cfg LaneConfig, now time.Time) *lane {
	l := &lane{name: name, cfg: cfg, q: newQueue(cfg.QueueEntries),
		bytes: &budget{max: cfg.QueueBytes, freed: make(chan struct{})}, live: &liveness{}, changed: make(chan struct{})}
	l.live.progress(now)
	return l
}

// liveness is what the stall guard watches in one lane (or the committer):
// work accepted and not yet done, and when its last push or commit
// succeeded (or it was last idle). Each has its own, so a lane stuck behind
// a refusing sink is noticed while the other one flows.
type liveness struct {
	pending atomic.Int64
	last    atomic.Int64 // UnixNano on the pipeline's clock
	// governed is true while the lane waits on the egress governor.
	governed atomic.Bool
}

func (l *liveness) progress(now time.Time) { l.last.Store(now.UnixNano()) }

// watched is one liveness the stall guard watches.
type watched struct {
	name string
	live *liveness
}

// checkpointLane names the committer in a StalledError.
const checkpointLane = "checkpoint"

// watch returns a *StalledError once a lane (or the committer) has had work
// pending with no progress for StallTimeout; nil when ctx ends.
func (p *Pipeline) watch(ctx context.Context, all []watched) error {
	limit := p.cfg.StallTimeout
	tick := max(limit/10, time.Millisecond)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-p.clock.After(tick):
		}
		now := p.clock.Now()
		for _, w := range all {
			pending := w.live.pending.Load()
			if pending == 0 || w.live.governed.Load() { // a lane the egress governor holds is not stalled
				w.live.progress(now)
				continue
			}
			if since := now.Sub(time.Unix(0, w.live.last.Load())); since >= limit {
				return &StalledError{Lane: w.name, For: since, Pending: pending}
			}
		}
	}
}

// push queues e, which costs cost (costs.of), blocking while the lane is
// full.
func (l *lane) push(ctx context.Context, e ports.Entry, cost int64) error {
	if err := l.bytes.acquire(ctx, cost); err != nil {
		return err
	}
	l.live.pending.Add(1)
	if err := l.q.push(ctx, e, cost); err != nil {
		l.live.pending.Add(-1)
		l.bytes.release(cost)
		return err
	}
	return nil
}

var errAbandoned = errors.New("abandoned: the drain deadline passed")

// stopRetrying wraps an error that ends the retries at once.
type stopRetrying struct{ err error }

func (s *stopRetrying) Error() string { return s.err.Error() }
func (s *stopRetrying) Unwrap() error { return s.err }

// untilDone retries op while it fails transiently, with backoff, until ctx
// ends (errAbandoned). A non-transient error returns at once.
func (p *Pipeline) untilDone(ctx context.Context, what string, op func() error) error {
	for attempt := 1; ; attempt++ {
		err := op()
		var stop *stopRetrying
		switch {
		case err == nil:
			return nil
		case errors.As(err, &stop):
			return stop.err
		case ctx.Err() != nil:
			return errAbandoned
		case !ports.IsTransient(err):
			return err
		}
		d := p.retry.backoff(attempt, err)
		if attempt&(attempt-1) == 0 { // attempts 1, 2, 4, 8, …: a long outage does not flood the log
			p.log.Warn(what+" failed; retrying", "attempt", attempt, "wait", d, "error", err)
		}
		select {
		case <-p.clock.After(d):
		case <-ctx.Done():
			return errAbandoned
		}
	}
}
