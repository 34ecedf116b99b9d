package domain

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// Producers blocked on a full queue all get through as the consumer takes
// (no wake-up is lost), in each producer's order, and nothing is lost or
// repeated.
func TestQueueWakesEveryBlockedProducer(t *testing.T) {
	for _, max := range []int{1, 2, 7} {
		t.Run(strconv.Itoa(max), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newQueue(max)
				const producers, each = 5, 300
				var wg sync.WaitGroup
				for p := range producers {
					wg.Go(func() {
						for i := range each {
							if err := q.push(t.Context(), ports.Entry{Line: strconv.Itoa(p), Checkpoint: ports.Checkpoint{Value: strconv.Itoa(i)}}, 1); err != nil {
								t.Error(err)
								return
							}
						}
					})
				}
				go func() { wg.Wait(); q.close() }()
				next := make([]int, producers)
				total := 0
				for q.wait() {
					var batch []ports.Entry
					batch, _, _ = q.take(batch, 0, 3, 1<<30)
					q.mu.Lock()
					n := len(q.buf) - q.head
					q.mu.Unlock()
					if n > max {
						t.Fatalf("the queue holds %d entries, max %d", n, max)
					}
					for _, e := range batch {
						p, _ := strconv.Atoi(e.Line)
						if i, _ := strconv.Atoi(e.Checkpoint.Value); i != next[p] {
							t.Fatalf("producer %d: entry %d after %d", p, i, next[p]-1)
						}
						next[p]++
						total++
					}
				}
				if total != producers*each {
					t.Fatalf("took %d entries, want %d", total, producers*each)
				}
			})
		})
	}
}

// A push waiting for room ends with its context, and takes no slot.
func TestQueuePushEndsWithItsContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(1)
		if err := q.push(t.Context(), ports.Entry{Line: "a"}, 1); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error)
		go func() { done <- q.push(ctx, ports.Entry{Line: "b"}, 1) }()
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("push on a full queue after its context ended: %v", err)
		}
		batch, _, _ := q.take(nil, 0, 10, 1<<30)
		if len(batch) != 1 || batch[0].Line != "a" {
			t.Fatalf("took %v, want only a", batch)
		}
	})
}

// A batch is sized to what is queued: a full one is allocated once at its
// size, a trickle's and a byte-bound one's stay small, and it never holds
// more than maxEntries slots.
func TestQueueTakeSizesTheBatch(t *testing.T) {
	q := newQueue(10000)
	var c costs
	add := func(n int) {
		t.Helper()
		for i := range n {
			e := ports.Entry{Line: fmt.Sprint(i)}
			if err := q.push(t.Context(), e, c.of(e)); err != nil {
				t.Fatal(err)
			}
		}
	}
	add(3)
	batch, cost, _ := q.take(nil, 0, 1000, 1<<30)
	if len(batch) != 3 || cap(batch) != 3 {
		t.Fatalf("3 queued: a batch of %d in %d slots, want 3 in 3", len(batch), cap(batch))
	}
	add(5)
	batch, cost, _ = q.take(batch, cost, 1000, 1<<30)
	if len(batch) != 8 || cap(batch) < 8 || cap(batch) > 16 {
		t.Fatalf("5 more: a batch of %d in %d slots, want 8 in 8 to 16", len(batch), cap(batch))
	}
	add(2500)
	batch, _, _ = q.take(batch, cost, 1000, 1<<30)
	if len(batch) != 1000 || cap(batch) != 1000 || batch[7].Line != "4" || batch[8].Line != "0" {
		t.Fatalf("2,500 more: a batch of %d in %d slots, want 1000 in 1000, in order", len(batch), cap(batch))
	}
	if batch, _, _ = q.take(nil, 0, 1000, 1<<30); len(batch) != 1000 || cap(batch) != 1000 {
		t.Fatalf("a full batch: %d in %d slots, want 1000 in 1000", len(batch), cap(batch))
	}
	// Large entries: the bytes, not the entries, bound the batch and its
	// slots.
	big := q.buf[q.head].cost
	if batch, _, _ = q.take(nil, 0, 1000, 5*big); len(batch) != 5 || cap(batch) > 6 {
		t.Fatalf("5 entries' bytes: a batch of %d in %d slots, want 5 in at most 6", len(batch), cap(batch))
	}
}

// The buffer grows with what the queue holds and is given back once the
// consumer finds it empty; take stops at the entry and byte limits and
// says when a closed queue is empty.
func TestQueueGrowsAndGivesBack(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQueue(10000)
		if cap(q.buf) != 0 {
			t.Fatalf("a new queue holds %d slots", cap(q.buf))
		}
		var c costs
		for i := range 5000 {
			e := ports.Entry{Line: fmt.Sprintf("%05d", i)}
			if err := q.push(t.Context(), e, c.of(e)); err != nil {
				t.Fatal(err)
			}
		}
		batch, cost, done := q.take(nil, 0, 1000, 1<<30)
		if len(batch) != 1000 || batch[999].Line != "00999" || done {
			t.Fatalf("took %d entries (done %v), want the first 1000", len(batch), done)
		}
		if batch, _, _ = q.take(nil, 0, 5000, cost/2); len(batch) != 500 {
			t.Fatalf("with half the bytes of 1000 entries took %d, want 500", len(batch))
		}
		if batch, _, _ = q.take(nil, 0, 5000, 1<<30); len(batch) != 3500 || batch[3499].Line != "04999" {
			t.Fatalf("took %d entries, want the last 3500", len(batch))
		}
		waited := make(chan bool)
		go func() { waited <- q.wait() }()
		synctest.Wait() // wait found the queue empty and blocks
		q.mu.Lock()
		slots := cap(q.buf)
		q.mu.Unlock()
		if slots > keptSlots {
			t.Fatalf("an emptied queue the consumer waits on keeps %d slots, want at most %d", slots, keptSlots)
		}
		if err := q.push(t.Context(), ports.Entry{Line: "x"}, 1); err != nil {
			t.Fatal(err)
		}
		if !<-waited {
			t.Fatal("wait returned false for a queued entry")
		}
		q.close()
		if batch, _, done = q.take(nil, 0, 10, 1<<30); len(batch) != 1 || !done {
			t.Fatalf("the closed queue's last take: %d entries, done %v", len(batch), done)
		}
		if q.wait() {
			t.Fatal("wait on a closed, empty queue returned true")
		}
	})
}
