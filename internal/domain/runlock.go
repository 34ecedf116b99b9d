package domain

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// ErrRunLocked means another run holds the run lock.
var ErrRunLocked = errors.New("another run holds the lock")

// DefaultRunLockTTL is a run lock's ttl: renewed every third of it.
const DefaultRunLockTTL = 30 * time.Second

// RunLockConfig configures a run lock.
type RunLockConfig struct {
	// Holder names this run in the record (host-pid).
	Holder string
	// TTL (DefaultRunLockTTL when 0): the holder renews the record every
	// TTL/3; a record unchanged for TTL is stale and may be taken over.
	TTL time.Duration
}

// runLockRecord is the lock object's content. Renewals counts the writes,
// so that every write's bytes differ (a content-hash version never repeats).
type runLockRecord struct {
	Holder   string    `json:"holder"`
	Since    time.Time `json:"since"`
	Renewed  time.Time `json:"renewed"`
	TTL      string    `json:"ttl"`
	Renewals int64     `json:"renewals"`
}

// RunLock is an exclusive lock for one run of a one-shot command, held as a
// record in an object store: created create-only, renewed by conditional
// writes every TTL/3, deleted on Release. Like the lease, it never compares
// clocks across processes: a run that finds the record watches it, refuses
// (ErrRunLocked) as soon as it changes (its holder renews it), and takes
// it over only when it stays unchanged for TTL (its holder died).
type RunLock struct {
	store   ports.ObjectCAS
	clock   ports.Clock
	ttl     time.Duration
	rec     runLockRecord
	mu      sync.Mutex
	version ports.Version
	lost    chan struct{}
	err     error
	stop    chan struct{}
	done    chan struct{}
}

// AcquireRunLock takes the lock in store, or returns an error wrapping
// ErrRunLocked that names the holder. It may watch a record for up to
// TTL first (see RunLock). The lock is renewed until Release.
func AcquireRunLock(ctx context.Context, store ports.ObjectCAS, clk ports.Clock, cfg RunLockConfig) (*RunLock, error) {
	if cfg.TTL <= 0 {
		cfg.TTL = DefaultRunLockTTL
	}
	now := clk.Now()
	l := &RunLock{store: store, clock: clk, ttl: cfg.TTL, lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{}),
		rec: runLockRecord{Holder: cfg.Holder, Since: now.UTC(), Renewed: now.UTC(), TTL: cfg.TTL.String()}}
	for attempt := 0; ; attempt++ {
		v, err := store.Put(ctx, l.encode(), ports.CreateOnly())
		if err == nil {
			l.version = v
			break
		}
		if !errors.Is(err, ports.ErrPreconditionFailed) || attempt == 3 {
			return nil, fmt.Errorf("take the lock %s: %w", store, err)
		}
		obj, err := store.Get(ctx)
		if errors.Is(err, ports.ErrNotFound) {
			continue // released meanwhile
		}
		if err != nil {
			return nil, fmt.Errorf("read the lock %s: %w", store, err)
		}
		if err := l.watch(ctx, obj); err != nil {
			return nil, err
		}
		l.rec.Renewals++
		v, err = store.Put(ctx, l.encode(), ports.IfVersion(obj.Version))
		if err == nil {
			l.version = v
			break
		}
		if !errors.Is(err, ports.ErrPreconditionFailed) && !errors.Is(err, ports.ErrNotFound) {
			return nil, fmt.Errorf("take over the lock %s: %w", store, err)
		}
	}
	go l.renew()
	return l, nil
}

// watch returns nil once obj stays unchanged for the ttl (its holder is
// gone), or ErrRunLocked as soon as it changes.
func (l *RunLock) watch(ctx context.Context, obj ports.Object) error {
	var rec runLockRecord
	who := "an unreadable record"
	if json.Unmarshal(obj.Data, &rec) == nil && rec.Holder != "" {
		who = fmt.Sprintf("%s, running since %s", rec.Holder, rec.Since.Format(time.RFC3339))
	}
	step := min(l.ttl/6, time.Second)
	start := l.clock.Now()
	for l.clock.Now().Sub(start) < l.ttl {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-l.clock.After(step):
		}
		cur, err := l.store.Get(ctx)
		switch {
		case errors.Is(err, ports.ErrNotFound):
			return nil // released: the create-only write decides
		case err != nil:
			return fmt.Errorf("read the lock %s: %w", l.store, err)
		case cur.Version != obj.Version:
			return fmt.Errorf("%w: %s is held by %s, and renewed", ErrRunLocked, l.store, who)
		}
	}
	return nil
}

func (l *RunLock) encode() []byte {
	b, _ := json.Marshal(l.rec)
	return b
}

// renew rewrites the record every ttl/3 until Release; when no renewal
// succeeds for 2/3 of the ttl, or another run took the record, the lock is
// lost (before a watcher could take it over).
func (l *RunLock) renew() {
	defer close(l.done)
	last := l.clock.Now()
	for {
		select {
		case <-l.stop:
			return
		case <-l.clock.After(l.ttl / 3):
		}
		l.mu.Lock()
		l.rec.Renewals++
		l.rec.Renewed = l.clock.Now().UTC()
		v, err := l.store.Put(context.Background(), l.encode(), ports.IfVersion(l.version))
		switch {
		case err == nil:
			l.version, last = v, l.clock.Now()
		case errors.Is(err, ports.ErrPreconditionFailed) || errors.Is(err, ports.ErrNotFound):
			l.err = fmt.Errorf("the lock %s was taken over by another run: %w", l.store, err)
		case l.clock.Now().Sub(last) >= 2*l.ttl/3:
			l.err = fmt.Errorf("the lock %s could not be renewed for %s: %w", l.store, l.clock.Now().Sub(last), err)
		}
		failed := l.err != nil
		l.mu.Unlock()
		if failed {
			close(l.lost)
			return
		}
	}
}

// Lost is closed when the lock is lost (Err says why): the run must stop.
func (l *RunLock) Lost() <-chan struct{} { return l.lost }

// Err says why the lock was lost (nil while it is held).
func (l *RunLock) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// Release stops the renewals and deletes the record (when it is still
// this run's).
func (l *RunLock) Release(ctx context.Context) error {
	select {
	case <-l.stop:
		return nil
	default:
	}
	close(l.stop)
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return nil
	}
	if err := l.store.Delete(ctx, ports.IfVersion(l.version)); err != nil && !errors.Is(err, ports.ErrNotFound) {
		return fmt.Errorf("release the lock %s: %w", l.store, err)
	}
	return nil
}
