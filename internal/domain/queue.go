package domain

import (
	"context"
	"sync"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// queue is a lane's first-in first-out queue of entries, bounded by max:
// its producers (the lane's sources) block while it is full; its one
// consumer (the lane's batcher) takes many entries under one lock. Its
// buffer grows with what it holds and is given back when the consumer
// finds it empty, so an idle lane holds next to nothing, where a channel
// of max slots would hold max × 96 bytes from the start. Each entry
// carries its cost, so the bytes charged when it was queued are the bytes
// released.
type queue struct {
	mu     sync.Mutex
	buf    []queued // buf[head:] are queued
	head   int
	max    int
	closed bool
	// ready holds a token once entries were added to an empty queue or the
	// queue was closed; space once entries were taken. A token may be
	// stale: whoever wakes looks again under the lock.
	ready, space chan struct{}
}

// queued is an entry and what it costs (costs.of), measured once.
type queued struct {
	e    ports.Entry
	cost int64
}

// keptSlots is the buffer an emptied queue keeps (about 24 KiB); a larger
// one is given back.
const keptSlots = 256

func newQueue(max int) *queue {
	return &queue{max: max, ready: make(chan struct{}, 1), space: make(chan struct{}, 1)}
}

func wake(ch chan struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// push appends e, which costs cost, waiting while the queue is full, until
// ctx ends.
func (q *queue) push(ctx context.Context, e ports.Entry, cost int64) error {
	waited := false
	for {
		q.mu.Lock()
		n := len(q.buf) - q.head
		if n < q.max {
			if len(q.buf) == cap(q.buf) && q.head > 0 {
				// Move the queued entries to the front rather than grow.
				k := copy(q.buf, q.buf[q.head:])
				clear(q.buf[k:])
				q.buf, q.head = q.buf[:k], 0
			}
			if len(q.buf) == cap(q.buf) {
				// Grow by doubling, never past max slots.
				grown := make([]queued, len(q.buf), min(max(2*cap(q.buf), 16), q.max))
				copy(grown, q.buf)
				q.buf = grown
			}
			q.buf = append(q.buf, queued{e, cost})
			q.mu.Unlock()
			if n == 0 {
				// The consumer waits only after finding the queue empty.
				wake(q.ready)
			}
			if waited && n+1 < q.max {
				// Pass the wake-up on to another producer waiting for room.
				wake(q.space)
			}
			return nil
		}
		q.mu.Unlock()
		waited = true
		select {
		case <-q.space:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// close ends the queue: once it is empty, wait returns false.
func (q *queue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
	wake(q.ready)
}

// wait blocks until an entry is queued (true) or the queue is closed and
// empty (false). Finding it empty, it gives back a large buffer first.
func (q *queue) wait() bool {
	for {
		q.mu.Lock()
		if q.head < len(q.buf) {
			q.mu.Unlock()
			return true
		}
		if q.closed {
			q.mu.Unlock()
			return false
		}
		if cap(q.buf) > keptSlots {
			q.buf, q.head = nil, 0
		}
		q.mu.Unlock()
		<-q.ready
	}
}

// fits is how many queued entries a batch with room for entries more and
// bytes more would take, estimated at the first entry's cost (at least
// one while any is queued). Callers hold q.mu.
func (q *queue) fits(entries int, bytes int64) int {
	n := min(len(q.buf)-q.head, entries)
	if n <= 0 || bytes <= 0 {
		return 0
	}
	if c := q.buf[q.head].cost; c > 0 {
		n = int(min(int64(n), bytes/c+1))
	}
	return n
}

// take moves queued entries to batch while it holds fewer than maxEntries
// entries and costs less than maxBytes, and says whether the queue is
// closed and now empty.
func (q *queue) take(batch []ports.Entry, cost int64, maxEntries int, maxBytes int64) ([]ports.Entry, int64, bool) {
	q.mu.Lock()
	took := false
	// Room for what is queued, up to maxEntries and to what maxBytes
	// leaves at the first entry's cost, at least doubling: a full batch is
	// allocated once, a trickle's and a few large entries' stay small.
	if need := len(batch) + q.fits(maxEntries-len(batch), maxBytes-cost); need > cap(batch) {
		grown := make([]ports.Entry, len(batch), min(max(need, 2*cap(batch)), maxEntries))
		copy(grown, batch)
		batch = grown
	}
	for q.head < len(q.buf) && len(batch) < maxEntries && cost < maxBytes {
		e := q.buf[q.head]
		q.buf[q.head] = queued{}
		q.head++
		batch = append(batch, e.e)
		cost += e.cost
		took = true
	}
	if q.head == len(q.buf) {
		q.buf, q.head = q.buf[:0], 0
	}
	done := q.closed && len(q.buf) == 0
	q.mu.Unlock()
	if took {
		wake(q.space)
	}
	return batch, cost, done
}
