package file

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// ErrNoNotifications is what a Change's Err wraps when the file's changes
// cannot be pushed: the filesystem does not report other hosts' writes, or
// the watch could not be set up. The reader polls instead.
var ErrNoNotifications = errors.New("no change notifications")

// The backoff between attempts to set up a watch that failed.
const (
	watchRetryMin = time.Second
	watchRetryMax = 30 * time.Second
)

// watchHooks are seams for tests of Watch; nil fields use the real ones.
type watchHooks struct {
	// fsType returns the statfs(2) f_type of a directory (Linux).
	fsType func(dir string) (uint32, error)
	// newNotifier makes the inotify watcher.
	newNotifier func() (*fsnotify.Watcher, error)
}

var _ ports.Watcher = (*Store)(nil)

// Watch implements ports.Watcher with inotify on the file's directory: the
// file is replaced by rename, so the directory is watched and its events
// filtered on the file's name. Each relevant event re-reads the file as Get
// does. The directory is created if missing, as a write would. On a
// network or cluster filesystem (NFS, EFS, SMB, FUSE, Ceph, ...), where
// inotify sees only this host's writes, the one Change is an Err and the
// reader polls. A watcher that cannot be set up (inotify limits) is retried
// with backoff, each failure reported as an Err.
func (s *Store) Watch(ctx context.Context) <-chan ports.Change {
	out := make(chan ports.Change, 1)
	w := &fileWatch{s: s, out: out, hooks: s.hooks}
	if w.hooks.newNotifier == nil {
		w.hooks.newNotifier = fsnotify.NewWatcher
	}
	go w.run(ctx)
	return out
}

// fileWatch is one Watch's state, owned by its goroutine.
type fileWatch struct {
	s     *Store
	out   chan ports.Change
	hooks watchHooks
	// last is the state last offered, when sent is set; an Err clears sent
	// so that the next state is offered whatever it is.
	last ports.Change
	sent bool
}

// offer puts c in the one-slot channel (ports.Offer): only the watch's
// goroutine sends.
func (w *fileWatch) offer(c ports.Change) { ports.Offer(w.out, c) }

// fail offers a broken-watch change.
func (w *fileWatch) fail(err error) {
	w.sent = false
	w.offer(ports.Change{Err: err})
}

// read reads the file as Get does and offers its state unless it is the
// one last offered. It reports whether the read failed for a reason other
// than the file's absence or size (a reason that may pass on its own).
func (w *fileWatch) read(ctx context.Context) (failed bool) {
	obj, err := w.s.Get(ctx)
	var c ports.Change
	switch {
	case err == nil:
		c = ports.Change{Object: obj}
	case errors.Is(err, ports.ErrNotFound):
		c = ports.Change{Absent: true}
	case ctx.Err() != nil:
		return false
	case errors.Is(err, ports.ErrTooLarge):
		// As Get returns it: the version, no data, ErrTooLarge. A write
		// that shrinks the file brings an event and the next state.
		w.sent = false
		w.offer(ports.Change{Object: obj, Err: err})
		return false
	default:
		w.fail(fmt.Errorf("watch %s: %w", w.s, err))
		return true
	}
	if w.sent && w.last.Absent == c.Absent && w.last.Object.Version == c.Object.Version {
		return false
	}
	w.last, w.sent = c, true
	w.offer(c)
	return false
}

// run watches until ctx ends, then closes the channel.
func (w *fileWatch) run(ctx context.Context) {
	defer close(w.out)
	dir := filepath.Dir(w.s.path)
	retry := watchRetryMin
	for ctx.Err() == nil {
		n, why, err := w.start(ctx, dir)
		if ctx.Err() != nil {
			if n != nil {
				_ = n.Close()
			}
			return
		}
		if why != "" {
			// Nothing will come: the reader polls until it cancels.
			w.fail(fmt.Errorf("watch %s: %w: %s", w.s, ErrNoNotifications, why))
			<-ctx.Done()
			return
		}
		if err != nil {
			w.fail(fmt.Errorf("watch %s: %w: %w; retrying in %s, the standby polls every renew_interval meanwhile", w.s, ErrNoNotifications, err, retry))
			if !sleep(ctx, retry) {
				return
			}
			retry = min(2*retry, watchRetryMax)
			continue
		}
		began := time.Now()
		err = w.follow(ctx, n, dir)
		_ = n.Close()
		if time.Since(began) > watchRetryMax {
			retry = watchRetryMin // it lived: the next failure is a new one
		}
		if err != nil && !errors.Is(err, errDirGone) {
			w.fail(fmt.Errorf("watch %s: %w: %w; watching again in %s", w.s, ErrNoNotifications, err, retry))
		}
		// A directory removed or moved is watched anew (created again) and
		// the file's state there reported: nothing was missed. Either way a
		// watch that keeps ending is set up again no faster than the backoff.
		if err != nil {
			if !sleep(ctx, retry) {
				return
			}
			retry = min(2*retry, watchRetryMax)
		}
	}
}

// start creates the directory if missing, checks its filesystem and sets up
// the inotify watch on it. A filesystem whose notifications would miss
// other hosts' writes returns why instead.
func (w *fileWatch) start(ctx context.Context, dir string) (n *fsnotify.Watcher, why string, err error) {
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, "", fmt.Errorf("create the directory %s: %w", dir, err)
	}
	if why, err := unwatchable(dir, w.hooks.fsType); err != nil {
		return nil, "", fmt.Errorf("identify the filesystem of %s: %w", dir, err)
	} else if why != "" {
		return nil, why, nil
	}
	n, err = w.hooks.newNotifier()
	if err != nil {
		return nil, "", fmt.Errorf("start inotify: %w: %s", err, limitHint(err))
	}
	if err := n.Add(dir); err != nil {
		_ = n.Close()
		return nil, "", fmt.Errorf("watch the directory %s: %w: %s", dir, err, limitHint(err))
	}
	return n, "", nil
}

// limitHint says what to do about an error setting up inotify.
func limitHint(err error) string {
	switch {
	case errors.Is(err, syscall.ENOSPC):
		return "raise fs.inotify.max_user_watches (sysctl), which every watched directory of this user counts against"
	case errors.Is(err, syscall.EMFILE), errors.Is(err, syscall.ENFILE):
		return "raise fs.inotify.max_user_instances (sysctl) or the open-file limit (ulimit -n)"
	case errors.Is(err, fs.ErrPermission):
		return "check the permissions of the directory"
	}
	return "check fs.inotify.max_user_instances and fs.inotify.max_user_watches (sysctl)"
}

// follow reports the file's state at once and after each event on it,
// until ctx ends (nil) or the watch breaks (the error).
func (w *fileWatch) follow(ctx context.Context, n *fsnotify.Watcher, dir string) error {
	retry := watchRetryMin
	var timer *time.Timer
	var fire <-chan time.Time
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	reread := func() {
		if !w.read(ctx) {
			retry, fire = watchRetryMin, nil
			return
		}
		// A read failed (EIO, ESTALE, permission): try again later, as
		// no event may come to prompt it.
		if timer == nil {
			timer = time.NewTimer(retry)
		} else {
			timer.Reset(retry)
		}
		fire = timer.C
		retry = min(2*retry, watchRetryMax)
	}
	reread()
	errPause := watchRetryMin / 4 // after an inotify error (overflow)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-fire:
			fire = nil
			reread()
		case ev, ok := <-n.Events:
			switch {
			case !ok:
				return errors.New("the inotify watcher closed")
			case ev.Name == dir && ev.Op.Has(fsnotify.Remove|fsnotify.Rename):
				// inotify dropped the watch with the directory.
				return fmt.Errorf("%w: %s", errDirGone, ev)
			case ev.Name == w.s.path:
				errPause = watchRetryMin / 4
				reread()
			}
		case err, ok := <-n.Errors:
			if !ok {
				return errors.New("the inotify watcher closed")
			}
			// A queue overflow loses events: say so, then the current
			// state, after a pause that doubles while errors keep coming.
			w.fail(fmt.Errorf("watch %s: %w: %w; reading the file again in %s", w.s, ErrNoNotifications, err, errPause))
			if !sleep(ctx, errPause) {
				return nil
			}
			errPause = min(2*errPause, watchRetryMax)
			reread()
		}
	}
}

// errDirGone is a watched directory that was removed or moved away.
var errDirGone = errors.New("the watched directory was removed or moved")

// sleep waits d or until ctx ends, reporting whether d passed.
func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
