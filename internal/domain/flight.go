package domain

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// A flight is one batch from its collection until its checkpoints are
// released: pushed (up to MaxInFlight per lane at once), landed (accepted,
// abandoned or refused), then released in the lane's order.
type flight struct {
	batch []ports.Entry
	lines []ports.Entry // the entries pushed (not the checkpoint-only ones)
	cost  int64
	// oldest and newest are the times of its lines (zero without lines).
	oldest, newest time.Time
	landed         bool
	// err is nil when the sink accepted the lines (or there were none),
	// errAbandoned when they were dropped uncommitted, else the fatal error.
	err error
}

func newFlight(batch []ports.Entry, cost int64) *flight {
	f := &flight{batch: batch, cost: cost}
	n := 0 // the lines: entries that are not checkpoint-only
	for _, e := range batch {
		if e.CheckpointOnly {
			continue
		}
		if n == 0 || e.Time.Before(f.oldest) {
			f.oldest = e.Time
		}
		if n == 0 || e.Time.After(f.newest) {
			f.newest = e.Time
		}
		n++
	}
	switch {
	case n == len(batch):
		// Every entry is a line: the lines are the batch (neither is
		// written once the flight is made).
		f.lines = batch
	case n > 0:
		f.lines = make([]ports.Entry, 0, n)
		for _, e := range batch {
			if !e.CheckpointOnly {
				f.lines = append(f.lines, e)
			}
		}
	}
	return f
}

// lineBytes is what f's lines weigh against the egress budget.
func (f *flight) lineBytes() int64 {
	var n int64
	for _, e := range f.lines {
		n += int64(len(e.Line))
	}
	return n
}

// consume batches the lane until it is closed and empty, pushing up to
// MaxInFlight batches at once. After a fatal error or the end of the drain
// (drain is done), batches are released uncommitted without a push, so
// that the producers never block. Once stop is done (the run ends), a
// batch waiting for the next UTC day's budget is abandoned at once.
func (p *Pipeline) consume(stop, drain context.Context, l *lane, q *commitQueue, poisoned *poison, fail func(error)) {
	var pushes sync.WaitGroup
	for {
		// A batch is collected only once it could be pushed: a lane holds at
		// most MaxInFlight batches besides its queue.
		l.await(drain, func() bool { return len(l.flights) < p.cfg.MaxInFlight })
		batch, cost, open := p.collect(l)
		if len(batch) > 0 {
			f := newFlight(batch, cost)
			// The governor admits batches in the lane's order, before they
			// queue for a push.
			l.live.governed.Store(true)
			push, err := p.cfg.Egress.Admit(drain, stop, len(f.lines), f.lineBytes())
			l.live.governed.Store(false)
			switch {
			case !p.admit(drain, l, f) || err != nil:
				p.land(l, f, errAbandoned, q, poisoned)
			case len(f.lines) == 0 || !push: // a dropped batch moves its checkpoints
				p.land(l, f, nil, q, poisoned)
			default:
				pushes.Go(func() { p.land(l, f, p.pushFlight(drain, l, f, fail), q, poisoned) })
			}
		}
		if !open {
			break
		}
	}
	pushes.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.abandonedBatches > 0 {
		p.log.Warn("batches abandoned uncommitted; the next leader re-ingests them", "lane", l.name,
			"batches", l.abandonedBatches, "entries", l.abandonedEntries)
	}
}

// admit queues f behind the lane's flights once it may go: fewer than
// MaxInFlight flights wait to be released, and f's lines are at most
// ReorderWindow newer than the oldest line of any earlier flight still in
// the air. It returns false, queueing f all the same, once drain is done.
func (p *Pipeline) admit(drain context.Context, l *lane, f *flight) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.awaitLocked(drain, func() bool { return p.mayGo(l, f) })
	l.flights = append(l.flights, f)
	return drain.Err() == nil
}

// await waits until ok (called with l.mu held) or drain is done.
func (l *lane) await(drain context.Context, ok func() bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.awaitLocked(drain, ok)
}

func (l *lane) awaitLocked(drain context.Context, ok func() bool) {
	for drain.Err() == nil && !ok() {
		changed := l.changed
		l.mu.Unlock()
		select {
		case <-changed:
		case <-drain.Done():
		}
		l.mu.Lock()
	}
}

// mayGo reports whether f may be pushed now (l.mu held).
func (p *Pipeline) mayGo(l *lane, f *flight) bool {
	if len(l.flights) >= p.cfg.MaxInFlight {
		return false
	}
	if len(f.lines) == 0 {
		return true
	}
	for _, g := range l.flights {
		if !g.landed && len(g.lines) > 0 && f.newest.Sub(g.oldest) > p.cfg.ReorderWindow {
			return false
		}
	}
	return true
}

// pushFlight pushes f's lines, retrying transient refusals until drain
// ends. A fatal error is reported through fail at once.
func (p *Pipeline) pushFlight(drain context.Context, l *lane, f *flight, fail func(error)) error {
	err := p.untilDone(drain, "push", func() error { return p.push(drain, f.lines) })
	switch {
	case err == nil:
		l.live.progress(p.clock.Now())
		return nil
	case errors.Is(err, errAbandoned):
		return errAbandoned
	default:
		err = fmt.Errorf("sink: %w", err)
		fail(err)
		return err
	}
}

// push sends lines once, inside the fence (PipelineConfig.Fence): the
// fence is asked first; the push's context ends when the fence closes (at
// its deadline, unless a renewal moved it); and the sink asks the fence
// again just before each request (ports.SendGate). A push the fence stopped abandons its batch
// uncommitted, is reported (EventPushFenced) and is not retried.
func (p *Pipeline) push(ctx context.Context, lines []ports.Entry) error {
	fence := p.cfg.Fence
	if fence == nil {
		return p.sink.Push(ctx, lines)
	}
	deadline, err := fence()
	if err != nil {
		return p.fenced(len(lines), err)
	}
	pctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if !deadline.IsZero() {
		t := p.clock.NewTimer(deadline.Sub(p.clock.Now()))
		defer t.Stop()
		go func() {
			for {
				select {
				case <-t.C():
					d, err := fence()
					if err != nil {
						cancel(err)
						return
					}
					t.Reset(d.Sub(p.clock.Now())) // a renewal moved the deadline
				case <-pctx.Done():
					return
				}
			}
		}()
	}
	gate := func() error { _, err := fence(); return err }
	err = p.sink.Push(ports.WithSendGate(pctx, gate), lines)
	switch {
	case err == nil:
		return nil
	case ctx.Err() == nil && pctx.Err() != nil:
		return p.fenced(len(lines), context.Cause(pctx))
	case errors.Is(err, ports.ErrGateClosed) || errors.Is(err, ErrFenced):
		return p.fenced(len(lines), err)
	}
	return err
}

// fenced reports a push the fence stopped and abandons its batch.
func (p *Pipeline) fenced(entries int, err error) error {
	if p.cfg.Observer != nil {
		p.cfg.Observer.Observe(Event{Kind: EventPushFenced, At: p.clock.Now(), Err: err,
			Reason: fmt.Sprintf("a push of %d entries was stopped by the lease fence; the batch is abandoned uncommitted and the next leader re-ingests it", entries)})
	}
	return &stopRetrying{errAbandoned}
}

// land records f's outcome and releases, in the lane's order, every flight
// that landed with no earlier one still in the air: an accepted one offers
// its checkpoints (the last value per key, except poisoned keys) to the
// committer (the lane's progress, for a batch of checkpoints only too), any
// other poisons its keys so that no later batch's value for them is
// committed in this run.
func (p *Pipeline) land(l *lane, f *flight, err error, q *commitQueue, poisoned *poison) {
	l.mu.Lock()
	defer l.mu.Unlock()
	f.landed, f.err = true, err
	for len(l.flights) > 0 && l.flights[0].landed {
		g := l.flights[0]
		l.flights[0] = nil
		l.flights = l.flights[1:]
		if g.err == nil {
			l.live.progress(p.clock.Now())
			kv := map[string]string{}
			for _, e := range g.batch {
				if e.Checkpoint.Key != "" && !poisoned.has(e.Checkpoint.Key) {
					kv[e.Checkpoint.Key] = e.Checkpoint.Value
				}
			}
			if v, ok := p.cfg.Egress.Value(); ok {
				kv[EgressKey] = v
			}
			q.offer(kv)
		} else {
			poisoned.add(g.batch)
			if len(g.lines) > 0 {
				l.abandonedBatches++
				l.abandonedEntries += len(g.lines)
			}
		}
		l.bytes.release(g.cost)
		l.live.pending.Add(-int64(len(g.batch)))
	}
	close(l.changed)
	l.changed = make(chan struct{})
}

// commitQueue gathers the released checkpoints for the committer: the
// latest value per key.
type commitQueue struct {
	mu      sync.Mutex
	pending map[string]string
	wake    chan struct{} // one slot: something was offered
	live    *liveness     // pending: keys offered and not yet committed
}

func newCommitQueue(now time.Time) *commitQueue {
	q := &commitQueue{pending: map[string]string{}, wake: make(chan struct{}, 1), live: &liveness{}}
	q.live.progress(now)
	return q
}

func (q *commitQueue) offer(kv map[string]string) {
	if len(kv) == 0 {
		return
	}
	q.mu.Lock()
	for k, v := range kv {
		q.pending[k] = v
	}
	q.live.pending.Store(int64(len(q.pending)))
	q.mu.Unlock()
	select {
	case q.wake <- struct{}{}:
	default:
	}
}

// take returns what waits to be committed (it stays counted as pending
// until done).
func (q *commitQueue) take() map[string]string {
	q.mu.Lock()
	defer q.mu.Unlock()
	kv := q.pending
	q.pending = map[string]string{}
	return kv
}

// done records a commit that succeeded.
func (q *commitQueue) done(now time.Time) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.live.pending.Store(int64(len(q.pending)))
	q.live.progress(now)
}

// commitLoop writes what the lanes release: at most once per
// CommitInterval (measured from the end of the previous commit), and once
// more when every lane is done. It stops when drain ends (what was not
// committed then is re-ingested by the next leader) or at a fatal error,
// reported through fail.
func (p *Pipeline) commitLoop(drain context.Context, q *commitQueue, commits CheckpointWriter, lanesDone <-chan struct{}, fail func(error)) {
	var last time.Time // the end of the previous commit
	final := false
	for {
		if !final {
			select {
			case <-q.wake:
			case <-lanesDone:
				final = true
			case <-drain.Done():
				p.uncommitted(q, nil)
				return
			}
		}
		if wait := last.Add(p.cfg.CommitInterval).Sub(p.clock.Now()); !final && !last.IsZero() && wait > 0 {
			select {
			case <-p.clock.After(wait):
			case <-lanesDone:
				final = true
			case <-drain.Done():
				p.uncommitted(q, nil)
				return
			}
		}
		kv := q.take()
		if len(kv) == 0 {
			if final {
				return
			}
			continue
		}
		err := p.untilDone(drain, "commit", func() error {
			err := commits.CommitMany(drain, kv)
			if errors.Is(err, ErrFenced) || errors.Is(err, ErrConflict) {
				return &stopRetrying{err}
			}
			if err != nil {
				return ports.Transient("commit", err)
			}
			return nil
		})
		last = p.clock.Now()
		switch {
		case err == nil:
			q.done(last)
		case errors.Is(err, errAbandoned):
			p.uncommitted(q, kv)
			return
		default:
			fail(err)
			return
		}
	}
}

// uncommitted logs the positions left uncommitted when the drain ended:
// those waiting and failed (the ones a commit in the air held).
func (p *Pipeline) uncommitted(q *commitQueue, failed map[string]string) {
	kv := q.take()
	for k := range failed {
		kv[k] = ""
	}
	if len(kv) > 0 {
		p.log.Warn("checkpoints left uncommitted at the end of the drain; the next leader re-ingests from the positions committed before",
			"keys", len(kv))
	}
}

// collect takes one batch: it waits for a first entry, then gathers until
// the batch is full, BatchWait has passed, or the lane is closed (open
// false once the lane is closed and empty).
func (p *Pipeline) collect(l *lane) (batch []ports.Entry, cost int64, open bool) {
	if !l.q.wait() {
		return nil, 0, false
	}
	full := func() bool { return len(batch) >= l.cfg.BatchEntries || cost >= l.cfg.BatchBytes }
	var done bool
	batch, cost, done = l.q.take(batch, cost, l.cfg.BatchEntries, l.cfg.BatchBytes)
	if done || full() {
		return batch, cost, !done
	}
	timer := p.clock.NewTimer(l.cfg.BatchWait)
	defer timer.Stop()
	for {
		select {
		case <-l.q.ready:
			batch, cost, done = l.q.take(batch, cost, l.cfg.BatchEntries, l.cfg.BatchBytes)
			if done || full() {
				return batch, cost, !done
			}
		case <-timer.C():
			return batch, cost, true
		}
	}
}
