package porttest

import (
	"bytes"
	"context"
	"sync"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// WatchedMemory is a MemoryCAS that also implements ports.Watcher, with the
// awkward behaviour of real watches under the test's control: Mute drops
// reports (a watch that silently misses changes), Break reports the watch
// broken until Resume re-reads and reports the current state. Reports are
// coalesced for a slow reader, as the contract allows.
type WatchedMemory struct {
	*MemoryCAS

	mu      sync.Mutex
	watches map[*memWatch]struct{}
	muted   bool
	broken  bool
	starts  int
}

var _ ports.Watcher = (*WatchedMemory)(nil)

// NewWatchedMemory makes m watchable. Create it before any watch starts.
func NewWatchedMemory(m *MemoryCAS) *WatchedMemory {
	w := &WatchedMemory{MemoryCAS: m, watches: map[*memWatch]struct{}{}}
	m.mu.Lock()
	m.changed = w.report
	m.mu.Unlock()
	return w
}

type memWatch struct {
	ch     chan ports.Change
	closed bool
}

// send replaces a pending report with c; w.mu held.
func (mw *memWatch) send(c ports.Change) {
	if !mw.closed {
		ports.Offer(mw.ch, c)
	}
}

// report hears a change of the MemoryCAS (its mutex held).
func (w *WatchedMemory) report(c ports.Change) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.muted || w.broken {
		return
	}
	for mw := range w.watches {
		mw.send(c)
	}
}

// currentLocked is the object's state as a Change; w.MemoryCAS.mu held
// (taken before w.mu, as report's caller does, so that no write lands
// between the read and the registration or the resumption).
func (w *WatchedMemory) currentLocked() ports.Change {
	m := w.MemoryCAS
	if !m.exists {
		return ports.Change{Absent: true}
	}
	return ports.Change{Object: ports.Object{Data: bytes.Clone(m.data), Version: m.version}}
}

// Watch implements ports.Watcher.
func (w *WatchedMemory) Watch(ctx context.Context) <-chan ports.Change {
	mw := &memWatch{ch: make(chan ports.Change, 1)}
	w.MemoryCAS.mu.Lock()
	defer w.MemoryCAS.mu.Unlock()
	cur := w.currentLocked()
	w.mu.Lock()
	w.starts++
	w.watches[mw] = struct{}{}
	if w.broken {
		mw.send(ports.Change{Err: ErrUnavailable})
	} else {
		mw.send(cur)
	}
	w.mu.Unlock()
	context.AfterFunc(ctx, func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.watches, mw)
		mw.closed = true
		close(mw.ch)
	})
	return mw.ch
}

// Mute drops every report from now on (true) or stops dropping (false).
func (w *WatchedMemory) Mute(on bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.muted = on
}

// Break reports err to every watch; no change is reported until Resume.
func (w *WatchedMemory) Break(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.broken = true
	for mw := range w.watches {
		mw.send(ports.Change{Err: err})
	}
}

// Resume ends a Break: every watch gets the current state.
func (w *WatchedMemory) Resume() {
	w.MemoryCAS.mu.Lock()
	defer w.MemoryCAS.mu.Unlock()
	cur := w.currentLocked()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.broken = false
	for mw := range w.watches {
		mw.send(cur)
	}
}

// Watches is how many watches are running; Starts how many were started.
func (w *WatchedMemory) Watches() (running, started int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.watches), w.starts
}
