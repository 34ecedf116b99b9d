package domain_test

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// A watching node's lease handle reports the lease's changes through the
// simulated network. During chaos a report may be late (a latency spike),
// dropped, repeated, followed by a stale replay of the state before it, or
// turned into a broken watch that recovers later with the state of the
// moment; a paused node receives its reports when it resumes. None of this
// may ever let a standby take over early: the invariants are the same.

// simWatchCAS is a node's lease handle that can watch.
type simWatchCAS struct{ *simCAS }

var _ ports.Watcher = (*simWatchCAS)(nil)

// simWatch is one running watch.
type simWatch struct {
	node   *simNode
	obj    string
	ch     chan ports.Change
	closed bool
	order  uint64 // 0 until the scheduler has seen it (assignWatchesLocked)
}

// simNote is one report on its way to a watch.
type simNote struct {
	watch   *simWatch
	at      time.Time
	seq     uint64
	change  ports.Change
	current bool // report the state at delivery (a watch (re)started)
}

// Watch implements ports.Watcher.
func (s *simWatchCAS) Watch(ctx context.Context) <-chan ports.Change {
	w := s.w
	sw := &simWatch{node: s.node, obj: s.obj, ch: make(chan ports.Change, 1)}
	w.mu.Lock()
	// Its first report (the state when it starts) is scheduled by the
	// scheduler: node goroutines start watches in a racy order.
	w.watches = append(w.watches, sw)
	w.mu.Unlock()
	context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		sw.closed = true
		close(sw.ch)
		w.watches = deleteFunc(w.watches, func(x *simWatch) bool { return x == sw })
		w.notes = deleteFunc(w.notes, func(x *simNote) bool { return x.watch == sw })
	})
	return sw.ch
}

func deleteFunc[T any](s []T, del func(T) bool) []T {
	out := s[:0]
	for _, x := range s {
		if !del(x) {
			out = append(out, x)
		}
	}
	clear(s[len(out):])
	return out
}

// assignWatchesLocked orders the watches started since the last event
// (by node and object, as requests are) and schedules their first reports.
func (w *world) assignWatchesLocked() {
	var fresh []*simWatch
	for _, sw := range w.watches {
		if sw.order == 0 {
			fresh = append(fresh, sw)
		}
	}
	slices.SortFunc(fresh, func(a, b *simWatch) int {
		if a.node.id != b.node.id {
			return a.node.id - b.node.id
		}
		return strings.Compare(a.obj, b.obj)
	})
	for _, sw := range fresh {
		w.watchSeq++
		sw.order = w.watchSeq
		w.noteLocked(sw, ports.Change{}, true, w.noteLatencyLocked())
	}
	slices.SortFunc(w.watches, func(a, b *simWatch) int { return int(a.order) - int(b.order) })
}

// noteLatencyLocked is a report's delay: milliseconds, with spikes of
// seconds during chaos.
func (w *world) noteLatencyLocked() time.Duration {
	lat := time.Millisecond + time.Duration(w.wrng.Int64N(int64(20*time.Millisecond)))
	if w.chaos && w.wrng.IntN(10) == 0 {
		lat = 500*time.Millisecond + time.Duration(w.wrng.Int64N(int64(3500*time.Millisecond)))
	}
	return lat
}

func (w *world) noteLocked(sw *simWatch, c ports.Change, current bool, after time.Duration) {
	w.seq++
	w.notes = append(w.notes, &simNote{watch: sw, at: w.now.Add(after), seq: w.seq, change: c, current: current})
}

// reportLocked schedules the report of a change of obj (prev is the state
// before it) to every watch on obj, with the chaos's faults.
func (w *world) reportLocked(obj string, c, prev ports.Change) {
	for _, sw := range w.watches {
		if sw.obj != obj {
			continue
		}
		lat := w.noteLatencyLocked()
		if !w.chaos {
			w.noteLocked(sw, c, false, lat)
			continue
		}
		switch f := w.wrng.IntN(20); {
		case f < 2: // dropped
			w.stats.noteFaults++
		case f < 4: // the watch breaks, and resumes later with the state then
			w.stats.noteFaults++
			w.noteLocked(sw, ports.Change{Err: porttest.ErrUnavailable}, false, lat)
			w.noteLocked(sw, ports.Change{}, true, lat+100*time.Millisecond+time.Duration(w.wrng.Int64N(int64(3*time.Second))))
		case f < 5: // repeated
			w.stats.noteFaults++
			w.noteLocked(sw, c, false, lat)
			w.noteLocked(sw, c, false, lat+w.noteLatencyLocked())
		case f < 6: // followed by a stale replay of the state before it
			w.stats.noteFaults++
			w.noteLocked(sw, c, false, lat)
			w.noteLocked(sw, prev, false, lat+w.noteLatencyLocked())
		default:
			w.noteLocked(sw, c, false, lat)
		}
	}
}

// deliverNote hands a report to its watch, replacing one not yet read.
func (w *world) deliverNote(nt *simNote) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notes = deleteFunc(w.notes, func(x *simNote) bool { return x == nt })
	sw := nt.watch
	if sw.closed {
		return
	}
	c := nt.change
	if nt.current {
		obj, ok := w.objects[sw.obj].Peek()
		c = ports.Change{Object: obj, Absent: !ok}
	}
	w.stats.notes++
	what := "version " + string(c.Object.Version)
	switch {
	case c.Err != nil:
		what = "broken: " + c.Err.Error()
	case c.Absent:
		what = "absent"
	}
	w.logLocked("%s watch %s → %s", sw.node.name, sw.obj, what)
	ports.Offer(sw.ch, c)
}
