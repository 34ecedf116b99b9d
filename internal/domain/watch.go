package domain

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// A standby whose lease store can watch (ports.Watcher) learns of the
// lease's changes from the watch instead of polling it every RenewInterval.
// Each reported state is judged exactly like a read: it starts or continues
// the observation of its Version on this process's clock, and a claim rests
// on a compare-and-swap on that Version. A watch can only make a standby
// look sooner, never claim sooner: a late or repeated report restarts or
// continues an observation no earlier than a read would, a stale one makes
// the claim's precondition fail, and a missed one leaves the standby
// looking again (with a read) when the last version it saw would go stale.
// While the watch is broken, or was never up, the standby polls.

// leaseWatch is Run's watch of the lease while it stands by.
type leaseWatch struct {
	src     ports.Watcher // nil: the store cannot watch, or Poll is set
	ch      <-chan ports.Change
	cancel  context.CancelFunc
	live    bool      // a state arrived since the watch started or last broke
	retryAt time.Time // after the watch ended: no new one before this
}

func (k *LeaseKeeper) newLeaseWatch() *leaseWatch {
	w := &leaseWatch{}
	if src, ok := k.cas.(ports.Watcher); ok && !k.cfg.Poll {
		w.src = src
	}
	return w
}

// stop ends the watch, if one runs.
func (w *leaseWatch) stop() {
	if w.cancel != nil {
		w.cancel()
	}
	w.ch, w.cancel, w.live = nil, nil, false
}

// syncWatch runs the watch while this keeper stands by and stops it while
// it leads (a leader learns of a take-over from its renewal's
// compare-and-swap).
func (k *LeaseKeeper) syncWatch(ctx context.Context, w *leaseWatch) {
	if w.src == nil {
		return
	}
	k.mu.Lock()
	leading := k.role == RoleLeader
	k.mu.Unlock()
	switch {
	case leading:
		w.stop()
		k.setWatching(false, "")
	case w.ch == nil && !k.clock.Now().Before(w.retryAt):
		wctx, cancel := context.WithCancel(ctx)
		w.ch, w.cancel, w.live = w.src.Watch(wctx), cancel, false
	}
}

// watchDown reports whether a broken watch was reported and not resumed.
func (k *LeaseKeeper) watchDown() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.watchWhy != ""
}

func (k *LeaseKeeper) setWatching(on bool, why string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.watching, k.watchWhy = on, why
}

// onChange acts on one report of the watch. It returns false when the
// report changes nothing (a repeated report that the watch is broken).
func (k *LeaseKeeper) onChange(ctx context.Context, w *leaseWatch, wk keeperWake) (StepResult, bool) {
	c := wk.change
	switch {
	case wk.closed:
		w.stop()
		w.retryAt = k.clock.Now().Add(k.cfg.RenewInterval)
		k.log.Warn("the lease watch ended; polling the lease every renew_interval until it is watched again")
		k.setWatching(false, "the watch ended; watching again after renew_interval")
		return k.Step(ctx), true
	case c.Err != nil && !errors.Is(c.Err, ports.ErrTooLarge):
		broken := fmt.Sprintf("the watch is down (%v); polling every renew_interval until it resumes", c.Err)
		if !w.live && k.watchDown() {
			k.setWatching(false, broken)
			return StepResult{}, false
		}
		w.live = false
		k.log.Warn("the lease watch is down; polling the lease every renew_interval until it resumes", "error", c.Err)
		k.setWatching(false, broken)
		// It may have missed a change: read the lease now.
		return k.Step(ctx), true
	}
	if !w.live && k.watchDown() {
		k.log.Info("the lease watch resumed; the standby no longer polls")
	}
	w.live = true
	k.setWatching(true, "")
	obj, err := c.Object, c.Err
	if c.Absent {
		obj, err = ports.Object{}, fmt.Errorf("watch %s: %w", k.cas, ports.ErrNotFound)
	}
	res := k.judge(ctx, obj, err)
	k.mu.Lock()
	k.decided = true
	k.mu.Unlock()
	return res, true
}
